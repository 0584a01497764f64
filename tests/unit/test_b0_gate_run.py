"""One pair of B0 gate instances for a duration's lossless and lossy gates, run as a user runs
the suite: `-m 5s` on the quality scenarios starts B0 twice, not four times, and each track's
B0 check passes and says which tracks the instances served.

On a 4-step copy of the campaign (nothing here is timed, and the copy scores no model-based
dimension), so it costs a few requests of the reference engine.
"""

from __future__ import annotations

from pathlib import Path

from tests.unit.plugin_sessions import run_in_checkout
from tests.unit.suite_runner import CHEAP_STEPS, bundle, campaign_variant


def test_a_sessions_lossless_and_lossy_b0_gates_share_two_instances(tmp_path: Path) -> None:
    campaign = campaign_variant(tmp_path / "c", steps=CHEAP_STEPS)
    evidence = tmp_path / "evidence"
    result = run_in_checkout("tests/quality", "-m", "5s", "-k", "baseline",
                             "--campaign", str(campaign), "--evidence-dir", str(evidence))
    assert result.returncode == 0, result.stdout[-3000:]
    assert "2 passed" in result.stdout, result.stdout[-3000:]
    found = bundle(evidence)
    b0 = [i for i in found["instances"] if i["arm"] == "b0"]
    assert len(b0) == 2, [i.get("instance_id") for i in b0]
    checks = {c["name"]: c for c in found["checks"] if c["arm"] == "b0"}
    for name, track in (("baseline_determinism", "5s-lossless"),
                        ("baseline_variability", "5s-lossy")):
        check = checks[name]
        assert check["status"] == "pass" and check["track"] == track, check["detail"]
        assert check["data"]["gate_instances_served"] == ["5s-lossless", "5s-lossy"]
        assert "B0's gate instances served 5s-lossless+5s-lossy" in check["detail"]
    # The lossless unobserved output is the lossy track's first-seed request, made once.
    assert checks["baseline_determinism"]["data"]["unobserved_request"] == {
        "track": "5s-lossy", "kind": "quality"}
    lossless = [s for s in found["samples"] if s["track"] == "5s-lossless"]
    assert sorted(s["kind"] for s in lossless) == ["quality", "quality"]
