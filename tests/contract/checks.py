"""Checks one relied-on item against the wheel: None when upstream still provides it, else why not.

Each message names the item, what was expected, what the wheel has instead and where (a path
inside the wheel), so a failing contract test says what moved without a debugger.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any

from tests.contract.base_vllm import CALL_ORDER, serve_parser_flags
from tests.contract.relied_on import Item, LimitSource
from tests.contract.upstream import (
    API_SERVER_MODULE,
    ENV_INVENTORY_MODULE,
    SERVE_BUILDER,
    SERVE_MODULE,
    Upstream,
)

_SERVE = f"{SERVE_MODULE} {SERVE_BUILDER}"


def _flag(up: Upstream, item: Item) -> str | None:
    flag = up.serve_flags.get(item.key)
    if flag is None:
        return (f"{item.origin} passes {item.key}, but the `vllm serve --omni` parser built in "
                f"{_SERVE} adds no such option")
    if item.expected is not None and flag.takes_value != item.expected:
        how = "a value" if item.expected else "no value (a bare flag)"
        found = "takes a value" if flag.takes_value else "takes no value"
        return (f"{item.origin} passes {item.key} with {how}, but upstream's option "
                f"{'/'.join(flag.options)} {found} ({flag.where})")
    return None


def _released(up: Upstream, which: str) -> Upstream | str:
    other: Upstream | str | None = up.base if which == "base" else up.cache_dit
    if other is None:
        return f"the {'vLLM' if which == 'base' else 'Cache-DiT'} wheel was not read"
    return other


def _base_flag(up: Upstream, item: Item) -> str | None:
    # vLLM defines it; if the wheel's omni group added it too, argparse would refuse the
    # duplicate at startup (or the wheel would shadow vLLM's meaning): either way, re-read.
    flag = up.serve_flags.get(item.key)
    if flag is not None:
        return (f"{item.key} is listed as a base-vLLM flag ({item.expected}), but the wheel's "
                f"serve parser defines it too at {flag.where}: re-read its meaning there")
    base = _released(up, "base")
    if isinstance(base, str):
        return f"{item.key} cannot be checked against vLLM's own parser: {base}"
    try:
        defined = _base_flags(up, base)
    except LookupError as exc:
        return f"{item.key}: vLLM's `vllm serve` parser cannot be read: {exc}"
    if item.key not in defined:
        return (f"{item.key} ({item.expected}): vLLM 0.30.0's `vllm serve` parser "
                "(make_arg_parser, FrontendArgs and AsyncEngineArgs) defines no such option")
    return None


def _base_flags(up: Upstream, base: Upstream) -> dict[str, str]:
    cached = getattr(base, "_serve_parser_flags", None)
    if cached is None:
        cached = serve_parser_flags(up, base)
        base._serve_parser_flags = cached  # type: ignore[attr-defined]
    return cached


def _cache_dit(up: Upstream, item: Item) -> str | None:
    released = _released(up, "cache_dit")
    if isinstance(released, str):
        return f"{item.origin} relies on {item.expected} {item.key}: {released}"
    missing = released.defines(item.upstream, item.expected, item.key.split("[")[0])
    if missing is not None:
        return f"{item.origin} relies on {item.expected} {item.key}; cache-dit 1.5.0: {missing}"
    return None


def _order(up: Upstream, item: Item) -> str | None:
    what, read = CALL_ORDER[item.key]
    problem = read(up)
    return None if problem is None else f"the extension relies on this: {what}; {problem}"


def _needs_source(up: Upstream, item: Item) -> str | None:
    extra: tuple[str, ...] = item.expected
    if not extra:
        return (f"{item.origin} declares needs_source but passes no flag beyond the runnable "
                f"profiles': say what it needs that 0.30.0 lacks, or drop needs_source")
    present = [f"--{f}" for f in extra if f"--{f}" in up.serve_flags]
    if len(present) == len(extra):
        return (f"{item.origin} declares needs_source, but the pinned wheel's serve parser "
                f"({_SERVE}) has every flag it adds ({', '.join(present)}): needs_source is stale")
    return None


def _route(up: Upstream, item: Item) -> str | None:
    method, path = item.expected
    if up.route(method, path) is None:
        routes = sorted(f"{r.method} {r.path}" for r in up.routes()
                        if r.path.split("/")[:3] == path.split("/")[:3])
        return (f"the client sends {method} {path}; {API_SERVER_MODULE} declares no such route "
                f"(nearby: {', '.join(routes) or 'none'})")
    return None


def _form(up: Upstream, item: Item) -> str | None:
    kind, method, path = item.expected
    try:
        fields, where = up.route_form_fields(method, path)
    except LookupError as exc:
        return f"the client sends {kind} part {item.key!r} to {method} {path}; {exc}"
    if item.key not in fields:
        return (f"the client sends {kind} part {item.key!r} to {method} {path}, but the route "
                f"accepts no such Form/File parameter (looked in {where})")
    if fields[item.key] != kind:
        return (f"the client sends {item.key!r} as a {kind} part, but upstream declares it "
                f"{'File' if fields[item.key] == 'file' else 'Form'}(...) ({where})")
    return None


def _header(up: Upstream, item: Item) -> str | None:
    for method, path in item.expected:
        route = up.route(method, path)
        if route is None:
            return f"{item.origin} reads {item.key} from {method} {path}, a route upstream lacks"
        found = up.response_headers(API_SERVER_MODULE, route.function)
        if item.key not in found:
            return (f"{item.origin} reads response header {item.key!r}, but {API_SERVER_MODULE} "
                    f"{route.function} ({method} {path}) sets only {sorted(found)}")
    return None


def _same_number(a: Any, b: Any) -> bool:
    return isinstance(a, int | float) and isinstance(b, int | float) \
        and not isinstance(a, bool) and math.isclose(float(a), float(b), rel_tol=1e-12)


def _env(up: Upstream, item: Item) -> str | None:
    name, default = item.expected
    if not item.upstream:
        return (f"{item.origin} lists {name}, but the contract does not know which upstream "
                f"module reads it: add it to relied_on.ENV_READERS")
    if not up.has_module(item.upstream):
        return f"{name}: expected to be read in {item.upstream}, which the wheel no longer has"
    reads = [r for r in up.env_reads(item.upstream) if r.name == name]
    if not reads:
        elsewhere = up.env_reads_anywhere(name)
        moved = ", ".join(f"{r.module}:{r.line} default {r.default!r}" for r in elsewhere)
        return (f"{name}: expected os.environ.get({name!r}, {default:g}) in {item.upstream}; "
                f"not read there" + (f" (read in {moved})" if elsewhere
                                     else " nor anywhere else in the wheel"))
    if not any(_same_number(r.default, default) for r in reads):
        found = ", ".join(f"{r.module}:{r.line} default {r.default!r}" for r in reads)
        return (f"{name}: the judge assumes a default of {default:g} s, upstream reads it with "
                f"{found}")
    inventory = up.env_inventory
    if name not in inventory:
        return (f"{name}: read in {item.upstream} but not classified in {ENV_INVENTORY_MODULE} "
                f"(the wheel's reviewed variable list)")
    return None


def _limit(up: Upstream, item: Item) -> str | None:
    _, value, source = item.expected
    if source is None:
        return (f"{item.origin} = {value!r} has no upstream place in relied_on.LIMIT_SOURCES: "
                f"add where 0.30.0 defines the same limit")
    assert isinstance(source, LimitSource)
    if not up.has_module(source.path):
        return f"{item.origin}: expected in {source.path}, which the wheel no longer has"
    if source.constant is not None:
        constants = up.constants(source.path)
        if source.constant not in constants:
            return (f"{item.origin} = {value!r} mirrors {source.constant} in {source.path}, "
                    f"which no longer defines it as a constant")
        found = constants[source.constant]
        same = found == value or _same_number(found, value)
        if not same:
            return (f"{item.origin} = {value!r}, but upstream {source.path} "
                    f"{source.constant} = {found!r}")
        return None
    assert source.function is not None
    if source.bound is None:
        return (f"{item.origin} = {value!r}: relied_on.LIMIT_SOURCES names {source.function} in "
                f"{source.path} but not the comparison there that holds the limit (bound=)")
    expression, op, _ = source.bound.rsplit(" ", 2)
    try:
        found = [c for c in up.comparisons(source.path, source.function) if c[0] == expression]
    except LookupError as exc:
        return f"{item.origin} = {value!r}: {exc}"
    if any(c[1] == op and _same_number(c[2], value) for c in found):
        return None
    seen = ", ".join(f"{e} {o} {v!r}" for e, o, v in found)
    return (f"{item.origin} = {value!r} should be upstream's `{expression} {op} {value!r}` in "
            f"{source.path} {source.function}, which "
            + (f"compares {seen}" if found else f"never compares {expression} with a literal"))


def _hook(up: Upstream, item: Item) -> str | None:
    name = re.sub(r"\[[a-z_]+\]$", "", item.key)  # a name listed twice: key `name[kind]`
    missing = up.defines(item.upstream, item.expected, name)
    if missing is not None:
        return f"{item.origin} relies on {item.expected} {name}; {missing}"
    return None


CHECKS: dict[str, Callable[[Upstream, Item], str | None]] = {
    "flag": _flag, "base-flag": _base_flag, "needs-source": _needs_source, "route": _route,
    "form": _form, "header": _header, "env": _env, "limit": _limit, "hook": _hook,
    "cache-dit": _cache_dit, "order": _order,
}


def check(up: Upstream, item: Item) -> str | None:
    """None when the wheel provides `item`; otherwise one message naming it and where."""
    problem = CHECKS[item.category](up, item)
    return None if problem is None else f"{item.id}: {problem}"


def check_all(up: Upstream, items: Iterable[Item]) -> dict[str, str]:
    """item id -> message, for every item the wheel does not provide."""
    out: dict[str, str] = {}
    for item in items:
        problem = check(up, item)
        if problem is not None:
            out[item.id] = problem
    return out

