"""The campaign's record across runs: the ledger, runs merged side by side, and the blind
review sheet.

The modules are private; the other stages import these names from here.
"""

from typing import TYPE_CHECKING

from ref2va_accept.core import load_name

if TYPE_CHECKING:
    from ref2va_accept.record._ledger import (
        LEDGER_ENV,
        LEDGER_SCHEMA,
        LedgerError,
        append,
        candidate_entries,
        entry_json,
        ledger_path,
        read_ledger,
        run_entry,
        table_lines,
        with_attempt,
    )
    from ref2va_accept.record._merge import MergeInputError, MergeRefused, load_run, merge
    from ref2va_accept.record._review import ReviewError, ingest, pairs, write_review

# Each name and the private module that defines it, imported when the name is
# first used (core.load_name): a stage loads only what its user needs.
_WHERE = {
    "LEDGER_ENV": "_ledger",
    "LEDGER_SCHEMA": "_ledger",
    "LedgerError": "_ledger",
    "MergeInputError": "_merge",
    "MergeRefused": "_merge",
    "ReviewError": "_review",
    "append": "_ledger",
    "candidate_entries": "_ledger",
    "entry_json": "_ledger",
    "ingest": "_review",
    "ledger_path": "_ledger",
    "load_run": "_merge",
    "merge": "_merge",
    "pairs": "_review",
    "read_ledger": "_ledger",
    "run_entry": "_ledger",
    "table_lines": "_ledger",
    "with_attempt": "_ledger",
    "write_review": "_review",
}

__all__ = [
    "LEDGER_ENV",
    "LEDGER_SCHEMA",
    "LedgerError",
    "MergeInputError",
    "MergeRefused",
    "ReviewError",
    "append",
    "candidate_entries",
    "entry_json",
    "ingest",
    "ledger_path",
    "load_run",
    "merge",
    "pairs",
    "read_ledger",
    "run_entry",
    "table_lines",
    "with_attempt",
    "write_review",
]


def __getattr__(name: str) -> object:
    return load_name(__name__, _WHERE, name)
