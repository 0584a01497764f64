"""`ref2va-accept schema`: the published JSON Schema of evidence.json, generated from the records.

The schema that ships with the package (src/ref2va_accept/schemas/evidence.schema.json) is
written by this command from the record models (evidence_schema), never by hand; with
``--check`` it only compares, and exits 1 naming the file when the committed one differs (the
test suite runs the same comparison: tests/unit/test_records.py).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ref2va_accept.core import EXIT_OK, EXIT_PROBLEM, atomic_write
from ref2va_accept.evidence import SCHEMA_PATH, schema_text

REGENERATE = "ref2va-accept schema"


def stale_schema() -> str | None:
    """Why the committed schema is not the one the records make; None when it is."""
    try:
        committed = SCHEMA_PATH.read_text(encoding="utf-8")
    except FileNotFoundError:
        return f"{SCHEMA_PATH.name} is missing; run `{REGENERATE}` to write it"
    if committed != schema_text():
        return (f"{SCHEMA_PATH.name} is not the schema the evidence's record models "
                f"(evidence/_*_records.py) make; run `{REGENERATE}` to regenerate it")
    return None


def _run(args: argparse.Namespace) -> int:
    if args.check:
        problem = stale_schema()
        if problem is not None:
            sys.stderr.write(f"ref2va-accept schema: {problem}\n")
            return EXIT_PROBLEM
        sys.stdout.write(f"{SCHEMA_PATH.name} is up to date\n")
        return EXIT_OK
    atomic_write(SCHEMA_PATH, schema_text())
    sys.stdout.write(f"wrote {SCHEMA_PATH}\n")
    return EXIT_OK


def add_schema_command(sub: Any) -> None:
    p = sub.add_parser("schema", help="write the JSON Schema of evidence.json from the record "
                       "models (--check: only compare; exit 1 when the published one differs)")
    p.add_argument("--check", action="store_true",
                   help="compare the published schema with the generated one, write nothing")
    p.set_defaults(run=_run)
