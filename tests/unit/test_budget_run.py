"""A run that would pass the campaign's budget stops before any engine starts, and says so: the
5 s lossless smoke scenario run as a user runs it, in a pytest session of its own (in this
process: plugin_sessions.run_in_checkout)."""

from __future__ import annotations

from pathlib import Path

from ref2va_accept.history import append
from tests.unit.ledger_entries import ledger_runs
from tests.unit.plugin_sessions import run_in_checkout
from tests.unit.suite_runner import bundle, campaign_variant


def test_a_run_past_the_budget_stops_before_any_engine(tmp_path: Path) -> None:
    campaign = campaign_variant(tmp_path / "c")
    book = tmp_path / "c.ledger.jsonl"
    append(book, ledger_runs(16.5, devices=0))
    evidence = tmp_path / "evidence"
    result = run_in_checkout("tests/acceptance/test_b0_output.py", "-m", "lossless and 5s",
                             "--campaign", str(campaign), "--evidence-dir", str(evidence),
                             "--ledger", str(book))
    assert result.returncode != 0
    assert "ref2va: the budget would be passed: 16.50 wall-hours (spent 16.50) > 16" in (
        result.stdout + result.stderr)
    found = bundle(evidence)
    assert found["status"] == "stopped" and found["instances"] == []
    assert found["budget"]["over"] and found["budget"]["spent_before"]["runs"] == 1
    # The refused run is on the ledger too (a stopped run costs its wall time).
    assert found["ledger"]["history"][-1]["run_status"] == "stopped"
