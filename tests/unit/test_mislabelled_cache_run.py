"""The 5 s lossless track's mislabelled candidate (Cache-DiT under a lossless label), run as a
user runs its quality and verdict scenarios, on a 4-step copy of the reference campaign.

Its failure rests on what the server says it enabled and on its outputs, not on latency, so it
runs outside the timed self-test (test_lossless_suite.py judges the track's other two candidates,
whose verdicts rest on measured latency). Its profile lets Cache-DiT cache from the third step
on, so four steps are enough for it to cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ref2va_accept.campaign import freeze
from tests.unit.plugin_sessions import judge_5s_lossless
from tests.unit.suite_runner import CHEAP_STEPS, bundle, campaign_variant


def _checks(evidence: dict[str, Any], arm: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in evidence["checks"] if c["arm"] == arm}


def test_mislabelled_candidate_fails_the_enabled_path_audit(tmp_path: Path) -> None:
    campaign = campaign_variant(tmp_path / "c", steps=CHEAP_STEPS)
    freeze(campaign)  # judged as frozen, so that a defect fails it (else: protocol_not_frozen)
    evidence = tmp_path / "evidence"
    result = judge_5s_lossless(campaign, evidence, "mislabelled-cache")
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
    # The localization pass names where cached outputs were reused: the middle blocks
    # (Fn_compute_blocks 1, Bn 0: blocks 1 to 5) did not run at the first cached step.
    where = checks["localization"]
    assert where["status"] == "pass", where["detail"]
    assert where["data"]["level1"]["kind"] == "not_run"
    assert where["data"]["level1"]["skipped"][:5] == [f"dit.blocks.{i}" for i in range(1, 6)]
    assert "ran in B0 but not in the candidate" in where["detail"]
    # the picture: the DiT's output at the step where the runs part, from level 1's own dumps
    step = where["data"]["step"]
    assert where["data"]["picture_of"] == f"dit.step{step:03d} (level 1's dumps)"
    assert where["data"]["picture"]["differing"] > 0
    # and its figures (no module to name: the candidate computed none at that step)
    figures = where["data"]["figures"]
    assert figures["name"] == where["data"]["picture_of"]
    assert figures["differing"] == where["data"]["picture"]["differing"]
    assert verdict["localized"].startswith("dit.blocks.1 ")

    # `ref2va-accept localize` runs the pass again from the finished run and finds the same.
    run = next(p for p in evidence.iterdir() if (p / "evidence.json").is_file()
               and not p.name.startswith("localize-"))
    again = subprocess.run([sys.executable, "-m", "ref2va_accept.cli", "localize", str(run),
                            "--track", "5s-lossless", "--candidate", "mislabelled-cache",
                            "--campaign", str(campaign), "--json"],
                           capture_output=True, text=True, timeout=600, check=False)
    assert again.returncode == 0, again.stderr[-2000:]
    record = json.loads(again.stdout)
    assert record["check"]["data"]["level1"]["skipped"] == where["data"]["level1"]["skipped"]
    assert (evidence / record["folder"] / "localize.html").is_file()
    # A candidate that did not fail on bit-exactness is refused, by name.
    refused = subprocess.run([sys.executable, "-m", "ref2va_accept.cli", "localize", str(run),
                              "--track", "5s-lossless", "--candidate", "lossless-text-kv",
                              "--campaign", str(campaign)],
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0 and "lossless-text-kv" in refused.stderr
    # B0's profile changed since the run (its lock drifted): not the same launch line, refused.
    b0 = campaign.parent / "b0.yaml"
    b0.write_text(b0.read_text() + "# edited after the run\n")
    drifted = subprocess.run([sys.executable, "-m", "ref2va_accept.cli", "localize", str(run),
                              "--track", "5s-lossless", "--candidate", "mislabelled-cache",
                              "--campaign", str(campaign)],
                             capture_output=True, text=True, timeout=60, check=False)
    assert drifted.returncode != 0 and "profiles or inputs are not the ones" in drifted.stderr
