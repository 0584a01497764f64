"""What the suite relies on in vLLM-Omni 0.30.0, derived from the repository wherever it holds it.

Each category is read from the code that uses the names, not restated here, so a profile that gains
a flag or a client that sends a new field is checked without anyone remembering to add it:

- flags: every `args:` key of engine/profiles/vllm-omni/*.yaml (profiles that declare
  `needs_source` are checked apart: their extra flags are expected to be missing from 0.30.0), plus
  the flags the harness itself puts on the `vllm serve` line (engine_kinds: the vllm-omni argv);
- form fields, file parts, routes: captured from the judge's real client (TimedClient with a mock
  transport) sending the 910C campaign's requests built by workload.build_request;
- response headers: client.SERVER_HEADERS;
- environment variables and their defaults: h3_limits.SERVER_TIME_BOUNDS;
- limits: h3_limits' constants, each mapped below to where upstream defines the same limit;
- hooks: engine/vllm_omni/hooks.py UPSTREAM_NAMES; Cache-DiT's names: its CACHE_DIT_NAMES, read
  in the cache-dit 1.5.0 wheel the vLLM-Omni wheel pins;
- base-vLLM flags: the profiles' flags that vLLM's own parser defines, read in the vLLM 0.30.0
  wheel (tests/contract/base_vllm.py);
- call order: what the extension counts on about when upstream calls what (base_vllm.CALL_ORDER).

What cannot be derived is listed here with the reason: why each base-vLLM flag is used, the
upstream module of each environment variable, and the upstream place of each limit.
"""

from __future__ import annotations

import email.parser
import email.policy
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from tests.contract.base_vllm import CALL_ORDER

REPO_ROOT = Path(__file__).resolve().parents[2]
PROFILES_DIR = REPO_ROOT / "engine" / "profiles" / "vllm-omni"
CAMPAIGN_910C = REPO_ROOT / "fixtures" / "campaigns" / "910c.yaml"
HOOKS_MODULE = "engine.vllm_omni.hooks"
LIMITS_MODULE = "ref2va_accept.campaign._h3_limits"

CATEGORIES = ("flag", "base-flag", "needs-source", "form", "route", "header", "env", "limit",
              "hook", "cache-dit", "order")

# Flags of `vllm serve` that vLLM itself defines (vllm/entrypoints/launchers/cli_args.py
# make_arg_parser and vLLM's EngineArgs), which vllm_omni/entrypoints/cli/serve.py starts from
# before adding its OmniConfig group. They are not in the vLLM-Omni wheel: the contract reads them
# in vLLM 0.30.0's own wheel (base_vllm.serve_parser_flags), and checks that the vLLM-Omni wheel
# does not define them too (argparse would refuse the duplicate, which is why serve.py wraps
# --enable-sleep-mode in try/except). Why each is used stays here, for the message.
BASE_VLLM_FLAGS: dict[str, str] = {
    "dtype": "vLLM ModelConfig.dtype; consumed as OmniDiffusionConfig.dtype",
    "trust-remote-code": "vLLM ModelConfig.trust_remote_code; H3's VAEs load checkpoint code",
    "worker-extension-cls": "vLLM ParallelConfig.worker_extension_cls; reaches diffusion workers",
    "enforce-eager": "vLLM ModelConfig.enforce_eager; read as OmniDiffusionConfig.enforce_eager",
    "profiler-config": "vLLM's profiler config; enables /start_profile and /stop_profile",
    "host": "vLLM's frontend: the listening address (the harness binds loopback)",
    "port": "vLLM's frontend: the listening port (the harness picks a free one)",
}

# Which upstream module reads each server-side time bound (h3_limits.SERVER_TIME_BOUNDS lists the
# variables and the defaults the judge assumes; this says where to confirm them).
ENV_READERS: dict[str, str] = {
    "VLLM_OMNI_DLO_DP_WAVE_TIMEOUT": "vllm_omni/diffusion/executor/multiproc_executor.py",
    "VLLM_OMNI_VIDEO_SYNC_TIMEOUT": "vllm_omni/entrypoints/openai/video/generation/helpers.py",
}

_REF_VIDEO = "vllm_omni/model_executor/models/minimax_h3/reference_video.py"
_HELPERS = "vllm_omni/entrypoints/openai/video/generation/helpers.py"
_ENCODER = "vllm_omni/model_executor/models/minimax_h3/encoder_processing.py"
_PREPROC = "vllm_omni/model_executor/models/minimax_h3/preprocessing.py"
_IMAGE_SHAPE = "resolve_minimax_h3_reference_image_shape"


@dataclass(frozen=True)
class LimitSource:
    """Where upstream holds a judge-side limit: a module constant, or a literal compared inline,
    in one comparison of that function named by `bound`: the compared expression as upstream
    writes it (`ast.unparse`), the operator, and `_` for the limit, the expression on the left
    (`"min(width, height) < _"`; `0.4 <= ratio` is `"ratio >= _"`)."""

    path: str
    constant: str | None = None  # module-level name
    function: str | None = None  # or: a function comparing against the literal value ...
    bound: str | None = None  # ... in this comparison


# h3_limits constant -> where upstream defines the same limit (several places must all agree).
LIMIT_SOURCES: dict[str, tuple[LimitSource, ...]] = {
    "MIN_REFERENCE_AUDIO_S": (LimitSource(_REF_VIDEO, "MINIMAX_H3_MIN_REFERENCE_DURATION"),),
    "MAX_REFERENCE_AUDIO_S": (LimitSource(_REF_VIDEO, "MINIMAX_H3_MAX_REFERENCE_DURATION"),
                              LimitSource(_REF_VIDEO, "MINIMAX_H3_MAX_REFERENCE_TOTAL_DURATION")),
    "MAX_AUDIO_BYTES": (LimitSource(_REF_VIDEO, "MINIMAX_H3_MAX_AUDIO_BYTES"),
                        LimitSource(_HELPERS, "MINIMAX_H3_MAX_REFERENCE_AUDIO_BYTES")),
    "AUDIO_FORMATS": (LimitSource(_REF_VIDEO, "MINIMAX_H3_AUDIO_FORMATS"),),
    "AUDIO_CODECS": (LimitSource(_REF_VIDEO, "MINIMAX_H3_AUDIO_CODECS"),),
    "H3_FPS": (LimitSource(_ENCODER, "MINIMAX_H3_FPS"), LimitSource(_REF_VIDEO, "MINIMAX_H3_FPS")),
    "MAX_IMAGE_BYTES": (LimitSource(_HELPERS, "MINIMAX_H3_MAX_REFERENCE_IMAGE_BYTES"),),
    "MAX_VIDEO_BYTES": (LimitSource(_HELPERS, "MINIMAX_H3_MAX_REFERENCE_VIDEO_BYTES"),
                        LimitSource(_REF_VIDEO, "MINIMAX_H3_MAX_VIDEO_BYTES")),
    "MAX_REFERENCE_COUNT": (LimitSource(_HELPERS, "MINIMAX_H3_MAX_REFERENCE_COUNT"),),
    "IMAGE_FORMATS": (LimitSource(_HELPERS, "MINIMAX_H3_REFERENCE_IMAGE_FORMATS"),),
    "MIN_IMAGE_EDGE": (LimitSource(_PREPROC, function=_IMAGE_SHAPE,
                                   bound="min(width, height) < _"),),
    "MAX_IMAGE_EDGE": (LimitSource(_PREPROC, function=_IMAGE_SHAPE,
                                   bound="max(width, height) > _"),),
    "MIN_ASPECT": (LimitSource(_PREPROC, function=_IMAGE_SHAPE, bound="ratio >= _"),),
    "MAX_ASPECT": (LimitSource(_PREPROC, function=_IMAGE_SHAPE, bound="ratio <= _"),),
}
# Upper-case names of h3_limits that are not limits of the server (units, labels, tables).
NOT_LIMITS = frozenset({"ENGINE", "MIB", "SERVER_TIME_BOUNDS"})


@dataclass(frozen=True)
class Item:
    """One upstream name the suite relies on; `id` is what a failing test is called."""

    category: str
    key: str
    origin: str  # where in this repository the reliance comes from
    expected: Any = None  # category-specific: a value, a kind, a flag's value-taking
    upstream: str = ""  # where in the wheel it is expected

    @property
    def id(self) -> str:
        return f"{self.category}:{self.key}"


@dataclass
class Derivation:
    """The relied-on items, and each category whose derivation failed (with why)."""

    items: list[Item] = field(default_factory=list)
    problems: dict[str, str] = field(default_factory=dict)

    def category(self, name: str) -> list[Item]:
        return [i for i in self.items if i.category == name]


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise LookupError(f"cannot import {name}: {exc}") from None


# --------------------------------------------------------------------------- flags


def _profile_flag_items() -> list[Item]:
    from ref2va_accept.campaign import load_profile  # the judge's own profile loader

    files = sorted(PROFILES_DIR.glob("*.yaml"))
    if not files:
        raise LookupError(f"no launch profile in {PROFILES_DIR.relative_to(REPO_ROOT)}")
    runnable: dict[str, dict[str, Any]] = {}
    waiting: dict[str, tuple[Path, dict[str, Any]]] = {}
    for path in files:
        prof = load_profile(path)
        rel = path.relative_to(REPO_ROOT).as_posix()
        # `false` means the flag is left off the command line: nothing relied on.
        passed = {k: v for k, v in prof.args.items() if v is not False}
        if prof.needs_source is None:
            runnable[rel] = passed
        else:
            waiting[rel] = (path, passed)
    by_flag: dict[str, list[tuple[str, Any]]] = {}
    for rel, args in runnable.items():
        for flag, value in args.items():
            by_flag.setdefault(flag, []).append((rel, value))
    by_flag.update({f: [("src/ref2va_accept/engines/_kinds.py vllm-omni argv", v)]
                    for f, v in _harness_flags().items() if f not in by_flag})
    items: list[Item] = []
    for flag, uses in sorted(by_flag.items()):
        origin = ", ".join(sorted({rel for rel, _ in uses}))
        bare = {value is True for _, value in uses}
        if flag in BASE_VLLM_FLAGS:
            items.append(Item("base-flag", f"--{flag}", origin, BASE_VLLM_FLAGS[flag]))
        else:
            # expected: True when every use passes a value, False when every use is bare
            expected = None if len(bare) > 1 else not bare.pop()
            items.append(Item("flag", f"--{flag}", origin, expected))
    for rel, (_, args) in sorted(waiting.items()):
        extra = tuple(sorted(f for f in args if f not in by_flag and f not in BASE_VLLM_FLAGS))
        items.append(Item("needs-source", Path(rel).name, rel, extra))
    return items


def _harness_flags() -> dict[str, Any]:
    """Flags the harness adds to every `vllm serve` line, read from the line it really builds."""
    from ref2va_accept.engines import LOOPBACK, VLLM_OMNI

    argv = VLLM_OMNI.argv(("vllm",), "MODEL", Path("profile.yaml"), (), LOOPBACK, 1)
    out: dict[str, Any] = {}
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            following = argv[i + 1] if i + 1 < len(argv) else "--"
            out[arg[2:]] = True if following.startswith("--") else following
    return out


# --------------------------------------------------------------------------- client


@dataclass(frozen=True)
class Captured:
    method: str
    path: str
    parts: dict[str, str]  # multipart part name -> "form" or "file"


def capture_client_traffic() -> tuple[list[Captured], dict[str, str]]:
    """What the judge's client really sends for the 910C campaign, over a mock transport."""
    from ref2va_accept.arms import Diagnostics, build_request
    from ref2va_accept.campaign import load_campaign
    from ref2va_accept.planning import plan_campaign
    from ref2va_accept.timing import ClientTimeouts, TimedClient

    campaign = load_campaign(CAMPAIGN_910C)
    seen: list[Captured] = []

    def handler(request: httpx.Request) -> httpx.Response:
        parts: dict[str, str] = {}
        ctype = request.headers.get("content-type", "")
        if ctype.startswith("multipart/"):
            raw = b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + request.read()
            message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(raw)
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition")
                filename = part.get_param("filename", header="content-disposition")
                if isinstance(name, str):
                    parts[name] = "file" if filename is not None else "form"
        seen.append(Captured(request.method, request.url.path, parts))
        # a stream, not content: the client reads the body raw, as it would from a socket
        return httpx.Response(200, stream=httpx.ByteStream(b"\0" * 8),
                              headers={"content-type": "video/mp4"})

    client = TimedClient("http://engine.invalid", ClientTimeouts(request_s=5.0),
                         transport=httpx.MockTransport(handler))
    with client:
        for plan in plan_campaign(campaign).values():
            for arm in plan.arms:
                seed = plan.seeds[0]
                for diagnostics in (None, Diagnostics(Path("dumps"), ("cond.text",))):
                    request = build_request(plan, arm, seed, diagnostics)
                    client.generate(request, arm=arm.id, track=plan.track_id, kind="contract",
                                    index=0, seed=seed)
    from ref2va_accept.timing import SERVER_HEADERS

    return seen, dict(SERVER_HEADERS)


def _client_items() -> list[Item]:
    traffic, headers = capture_client_traffic()
    if not traffic:
        raise LookupError(f"the client sent nothing for {CAMPAIGN_910C.relative_to(REPO_ROOT)}")
    origin = "src/ref2va_accept/timing/_clock.py + workload.build_request (910c campaign)"
    items: dict[str, Item] = {}
    for cap in traffic:
        route = f"{cap.method} {cap.path}"
        items.setdefault(f"route:{route}", Item("route", route, origin, (cap.method, cap.path)))
        for name, kind in cap.parts.items():
            items.setdefault(f"form:{name}", Item("form", name, origin, (kind, cap.method,
                                                                         cap.path)))
    posts = sorted({(c.method, c.path) for c in traffic if c.parts})
    for header in headers:
        items[f"header:{header}"] = Item("header", header.lower(),
                                         "src/ref2va_accept/timing/_clock.py SERVER_HEADERS", posts)
    return list(items.values())


# --------------------------------------------------------------------------- judge-side limits


def _env_items() -> list[Item]:
    limits = _import(LIMITS_MODULE)
    bounds = getattr(limits, "SERVER_TIME_BOUNDS", None)
    if not isinstance(bounds, dict) or not bounds:
        raise LookupError(f"{LIMITS_MODULE}.SERVER_TIME_BOUNDS: a non-empty "
                          f"{{variable: default seconds}} dict, found {bounds!r}")
    return [Item("env", f"{name}={default:g}", f"{LIMITS_MODULE}.SERVER_TIME_BOUNDS",
                 (name, float(default)), ENV_READERS.get(name, ""))
            for name, default in sorted(bounds.items())]


def judge_limits(module: ModuleType) -> dict[str, Any]:
    """The limit constants a judge-side module defines (upper-case, plain values)."""
    return {name: value for name, value in vars(module).items()
            if name.isupper() and not name.startswith("_") and name not in NOT_LIMITS
            and isinstance(value, int | float | frozenset | str) and not isinstance(value, bool)}


def _limit_items() -> list[Item]:
    limits = judge_limits(_import(LIMITS_MODULE))
    if not limits:
        raise LookupError(f"{LIMITS_MODULE} defines no limit constant")
    items: list[Item] = []
    constants = [s.constant for srcs in LIMIT_SOURCES.values() for s in srcs if s.constant]
    for name, value in sorted(limits.items()):
        for source in LIMIT_SOURCES.get(name, (None,)):
            if source is None:
                key = f"{name}(unmapped)"
            elif source.constant is None:
                key = f"{source.function}:{name}"
            elif constants.count(source.constant) > 1:  # the same name in two upstream modules
                key = f"{source.constant}@{Path(source.path).stem}"
            else:
                key = source.constant
            items.append(Item("limit", key, f"{LIMITS_MODULE}.{name}", (name, value, source),
                              source.path if source else ""))
    return items


def _hook_items() -> list[Item]:
    hooks = _import(HOOKS_MODULE)
    names = getattr(hooks, "UPSTREAM_NAMES", None)
    if not names:
        raise LookupError(f"{HOOKS_MODULE}.UPSTREAM_NAMES: a non-empty tuple of "
                          f"(file inside the wheel, kind, name), found {names!r}")
    items: dict[str, Item] = {}
    for entry in names:
        path, kind, name = entry
        key = name if name not in {i.key for i in items.values()} else f"{name}[{kind}]"
        items[key] = Item("hook", key, f"{HOOKS_MODULE}.UPSTREAM_NAMES", kind, path)
    return list(items.values())


def _cache_dit_items() -> list[Item]:
    names = getattr(_import(HOOKS_MODULE), "CACHE_DIT_NAMES", None)
    if not names:
        raise LookupError(f"{HOOKS_MODULE}.CACHE_DIT_NAMES: a non-empty tuple of "
                          f"(file inside the cache-dit wheel, kind, name), found {names!r}")
    items: dict[str, Item] = {}
    for path, kind, name in names:
        key = name if name not in items else f"{name}[{kind}]"
        items[key] = Item("cache-dit", key, f"{HOOKS_MODULE}.CACHE_DIT_NAMES", kind, path)
    return list(items.values())


def _order_items() -> list[Item]:
    return [Item("order", key, "engine/vllm_omni/extension.py", what)
            for key, (what, _) in CALL_ORDER.items()]


_DERIVERS: dict[str, Callable[[], list[Item]]] = {
    "flag": _profile_flag_items,  # also yields base-flag and needs-source items
    "client": _client_items,  # form, route, header
    "env": _env_items,
    "limit": _limit_items,
    "hook": _hook_items,
    "cache-dit": _cache_dit_items,
    "order": _order_items,
}


def derive() -> Derivation:
    """Every relied-on item; a category whose source cannot be read is recorded, not skipped."""
    out = Derivation()
    for name, derive_one in _DERIVERS.items():
        try:
            out.items += derive_one()
        except Exception as exc:  # any failure must surface as a failing test, with its reason
            out.problems[name] = f"{type(exc).__name__}: {exc}"
    return out
