"""A frozen fidelity minimum through a real lossy run: cache-dit-mild, within 1% on every gated
score, fails a campaign that freezes 40 dB PSNR to B0.

Its own module (not test_lossy_suite.py), so that the selftest's workers run it beside that
module's shared run instead of after it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.unit.plugin_sessions import run_in_checkout
from tests.unit.suite_runner import bundle, campaign_variant


def _check(evidence: dict[str, Any], arm: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] | None = next((c for c in evidence["checks"]
                                         if c["arm"] == arm and c["name"] == name), None)
    assert found is not None, (f"no {name} check of {arm}; the run recorded: " + "; ".join(
        f"{c['arm']}/{c['name']} {c['status']} {c['reason'] or ''} {c['detail'][:200]}"
        for c in evidence["checks"]) + " | notes: " + "; ".join(evidence.get("notes", [])))
    return found


# Past cache-dit-mild's 8 warm-up steps (at CHEAP_STEPS it would cache nothing and be B0).
FIDELITY_STEPS = 12


def test_frozen_psnr_minimum_fails_a_candidate_vbench_would_pass(tmp_path: Path) -> None:
    # cache-dit-mild is within 1% on every gated score at about 32 dB PSNR to B0; a campaign that
    # freezes 40 dB must fail it, naming fidelity and not the scores. On a 12-step copy: mild
    # computes its 8 warm-up steps and then caches every other one, and measured 31.9 and
    # 32.2 dB with its worst score 0.36% off (2026-12-07), as at 50 steps, at a quarter of the
    # CPU (the 50-step track is test_lossy_suite.py's).
    path = campaign_variant(tmp_path / "campaign", steps=FIDELITY_STEPS)
    data = yaml.safe_load(path.read_text())
    data["tracks"]["5s-lossy"]["lossy_gate"]["min_psnr_db"] = 40.0
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    evidence = tmp_path / "evidence"
    result = run_in_checkout("tests/quality/test_lossy.py", "-m", "lossy and 5s", "-k", "mild",
                             "--campaign", str(path), "--evidence-dir", str(evidence))
    assert result.returncode == 1, result.stdout[-3000:]
    check = _check(bundle(evidence), "cache-dit-mild", "lossy_gate")
    assert check["status"] == "fail" and check["reason"] == "quality_gate_failed"
    assert "fidelity.psnr" in check["detail"] and "< 40 dB" in check["detail"]
    assert "relative error" not in check["detail"], check["detail"]
    curve = check["data"]["per_seed"][0]["fidelity"]["psnr_per_frame"]
    assert len(curve) == check["data"]["per_seed"][0]["fidelity"]["frames"]
