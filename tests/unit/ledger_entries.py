"""Ledger entries made for the tests: the run entries of earlier runs that took given hours, as
the budget reads them."""

from __future__ import annotations

from ref2va_accept.evidence import LedgerEntry
from ref2va_accept.history import LEDGER_SCHEMA


def ledger_runs(*hours: float, devices: int = 4) -> list[LedgerEntry]:
    """The ledger's run entries of earlier runs that took these hours."""
    return [LedgerEntry.model_validate({
        "schema": LEDGER_SCHEMA, "kind": "run", "run_id": f"r{i}", "run_status": "complete",
        "wall_s": h * 3600, "device_s": h * 3600 * devices}) for i, h in enumerate(hours)]
