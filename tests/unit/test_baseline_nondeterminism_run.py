"""A B0 with unseeded noise in one denoising step makes a lossless track inconclusive: its
candidates are never judged against noise.

Out of test_lossless_suite.py (whose latency verdicts are measured, so it runs on a CPU of its
own) since nothing here is timed, and on a 4-step copy of the campaign: the fault lands inside
whatever steps a request has, and the check reads the comparison points, not the 50-step output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.unit.plugin_sessions import run_in_checkout
from tests.unit.suite_runner import CHEAP_STEPS, bundle, campaign_variant, verdict_of


def _checks(evidence: dict[str, Any], arm: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in evidence["checks"] if c["arm"] == arm}


def test_nondeterministic_baseline_makes_the_track_inconclusive(tmp_path: Path) -> None:
    campaign = campaign_variant(tmp_path / "c", profile_args={"fault": "nondeterministic"},
                                steps=CHEAP_STEPS)
    evidence = tmp_path / "evidence"
    result = run_in_checkout("tests/quality/test_lossless.py", "-m", "lossless and 5s",
                             "-k", "baseline or lossless-text-kv", "--campaign", str(campaign),
                             "--evidence-dir", str(evidence))
    assert result.returncode == 1
    assert "INCONCLUSIVE" in result.stdout
    found = bundle(evidence)
    check = _checks(found, "b0")["baseline_determinism"]
    assert check["status"] == "fail" and check["reason"] == "baseline_nondeterministic"
    assert "dit.step" in check["detail"]
    verdict = verdict_of(found, "lossless-text-kv")
    assert verdict["verdict"] == "inconclusive"
    assert "baseline_nondeterministic" in verdict["reasons"]
    # Never judged against noise: the candidate was not even started.
    assert not [i for i in found["instances"] if i["arm"] == "lossless-text-kv"]
