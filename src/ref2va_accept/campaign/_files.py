"""Reading campaign and profile files, and turning validation failures into located messages.

YAML is read with a strict loader that refuses a duplicate mapping key (PyYAML would keep the
last value silently, so two readers of one file could disagree on it). Every error is a
`CampaignError` that names the file as the user gave it, then the line (for YAML) or the dotted
field (for the schema), what was expected and what was found.
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from ref2va_accept.core import CampaignError, is_placeholder

_M = TypeVar("_M", bound=BaseModel)

# --------------------------------------------------------------------------- YAML

_MERGE_TAG = "tag:yaml.org,2002:merge"
_MERGE_KEY = object()  # stands for `<<` while looking for duplicates


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys: PyYAML would silently keep the last one."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        # `<<: *anchor` merges another mapping in, and the mapping's own keys override the merged
        # ones (as SafeLoader does); only a key written twice in the same mapping is a duplicate.
        key = _MERGE_KEY if key_node.tag == _MERGE_TAG else loader.construct_object(key_node)
        try:
            first = seen.get(key)
        except TypeError:  # a list or mapping as a key; SafeLoader refuses it the same way
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, "found unhashable key",
                key_node.start_mark,
            ) from None  # fmt: skip
        if first is not None:
            shown = "'<<'" if key is _MERGE_KEY else repr(key)
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {shown} (first at line {first + 1})",
                key_node.start_mark,
            )  # fmt: skip
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_mapping(path: Path, display: str) -> dict[str, Any]:
    """The top-level mapping of a YAML file; `display` is the path as the user gave it.

    A duplicate key anywhere reads as `<display>: line L, column C: invalid YAML: duplicate key
    'k' (first at line N)`, L and C being those of the second occurrence (1-based).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CampaignError(f"{display}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CampaignError(f"{display}: cannot read: {exc}") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no object tags
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown line"
        raise CampaignError(f"{display}: {where}: invalid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise CampaignError(f"{display}: invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        found = "an empty file" if data is None else type(data).__name__
        raise CampaignError(f"{display}: top level: a mapping of keys, found {found}")
    return data


# --------------------------------------------------------------------------- schema errors


def dotted_path(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part != "[key]":
            out += f".{part}" if out else str(part)
    return out or "top level"


class RuleViolations(ValueError):
    """Cross-field rule failures of one model, each with its location inside that model.

    Pydantic keeps the raised exception in the error context, so the loader can expand these into
    one line per violation with the full dotted path instead of one opaque model-level message.
    """

    def __init__(self, violations: list[tuple[tuple[str | int, ...], str]]) -> None:
        super().__init__("; ".join(f"{dotted_path(loc)}: {msg}" for loc, msg in violations))
        self.violations = violations


def raise_violations(violations: list[tuple[tuple[str | int, ...], str]]) -> None:
    if violations:
        raise RuleViolations(violations)


def _unwrap(annotation: Any) -> Any:
    while get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        annotation = models[0] if models else args[0]
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _model_at(root: type[BaseModel], loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The model class at a location, to list its keys when an unknown one arrives."""
    annotation: Any = root
    for part in loc:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if not isinstance(part, str) or part not in annotation.model_fields:
                return None
            annotation = annotation.model_fields[part].annotation
        elif get_origin(annotation) in (list, dict):
            annotation = get_args(annotation)[-1]
        else:
            return None
    annotation = _unwrap(annotation)
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def show_value(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    text = repr(text) if isinstance(value, str) else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_lines(display: str, root: type[BaseModel], exc: ValidationError) -> list[str]:
    lines: list[str] = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        inner = err.get("ctx", {}).get("error")
        if isinstance(inner, RuleViolations):
            lines += [
                f"{display}: {dotted_path(loc + sub)}: {msg}" for sub, msg in inner.violations
            ]
            continue
        if err["type"] == "extra_forbidden":
            parent = _model_at(root, loc[:-1])
            allowed = ", ".join(parent.model_fields) if parent else "a key of the schema"
            msg = f"unknown key, expected one of: {allowed}; found {loc[-1]!r}"
        elif err["type"] == "missing":
            msg = "required, found nothing"
        elif isinstance(inner, Exception):
            msg = str(inner)
        else:
            msg = f"{err['msg']}, found {show_value(err['input'])}"
            if is_placeholder(err["input"]):
                msg += " (a <FILL: ...> placeholder is allowed only where text is expected)"
        lines.append(f"{display}: {dotted_path(loc)}: {msg}")
    return lines


def validate_model(model: type[_M], data: dict[str, Any], display: str) -> _M:
    """`model` from `data`; a failure is one `CampaignError` with a line per problem."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise CampaignError("\n".join(_error_lines(display, model, exc))) from None
