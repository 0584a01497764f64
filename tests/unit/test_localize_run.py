"""The localization pass run as a user runs it: the lossless quality scenario of a 4-step copy of
the reference campaign whose failing candidate carries a divergence planted where we choose
(`plant-divergence`), in the DiT at a chosen step and in the text encoder. The pass starts its
own instances, writes its captures, and its `localization` check, the verdict row and the report
must name exactly the planted module; with the candidate's capture hooks off (the reference
engine's `capture_hooks_off` fault) the check is open and nothing is named anywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ref2va_accept.campaign import freeze
from tests.unit.plugin_sessions import judge_5s_lossless
from tests.unit.suite_runner import CHEAP_STEPS, ROOT, bundle, campaign_variant


def _with_planted(folder: Path, planted: str, **args: str) -> Path:
    """The campaign copy, its reduction-order candidate replaced by B0 plus the planted nudge
    (and `args`, more of the candidate's profile arguments)."""
    campaign = campaign_variant(folder, steps=CHEAP_STEPS)
    profile = yaml.safe_load((ROOT / "engine/profiles/reference/b0.yaml").read_text())
    profile.update(name="planted", declared="lossless")
    profile["args"].update({"plant-divergence": planted, **args})
    (folder / "planted.yaml").write_text(yaml.safe_dump(profile))
    data = yaml.safe_load(campaign.read_text())
    for candidate in data["candidates"]:
        if candidate["id"] == "reduction-order":
            candidate["profile"] = "planted.yaml"
    campaign.write_text(yaml.safe_dump(data, sort_keys=False))
    freeze(campaign)
    return campaign


@pytest.mark.parametrize(("planted", "point", "where", "step"), [
    ("dit.blocks.3.cross_kv@2", "dit.step002", "dit.blocks.3.cross_kv", 2),
    ("text_encoder.layers.0.fc1", "cond.text", "text_encoder.layers.0.fc1", None),
])
def test_the_pass_names_the_planted_module(tmp_path: Path, planted: str, point: str,
                                           where: str, step: int | None) -> None:
    campaign = _with_planted(tmp_path / "c", planted)
    evidence = tmp_path / "evidence"
    result = judge_5s_lossless(campaign, evidence, "reduction-order")
    assert result.returncode == 1, result.stdout[-3000:]
    found: dict[str, Any] = bundle(evidence)
    checks = {c["name"]: c for c in found["checks"] if c["arm"] == "reduction-order"}
    assert checks["lossless_gate"]["data"]["first_divergence"] == point
    data = checks["localization"]["data"]
    assert checks["localization"]["status"] == "pass", checks["localization"]["detail"]
    assert (data["module"], data["step"]) == (where, step)
    assert data["inputs_equal"] is True and data["figures"]["differing"] > 0
    assert data["stage"] == ("encoders" if step is None else "dit")
    verdict = next(v for v in found["verdicts"] if v["candidate"] == "reduction-order")
    assert verdict["localized"].startswith(where)
    report = next(evidence.glob("*/report.html")).read_text()
    assert where in report and "First divergence" in report


def test_with_the_candidates_capture_hooks_off_the_pass_is_open_and_names_nothing(
        tmp_path: Path) -> None:
    # The candidate fails the gate at dit.step002 (its planted nudge), and its engine's capture
    # hooks record nothing: B0's blocks at steps 1..2 must not read as "not run" by it.
    campaign = _with_planted(tmp_path / "c", "dit.blocks.3.cross_kv@2", fault="capture_hooks_off")
    evidence = tmp_path / "evidence"
    result = judge_5s_lossless(campaign, evidence, "reduction-order")
    assert result.returncode == 1, result.stdout[-3000:]
    found: dict[str, Any] = bundle(evidence)
    checks = {c["name"]: c for c in found["checks"] if c["arm"] == "reduction-order"}
    assert checks["lossless_gate"]["data"]["first_divergence"] == "dit.step002"
    check = checks["localization"]
    assert check["status"] == "open", check["detail"]
    assert ("reduction-order's level-1 capture of the DiT at steps 1..2 recorded no call (its "
            "capture report: ") in check["detail"]
    assert "hooks that never fired" in check["detail"] and "not run" not in check["detail"]
    data = check["data"]
    assert (data["found"], data["module"], data["level1"], data["level2"]) == (
        False, None, None, None)
    # The gate decided the verdict; the open pass is listed among its open checks, names nothing.
    verdict = next(v for v in found["verdicts"] if v["candidate"] == "reduction-order")
    assert verdict["verdict"] == "failed" and verdict["reasons"] == ["quality_gate_failed"]
    assert "localization" in verdict["open_checks"] and verdict["localized"] == ""
    report = next(evidence.glob("*/report.html")).read_text()
    assert "first divergence OPEN" in report and "recorded no call" in report
