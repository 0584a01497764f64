"""The 5 s lossless track's mislabelled candidate (Cache-DiT under a lossless label), run as a
user runs its quality and verdict scenarios, on a 4-step copy of the reference campaign.

Its failure rests on what the server says it enabled and on its outputs, not on latency, so it
runs outside the timed self-test (test_lossless_suite.py judges the track's other two candidates,
whose verdicts rest on measured latency). Its profile lets Cache-DiT cache from the third step
on, so four steps are enough for it to cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ref2va_accept.lock import freeze
from tests.unit.suite_runner import CHEAP_STEPS, bundle, campaign_copy, run_pytest


def _checks(evidence: dict[str, Any], arm: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in evidence["checks"] if c["arm"] == arm}


def test_mislabelled_candidate_fails_the_enabled_path_audit(tmp_path: Path) -> None:
    campaign = campaign_copy(tmp_path / "c", steps=CHEAP_STEPS)
    freeze(campaign)  # judged as frozen, so that a defect fails it (else: protocol_not_frozen)
    evidence = tmp_path / "evidence"
    result = run_pytest("tests/quality/test_lossless.py", "tests/verdicts", "-m",
                        "lossless and 5s", "-k", "baseline or mislabelled-cache", "-rA",
                        "--campaign", str(campaign), "--evidence-dir", str(evidence),
                        timeout=600)
    assert result.returncode == 1, result.stdout[-3000:]
    assert ("FAILED tests/verdicts/test_track_verdicts.py::test_track_verdict[5s-lossless:"
            "mislabelled-cache]") in result.stdout
    found = bundle(evidence)
    checks = _checks(found, "mislabelled-cache")
    audit = checks["enabled_path_audit"]
    assert audit["status"] == "fail" and audit["reason"] == "enabled_path_mismatch"
    assert "cache_dit" in audit["detail"]
    assert checks["lossless_gate"]["data"]["first_divergence"].startswith("dit.step")
    verdict = next(v for v in found["verdicts"] if v["candidate"] == "mislabelled-cache")
    assert verdict["verdict"] == "failed" and "enabled_path_mismatch" in verdict["reasons"], verdict
