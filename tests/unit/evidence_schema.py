"""The one way tests read an evidence bundle: loaded and validated against the published schema
and the record models (records.Bundle), which must read it back to the very same JSON."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import ValidationError

from ref2va_accept.evidence import SCHEMA_PATH, Bundle


@cache
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def schema_errors(bundle: Any) -> list[str]:
    """Every way a bundle breaks the schema, as `path: message` (empty when it is valid)."""
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in sorted(validator().iter_errors(bundle), key=lambda e: list(e.path))]


def record_errors(bundle: Any) -> list[str]:
    """Every way a bundle breaks the record models, as `path: message`, and a difference
    between the bundle and what the models dump back (empty when it reads back whole)."""
    try:
        typed = Bundle.model_validate(bundle)
    except ValidationError as exc:
        return [f"{'/'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in exc.errors()]
    if typed.json_dict() != bundle:
        return ["<root>: the records do not dump back to the bundle they read"]
    return []


def validate_bundle(bundle: Any) -> dict[str, Any]:
    errors = schema_errors(bundle)
    assert not errors, "evidence.json breaks its schema:\n" + "\n".join(errors[:20])
    errors = record_errors(bundle)
    assert not errors, "evidence.json breaks its records:\n" + "\n".join(errors[:20])
    loaded: dict[str, Any] = bundle
    return loaded


def read_bundle(run: Path) -> dict[str, Any]:
    """A run folder's evidence.json, validated."""
    return validate_bundle(json.loads((run / "evidence.json").read_text(encoding="utf-8")))
