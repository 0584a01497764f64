"""A static reader of vLLM-Omni's sources: the names the suite relies on, found with `ast`.

Nothing here imports vllm_omni. Each reader answers one kind of question about the wheel's text
(which flags a parser gets, which form fields a route accepts, which headers it sets, which
environment variables are read with which default, which constants and definitions a module has)
and says where it looked, so a failing contract test can point at the upstream file.

How 0.30.0 builds the `vllm serve --omni` command line (vllm_omni/entrypoints/cli/serve.py):
`OmniServeCommand.subparser_init` takes vLLM's own serve parser (`make_arg_parser`, defined in
vLLM, outside the wheel: --dtype, --trust-remote-code, ...) and adds the omni flags one by one in
an "OmniConfig" argument group with explicit `add_argument` calls. No flag is generated from a
dataclass: OmniEngineArgs' fields (vllm_omni/engine/arg_utils.py) reach the engine through
`from_cli_args` filtering, and OmniAsyncEngineArgs.add_cli_args delegates to vLLM's parser. So the
serve flags are exactly the option strings of the add_argument calls reachable from that method.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from tests.contract.wheel import SourceTree

SERVE_MODULE = "vllm_omni/entrypoints/cli/serve.py"
SERVE_BUILDER = "OmniServeCommand.subparser_init"
API_SERVER_MODULE = "vllm_omni/entrypoints/openai/api_server.py"
ENV_INVENTORY_MODULE = "vllm_omni/config/environment_variable_inventory.py"
# argparse actions that take no value on the command line (a profile's `true` is a bare flag).
_VALUELESS_ACTIONS = {"store_true", "store_false", "store_const", "count", "help", "version",
                      "BooleanOptionalAction"}
_HTTP_METHODS = {"get", "post", "put", "delete", "patch", "head", "options"}
_ENV_GETTERS = {("os", "environ", "get"), ("environ", "get"), ("os", "getenv"), ("getenv",),
                ("os", "environ", "setdefault"), ("environ", "setdefault")}


class NotLiteral(Exception):
    """An expression the constant evaluator does not reduce to a literal."""


@dataclass(frozen=True)
class Flag:
    options: tuple[str, ...]
    module: str
    scope: str
    line: int
    takes_value: bool

    @property
    def where(self) -> str:
        return f"{self.module}:{self.line} ({self.scope})"


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    function: str
    line: int
    depends: tuple[str, ...]


@dataclass(frozen=True)
class EnvRead:
    name: str
    default: Any  # a literal, or MISSING when read without a default
    module: str
    line: int


MISSING: Any = type("Missing", (), {"__repr__": lambda self: "<no default>"})()
# A comparison operator as written, and as written with its operands swapped.
_COMPARE_OPS: dict[type[ast.cmpop], tuple[str, str]] = {
    ast.Lt: ("<", ">"), ast.LtE: ("<=", ">="), ast.Gt: (">", "<"), ast.GtE: (">=", "<="),
    ast.Eq: ("==", "=="), ast.NotEq: ("!=", "!="),
}


def _dotted(node: ast.expr) -> tuple[str, ...] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return tuple(reversed(parts))
    return None


_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow,
    ast.Mod: operator.mod, ast.LShift: operator.lshift,
}
_LITERAL_CALLS: dict[str, Callable[..., Any]] = {
    "frozenset": frozenset, "set": set, "tuple": tuple, "float": float, "int": int,
}


def literal(node: ast.expr) -> Any:
    """The value of a constant expression: literals, arithmetic, frozenset({...}), float(...)."""
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](literal(node.left), literal(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -literal(node.operand)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in _LITERAL_CALLS and not node.keywords and len(node.args) <= 1:
        return _LITERAL_CALLS[node.func.id](*(literal(a) for a in node.args))
    if isinstance(node, ast.Set):
        return {literal(e) for e in node.elts}
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise NotLiteral(ast.unparse(node)) from None


class _Scoped(ast.NodeVisitor):
    """Visits a module keeping the dotted name of the enclosing classes and functions."""

    def __init__(self) -> None:
        self.scope: list[str] = []

    def _enter(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_ClassDef = _enter
    visit_FunctionDef = _enter
    visit_AsyncFunctionDef = _enter

    @property
    def qualname(self) -> str:
        return ".".join(self.scope) or "<module>"


class _FlagCollector(_Scoped):
    def __init__(self, module: str) -> None:
        super().__init__()
        self.module = module
        self.flags: list[Flag] = []
        self.calls: dict[str, set[str]] = {}

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            options = tuple(a.value for a in node.args
                            if isinstance(a, ast.Constant) and isinstance(a.value, str)
                            and a.value.startswith("-"))
            if options:
                action = next((k.value for k in node.keywords if k.arg == "action"), None)
                name = None
                if isinstance(action, ast.Constant):
                    name = action.value
                elif action is not None:
                    dotted = _dotted(action)
                    name = dotted[-1] if dotted else None
                nargs = next((k.value for k in node.keywords if k.arg == "nargs"), None)
                takes_value = name not in _VALUELESS_ACTIONS and not (
                    isinstance(nargs, ast.Constant) and nargs.value in (0, "?"))
                self.flags.append(Flag(options, self.module, self.qualname, node.lineno,
                                       takes_value))
        elif isinstance(node.func, ast.Name):
            self.calls.setdefault(self.qualname, set()).add(node.func.id)
        self.generic_visit(node)


class Upstream:
    """Questions about one source tree of vllm_omni, each answered from its syntax trees."""

    def __init__(self, tree: SourceTree, *, base: Upstream | str | None = None,
                 cache_dit: Upstream | str | None = None) -> None:
        """`base`, `cache_dit`: the vLLM and Cache-DiT releases the wheel is built on, read the
        same way (base-flag and cache-dit items are checked there), or why they could not be
        obtained (those items then fail saying so)."""
        self.tree = tree
        self.base, self.cache_dit = base, cache_dit
        self._modules: dict[str, ast.Module | None] = {}
        # Answers that depend on a module's syntax tree alone, found once per tree (every
        # relied-on item asks them again: 20 route look-ups walk the same API server module).
        self._routes: dict[str, list[Route]] = {}
        self._attributes: dict[ast.ClassDef, set[str]] = {}
        # tests/contract/module_paths.py: a class's `self.attr = value` assignments, by attr
        self.self_assignments: dict[ast.ClassDef, dict[str, list[ast.expr]]] = {}

    # ----------------------------------------------------------------------- modules

    def module(self, path: str) -> ast.Module | None:
        """The parsed module at `path` inside the wheel, or None when the wheel has no such file."""
        if path not in self._modules:
            text = self.tree.read(path)
            self._modules[path] = None if text is None else ast.parse(text, filename=path)
        return self._modules[path]

    def has_module(self, path: str) -> bool:
        return self.module(path) is not None

    def _require(self, path: str) -> ast.Module:
        mod = self.module(path)
        if mod is None:
            raise LookupError(f"{path}: no such module in the wheel")
        return mod

    def function(self, path: str, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """A module-level function or a method ("Class.method") defined in `path`."""
        node: Any = self._require(path)
        for part in qualname.split("."):
            node = next((n for n in node.body
                         if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                         and n.name == part), None)
            if node is None:
                return None
        return node if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None

    def imported_from(self, path: str, name: str) -> str | None:
        """The wheel path of the module that `path` imports `name` from (imports from the tree's
        own package only: absolute, or relative to `path`'s package)."""
        for node in self._require(path).body:
            if not isinstance(node, ast.ImportFrom) \
                    or not any((a.asname or a.name) == name for a in node.names):
                continue
            if node.level == 0:
                if not node.module or node.module.split(".")[0] != self.tree.package:
                    continue
                base = node.module.replace(".", "/")
            else:
                package = path.split("/")[:-node.level]
                base = "/".join([*package, *(node.module or "").split(".")]).rstrip("/")
            for candidate in (f"{base}.py", f"{base}/__init__.py"):
                if self.has_module(candidate):
                    return candidate
        return None

    # ----------------------------------------------------------------------- flags

    def flags(self, prefixes: tuple[str, ...] = ("vllm_omni/entrypoints/",
                                                "vllm_omni/config/")) -> list[Flag]:
        """Every argparse option added anywhere under `prefixes`, with where it was added."""
        out: list[Flag] = []
        for path, text in self.tree.read_all():
            if path.startswith(prefixes):
                collector = _FlagCollector(path)
                collector.visit(ast.parse(text, filename=path))
                out += collector.flags
        return out

    def parser_flags(self, path: str = SERVE_MODULE, builder: str = SERVE_BUILDER) -> list[Flag]:
        """The flags `builder` adds, following calls to functions of the same module it makes."""
        collector = _FlagCollector(path)
        collector.visit(self._require(path))
        reached: set[str] = set()
        todo = [builder]
        while todo:
            scope = todo.pop()
            if scope in reached:
                continue
            reached.add(scope)
            # A nested function's calls belong to its own scope: include them too.
            for known, called in collector.calls.items():
                if known == scope or known.startswith(scope + "."):
                    todo += [c for c in called if c in collector.calls or self.function(path, c)]
        return [f for f in collector.flags
                if any(f.scope == s or f.scope.startswith(s + ".") for s in reached)]

    @cached_property
    def serve_flags(self) -> dict[str, Flag]:
        """`vllm serve --omni` flags defined in the wheel, by option string (aliases included)."""
        return {opt: f for f in self.parser_flags() for opt in f.options}

    # ----------------------------------------------------------------------- HTTP

    def routes(self, path: str = API_SERVER_MODULE) -> list[Route]:
        """FastAPI routes declared with `@<router>.<method>("/path", ...)` in `path`."""
        if path not in self._routes:
            self._routes[path] = self._find_routes(path)
        return list(self._routes[path])

    def _find_routes(self, path: str) -> list[Route]:
        out: list[Route] = []
        for node in ast.walk(self._require(path)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            depends = tuple(
                d.args[0].id for d in ast.walk(node.args)
                if isinstance(d, ast.Call) and isinstance(d.func, ast.Name)
                and d.func.id == "Depends" and d.args and isinstance(d.args[0], ast.Name))
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute) \
                        and deco.func.attr in _HTTP_METHODS and deco.args \
                        and isinstance(deco.args[0], ast.Constant) \
                        and isinstance(deco.args[0].value, str):
                    out.append(Route(deco.func.attr.upper(), deco.args[0].value, node.name,
                                     node.lineno, depends))
        return out

    def route(self, method: str, route_path: str,
              path: str = API_SERVER_MODULE) -> Route | None:
        return next((r for r in self.routes(path)
                     if r.method == method.upper() and r.path == route_path), None)

    def form_fields(self, path: str, function: str) -> dict[str, str]:
        """A FastAPI function's parameters declared `Form(...)` ("form") or `File(...)` ("file")."""
        fn = self.function(path, function)
        if fn is None:
            raise LookupError(f"{path}: no function {function}")
        args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
        defaults: list[ast.expr | None] = [
            *([None] * (len(fn.args.posonlyargs) + len(fn.args.args) - len(fn.args.defaults))),
            *fn.args.defaults, *fn.args.kw_defaults]
        out: dict[str, str] = {}
        for arg, default in zip(args, defaults, strict=True):
            if isinstance(default, ast.Call) and isinstance(default.func, ast.Name) \
                    and default.func.id in ("Form", "File"):
                out[arg.arg] = default.func.id.lower()
        return out

    def route_form_fields(self, method: str, route_path: str,
                          path: str = API_SERVER_MODULE) -> tuple[dict[str, str], str]:
        """Form fields a route accepts, its own and its `Depends(...)` parsers', and where."""
        route = self.route(method, route_path, path)
        if route is None:
            raise LookupError(f"{path}: no route {method.upper()} {route_path}")
        fields = self.form_fields(path, route.function)
        where = [f"{path} {route.function}"]
        for dep in route.depends:
            dep_path = path if self.function(path, dep) else self.imported_from(path, dep)
            if dep_path is not None and self.function(dep_path, dep) is not None:
                fields.update(self.form_fields(dep_path, dep))
                where.append(f"{dep_path} {dep}")
        return fields, ", ".join(where)

    def response_headers(self, path: str, function: str) -> set[str]:
        """Header names (lower case) a function sets: `headers={...}` literals and
        `<x>.headers["Name"] = ...` assignments."""
        fn = self.function(path, function)
        if fn is None:
            raise LookupError(f"{path}: no function {function}")
        out: set[str] = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.keyword) and node.arg == "headers" \
                    and isinstance(node.value, ast.Dict):
                out |= {k.value.lower() for k in node.value.keys
                        if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Attribute) and node.value.attr == "headers" \
                    and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                out.add(node.slice.value.lower())
        return out

    # ----------------------------------------------------------------------- environment

    def env_reads(self, path: str) -> list[EnvRead]:
        """Reads of environment variables in `path`: `os.environ.get("N", d)`, `os.getenv`, ..."""
        out: list[EnvRead] = []
        for node in ast.walk(self._require(path)):
            if isinstance(node, ast.Call) and _dotted(node.func) in _ENV_GETTERS and node.args \
                    and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                default: Any = MISSING
                if len(node.args) > 1:
                    try:
                        default = literal(node.args[1])
                    except NotLiteral as exc:
                        default = f"<expression {exc}>"
                out.append(EnvRead(node.args[0].value, default, path, node.lineno))
            elif isinstance(node, ast.Subscript) and _dotted(node.value) in (("os", "environ"),
                                                                            ("environ",)) \
                    and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str) \
                    and isinstance(node.ctx, ast.Load):
                out.append(EnvRead(node.slice.value, MISSING, path, node.lineno))
        return out

    def env_reads_anywhere(self, name: str) -> list[EnvRead]:
        """Every read of `name` in the whole package (slow: used to say where a read moved)."""
        out: list[EnvRead] = []
        for path, text in self.tree.read_all():
            if name in text:
                self._modules.setdefault(path, ast.parse(text, filename=path))
                out += [r for r in self.env_reads(path) if r.name == name]
        return out

    @cached_property
    def env_inventory(self) -> dict[str, str]:
        """Reviewed environment variable names -> their category, as the inventory builds it:
        module-level tuples of names, each handed to `add(tuple, Category.X, ...)`."""
        mod = self._require(ENV_INVENTORY_MODULE)
        tuples: dict[str, tuple[str, ...]] = {}
        for stmt in mod.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target, expr = stmt.targets[0], stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                target, expr = stmt.target, stmt.value
            else:
                continue
            if isinstance(target, ast.Name):
                try:
                    value = literal(expr)
                except (NotLiteral, TypeError):
                    continue
                if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
                    tuples[target.id] = value
        out: dict[str, str] = {}
        for node in ast.walk(mod):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "add" and len(node.args) >= 2 \
                    and isinstance(node.args[0], ast.Name) and node.args[0].id in tuples:
                category = _dotted(node.args[1])
                for name in tuples[node.args[0].id]:
                    out[name] = category[-1].lower() if category else "?"
        return out

    # ----------------------------------------------------------------------- constants

    def constants(self, path: str) -> dict[str, Any]:
        """Module-level names bound to constant expressions, with their values."""
        out: dict[str, Any] = {}
        for node in self._require(path).body:
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            for target in targets:
                if isinstance(target, ast.Name):
                    try:
                        out[target.id] = literal(value)
                    except (NotLiteral, TypeError, ZeroDivisionError):
                        continue
        return out

    def comparisons(self, path: str, function: str) -> list[tuple[str, str, Any]]:
        """Each comparison of an expression with a literal in a function, as (expression as
        `ast.unparse` writes it, operator, literal value), the expression on the left: upstream's
        `if not 0.4 <= ratio <= 2.5` gives ("ratio", ">=", 0.4) and ("ratio", "<=", 2.5)."""
        fn = self.function(path, function)
        if fn is None:
            raise LookupError(f"{path}: no function {function}")
        out: list[tuple[str, str, Any]] = []
        for node in ast.walk(fn):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, operands[:-1], operands[1:], strict=True):
                if type(op) not in _COMPARE_OPS:
                    continue
                shown, flipped = _COMPARE_OPS[type(op)]
                values = []
                for side in (left, right):
                    try:
                        values.append(literal(side))
                    except (NotLiteral, TypeError):
                        values.append(MISSING)
                if values[0] is MISSING and values[1] is not MISSING:
                    out.append((ast.unparse(left), shown, values[1]))
                elif values[1] is MISSING and values[0] is not MISSING:
                    out.append((ast.unparse(right), flipped, values[0]))
        return out

    # ----------------------------------------------------------------------- definitions

    def _class(self, path: str, name: str) -> tuple[str, ast.ClassDef] | None:
        mod = self.module(path)
        if mod is None:
            return None
        found = next((n for n in mod.body if isinstance(n, ast.ClassDef) and n.name == name), None)
        if found is not None:
            return path, found
        origin = self.imported_from(path, name)
        return self._class(origin, name) if origin and origin != path else None

    def _mro(self, path: str, name: str) -> Iterator[tuple[str, ast.ClassDef]]:
        """The class and its bases defined in the wheel (bases from vLLM are not followed)."""
        seen: set[tuple[str, str]] = set()
        todo = [(path, name)]
        while todo:
            p, n = todo.pop(0)
            found = self._class(p, n)
            if found is None or (found[0], n) in seen:
                continue
            seen.add((found[0], n))
            yield found
            for base in found[1].bases:
                if isinstance(base, ast.Name):
                    todo.append((found[0], base.id))

    def _module_names(self, mod: ast.Module) -> set[str]:
        names: set[str] = set()
        for node in mod.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        return names

    def _any_function(self, mod: ast.Module,
                      name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """A function by bare name: top level, or a method of any top-level class."""
        for node in mod.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                return node
        for node in mod.body:
            if isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef) and sub.name == name:
                        return sub
        return None

    def _member(self, path: str, cls_name: str, member: str,
                found: Callable[[ast.ClassDef], set[str]]) -> bool:
        return any(member in found(cls) for _, cls in self._mro(path, cls_name))

    def defines(self, path: str, kind: str, name: str) -> str | None:
        """None when `path` defines `name` as `kind`; otherwise what is missing, in words.

        kinds (the vocabulary of engine/vllm_omni/hooks.py): module; class / function (top
        level); method ("Class.method": a def or property in the class or a base defined in the
        wheel); parameter ("Class.method.param" or "function.param"); instance_attribute
        ("Class.attr" assigned as `self.attr = ...` in a method); class_attribute (bound in the
        class body); field (annotated in the class body); key ("function.key": a string key of a
        dict literal the function returns; the function may be a method); name (any module-level
        binding, imports included); call, sets and module_path (tests/contract/module_paths.py).
        """
        mod = self.module(path)
        if mod is None:
            return f"{path}: no such module"
        if kind == "module":
            return None
        if kind in ("call", "sets", "module_path"):
            from tests.contract import module_paths  # here: it imports this module

            reader = {"call": module_paths.call_site, "sets": module_paths.sets_attribute,
                      "module_path": module_paths.module_path}[kind]
            return reader(self, path, name)
        if kind == "name":
            return None if name in self._module_names(mod) else f"{path}: no module-level {name}"
        if kind == "class":
            return None if self._class(path, name) else f"{path}: no class {name}"
        if kind == "function":
            return None if self.function(path, name) else f"{path}: no top-level function {name}"
        if kind == "parameter":
            func, _, param = name.rpartition(".")
            fn = self.function(path, func)
            if fn is None:
                return f"{path}: no function {func}"
            a = fn.args
            params = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
            params |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
            return None if param in params else f"{path}: {func} has no parameter {param}"
        if kind == "key":
            func, _, key = name.rpartition(".")
            fn = self._any_function(mod, func)
            if fn is None:
                return f"{path}: no function {func}"
            return None if key in _returned_keys(fn) else \
                f"{path}: {func} returns no dict with the key {key!r}"
        cls_name, _, member = name.rpartition(".")
        if not cls_name or self._class(path, cls_name) is None:
            return f"{path}: no class {cls_name or name}"
        readers: dict[str, Callable[[ast.ClassDef], set[str]]] = {
            "method": _methods, "instance_attribute": self._self_attributes,
            "class_attribute": _body_bindings, "field": _annotated_fields,
            "attribute": lambda c: self._self_attributes(c) | _body_bindings(c) | _methods(c),
        }
        if kind not in readers:
            raise ValueError(f"unknown definition kind {kind!r}")
        if self._member(path, cls_name, member, readers[kind]):
            return None
        return (f"{path}: class {cls_name} (and its bases in the wheel) has no "
                f"{kind.replace('_', ' ')} {member}")


    def _self_attributes(self, cls: ast.ClassDef) -> set[str]:
        if cls not in self._attributes:
            self._attributes[cls] = _self_attributes(cls)
        return self._attributes[cls]


def _methods(cls: ast.ClassDef) -> set[str]:
    # a property is read like an attribute but defined like a method: both count
    return {n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def _body_bindings(cls: ast.ClassDef) -> set[str]:
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _annotated_fields(cls: ast.ClassDef) -> set[str]:
    return {n.target.id for n in cls.body
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def assigned_targets(node: ast.AST) -> list[ast.expr]:
    """What an assignment statement assigns to (none for any other node)."""
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, ast.AnnAssign | ast.AugAssign):
        return [node.target]
    return []


def _self_attributes(cls: ast.ClassDef) -> set[str]:
    names: set[str] = set()
    for node in cls.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for sub in ast.walk(node):
            for t in assigned_targets(sub):
                for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(el, ast.Attribute) and isinstance(el.value, ast.Name) \
                            and el.value.id == "self":
                        names.add(el.attr)
    return names


def _returned_keys(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    keys: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
            keys |= {k.value for k in node.value.keys
                     if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "dict":
            keys |= {k.arg for k in node.value.keywords if k.arg}
    return keys
