"""What a campaign keeps across its runs and reads from finished ones: the ledger, runs merged
side by side, and the blind review sheet.

The modules are private; the other stages import these names from here.
"""

from ref2va_accept.history._ledger import (
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
from ref2va_accept.history._merge import MergeInputError, MergeRefused, load_run, merge
from ref2va_accept.history._review import ReviewError, ingest, pairs, write_review

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
