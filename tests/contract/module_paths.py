"""How upstream reaches its modules, read statically: module paths, call sites, attributes set.

Three questions the worker extension's hooks depend on, each answered from the wheel's syntax
trees (kinds `module_path`, `call` and `sets` of engine/vllm_omni/hooks.py):

- `module_path` (`Class:path`): is there a module at `path` (attribute names, a module list's
  items by index) inside an instance of `Class`? Followed through the `self.attr = ...`
  assignments of the wheel's classes (and their bases in the wheel): a call of a wheel class
  (`MiniMaxH3Qwen3VLTextModel(...)`), `nn.ModuleList([Cls(...) ...])`, or an alias of another
  path (`self.model = self.remote.model`). A module built by code the wheel does not ship (vLLM's
  layers; H3's VAEs, loaded from the checkpoint) is opaque: an attribute of it counts only where
  the class's own code reaches it (`self.model.encoder`, under either name of an alias).
- `call` (`function:callee`): does the function call `callee(...)` itself, through
  `nn.Module.__call__` (so forward hooks fire), and not `callee.forward(...)`? `callee` is a
  dotted name, or `self.blocks[*]`: a loop over `self.blocks` (or `enumerate(self.blocks)`) whose
  body calls the loop variable.
- `sets` (`function:param.attr`): does the function assign `param.attr = ...` on its parameter?

Each answer is None (upstream provides it) or a message naming the file, the class or function
and what it has instead.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tests.contract.upstream import _dotted, assigned_targets

if TYPE_CHECKING:
    from tests.contract.upstream import Upstream

_CONTAINERS = {"ModuleList", "ModuleDict", "Sequential"}
Class = tuple[str, ast.ClassDef]  # (wheel path, class definition)


@dataclass(frozen=True)
class Reached:
    """Where a module path leads in the wheel."""

    where: str  # for messages: "file Class.attr"
    cls: Class | None = None  # the wheel's class of the module, when known
    items: bool = False  # a module list of `cls` (or of opaque modules)
    owner: Class | None = None  # opaque: the wheel class whose code reaches the module
    reach: tuple[str, ...] = ()  # opaque: how the owner's code spells it after `self.`


def _functions(cls: ast.ClassDef) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    yield from (n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))


def _assigned(up: Upstream, cls: Class, attr: str) -> list[tuple[Class, ast.expr]]:
    """The values assigned as `self.attr = value` in the class and its bases in the wheel."""
    return [(found, value) for found in up._mro(cls[0], cls[1].name)
            for value in _self_assignments(up, found[1]).get(attr, [])]


def _self_assignments(up: Upstream, cls: ast.ClassDef) -> dict[str, list[ast.expr]]:
    """attr -> the values of `self.attr = value` in the class's own methods, in source order;
    found once per class of a tree (each module path followed walks the same classes again)."""
    if cls not in up.self_assignments:
        out: dict[str, list[ast.expr]] = {}
        for fn in _functions(cls):
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign):
                    pairs = [(t, node.value) for t in node.targets]
                elif isinstance(node, ast.AnnAssign) and node.value is not None:
                    pairs = [(node.target, node.value)]
                else:
                    continue
                for target, value in pairs:
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                            and target.value.id == "self":
                        out.setdefault(target.attr, []).append(value)
        up.self_assignments[cls] = out
    return up.self_assignments[cls]


def _alternatives(value: ast.expr) -> Iterator[ast.expr]:
    if isinstance(value, ast.IfExp):
        yield from _alternatives(value.body)
        yield from _alternatives(value.orelse)
    else:
        yield value


def _called_class(up: Upstream, where: Class, call: ast.Call) -> Class | None:
    dotted = _dotted(call.func)
    return up._class(where[0], dotted[-1]) if dotted else None


def _interpret(up: Upstream, owner: Class, attr: str, value: ast.expr) -> Reached | str | None:
    """What one assigned value makes of `self.attr`; None when it is no module (None, ...)."""
    where = f"{owner[0]} {owner[1].name}.{attr}"
    chain = _dotted(value)
    if chain is not None and len(chain) > 1 and chain[0] == "self":  # an alias
        found = follow_from(up, owner, chain[1:])
        if isinstance(found, Reached) and found.owner == owner:
            return Reached(where, owner=owner, reach=(*found.reach, attr))
        return found
    if not isinstance(value, ast.Call):
        return None
    dotted = _dotted(value.func)
    if dotted and dotted[-1] in _CONTAINERS:
        element: ast.expr | None = None
        arg = value.args[0] if value.args else None
        if isinstance(arg, ast.ListComp | ast.GeneratorExp):
            element = arg.elt
        elif isinstance(arg, ast.List | ast.Tuple) and arg.elts:
            element = arg.elts[0]
        cls = _called_class(up, owner, element) if isinstance(element, ast.Call) else None
        return Reached(where, cls=cls, items=True)
    cls = _called_class(up, owner, value)
    if cls is not None:
        return Reached(where, cls=cls)
    return Reached(where, owner=owner, reach=(attr,))  # built by code outside the wheel


def _reaches(up: Upstream, owner: Class, spelling: tuple[str, ...]) -> bool:
    """Whether the owner's code (or its bases') reaches `self.<spelling>` (or deeper)."""
    want = ("self", *spelling)
    for found in up._mro(owner[0], owner[1].name):
        for node in ast.walk(found[1]):
            if isinstance(node, ast.Attribute):
                dotted = _dotted(node)
                if dotted is not None and dotted[:len(want)] == want:
                    return True
    return False


def _step(up: Upstream, node: Reached, part: str) -> Reached | str:
    if node.items:
        if not part.isdigit():
            return f"{node.where} is a module list: expected an index, found {part!r}"
        return Reached(f"{node.where}[{part}]", cls=node.cls)
    if node.cls is not None:
        file, cls = node.cls
        values = _assigned(up, node.cls, part)
        if not values:
            return f"{file}: class {cls.name} (and its bases in the wheel) assigns no self.{part}"
        found: list[Reached | str] = []
        for owner, value in values:
            for alternative in _alternatives(value):
                result = _interpret(up, owner, part, alternative)
                if result is not None:
                    found.append(result)
        # A wheel class says most, then an opaque module the class's code reaches, then a problem.
        best = sorted(found, key=lambda r: 2 if isinstance(r, str) else 0 if r.cls else 1)
        return best[0] if best else f"{file}: {cls.name}.{part} is never assigned a module"
    if node.owner is None:
        return f"{node.where} is built by code the wheel does not ship: its {part} cannot be read"
    spellings = [(*r.split("."), part) for r in node.reach]
    if any(_reaches(up, node.owner, s) for s in spellings):
        return Reached(f"{node.where}.{part}", owner=node.owner,
                       reach=tuple(".".join(s) for s in spellings))
    shown = " or ".join(f"self.{'.'.join(s)}" for s in spellings)
    return (f"{node.where} is built by code the wheel does not ship, and {node.owner[0]} "
            f"{node.owner[1].name} never reaches {shown}")


def follow_from(up: Upstream, start: Class, parts: tuple[str, ...]) -> Reached | str:
    node = Reached(f"{start[0]} {start[1].name}", cls=start)
    for part in parts:
        found = _step(up, node, part)
        if isinstance(found, str):
            return found
        node = found
    return node


def follow(up: Upstream, path: str, cls_name: str, module_path: str) -> Reached | str:
    """Where `module_path` leads inside an instance of `cls_name` (defined in `path`), or why
    it cannot be followed."""
    start = up._class(path, cls_name)
    if start is None:
        return f"{path}: no class {cls_name}"
    return follow_from(up, start, tuple(module_path.split(".")))


def module_path(up: Upstream, path: str, name: str) -> str | None:
    cls_name, _, module = name.partition(":")
    found = follow(up, path, cls_name, module)
    return None if isinstance(found, Reached) else found


# --------------------------------------------------------------------------- call sites


def _loop_calls(fn: ast.AST, base: tuple[str, ...]) -> tuple[bool, bool]:
    """(a loop over `base` exists, its body calls the loop variable itself)."""
    looped = False
    for loop in (n for n in ast.walk(fn) if isinstance(n, ast.For)):
        iterated = loop.iter
        target = loop.target
        if isinstance(iterated, ast.Call) and _dotted(iterated.func) == ("enumerate",) \
                and iterated.args:
            iterated = iterated.args[0]
            target = target.elts[-1] if isinstance(target, ast.Tuple) else target
        if _dotted(iterated) != base or not isinstance(target, ast.Name):
            continue
        looped = True
        body = ast.Module(body=loop.body, type_ignores=[])
        if any(isinstance(c, ast.Call) and _dotted(c.func) == (target.id,)
               for c in ast.walk(body)):
            return True, True
    return looped, False


def call_site(up: Upstream, path: str, name: str) -> str | None:
    func, _, callee = name.partition(":")
    if not up.has_module(path):
        return f"{path}: no such module"
    fn = up.function(path, func)
    if fn is None:
        return f"{path}: no function {func}"
    if callee.endswith("[*]"):
        base = tuple(callee[:-3].split("."))
        looped, called = _loop_calls(fn, base)
        if called:
            return None
        if looped:
            return (f"{path} {func} loops over {callee[:-3]} but does not call each item itself "
                    "(`item(...)`): hooks on the items would not fire")
        return f"{path} {func} has no loop over {callee[:-3]} that calls each item"
    parts = tuple(callee.split("."))
    calls = [_dotted(c.func) for c in ast.walk(fn) if isinstance(c, ast.Call)]
    if parts in calls:
        return None
    if (*parts, "forward") in calls:
        return (f"{path} {func} calls {callee}.forward(...), which skips nn.Module.__call__ and "
                "so every forward hook on it")
    return f"{path} {func} never calls {callee}(...)"


def sets_attribute(up: Upstream, path: str, name: str) -> str | None:
    func, _, target = name.partition(":")
    param, _, attr = target.partition(".")
    if not up.has_module(path):
        return f"{path}: no such module"
    fn = up.function(path, func)
    if fn is None:
        return f"{path}: no function {func}"
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    if param not in params:
        return f"{path} {func} has no parameter {param}"
    for node in ast.walk(fn):
        if any(_dotted(t) == (param, attr) for t in assigned_targets(node)):
            return None
    return f"{path} {func} never assigns {param}.{attr}"
