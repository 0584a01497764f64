"""The localization pass run as a user runs it: the lossless quality scenario of a 4-step copy of
the reference campaign whose failing candidate carries a divergence planted where we choose
(`plant-divergence`), in the DiT at a chosen step and in the text encoder. The pass starts its
own instances, writes its captures, and its `localization` check, the verdict row and the report
must name exactly the planted module; with the candidate's capture hooks off (the reference
engine's `capture_hooks_off` fault) the check is open and nothing is named anywhere. The three
planted candidates are judged in one session, against one B0, as a campaign judges several."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ref2va_accept.campaign import freeze
from tests.unit.plugin_sessions import Session, judge_5s_lossless
from tests.unit.suite_runner import CHEAP_STEPS, ROOT, bundle, campaign_variant

# The planted candidates of the one session this module runs (B0 judged once for the three):
# each replaces one of the copy's 5 s lossless candidates; (planted, more profile arguments).
PLANTED = {
    "lossless-text-kv": ("dit.blocks.3.cross_kv@2", {}),
    "reduction-order": ("text_encoder.layers.0.fc1", {}),
    "mislabelled-cache": ("dit.blocks.3.cross_kv@2", {"fault": "capture_hooks_off"}),
}


def _with_planted(folder: Path) -> Path:
    """The campaign copy, each of its 5 s lossless candidates replaced by B0 plus its planted
    nudge (PLANTED), all declared lossless implementation changes."""
    campaign = campaign_variant(folder, steps=CHEAP_STEPS)
    data = yaml.safe_load(campaign.read_text())
    for candidate in data["candidates"]:
        if candidate["id"] not in PLANTED:
            continue
        planted, more = PLANTED[candidate["id"]]
        profile = yaml.safe_load((ROOT / "engine/profiles/reference/b0.yaml").read_text())
        profile.update(name=f"planted-{candidate['id']}", declared="lossless")
        profile["args"].update({"plant-divergence": planted, **more})
        (folder / f"{candidate['id']}.yaml").write_text(yaml.safe_dump(profile))
        candidate.update(profile=f"{candidate['id']}.yaml", change_class="implementation")
    campaign.write_text(yaml.safe_dump(data, sort_keys=False))
    freeze(campaign)
    return campaign


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Session, dict[str, Any], str]:
    """One session of the 5 s lossless track with the three planted candidates: its outcome,
    its evidence and its report."""
    folder = tmp_path_factory.mktemp("localize")
    campaign = _with_planted(folder / "c")
    evidence = folder / "evidence"
    result = judge_5s_lossless(campaign, evidence, " or ".join(PLANTED))
    return result, bundle(evidence), next(evidence.glob("*/report.html")).read_text()


def _checks(found: dict[str, Any], arm: str) -> dict[str, Any]:
    return {c["name"]: c for c in found["checks"] if c["arm"] == arm}


def test_the_session_fails_as_its_failing_candidates_do(
        judged: tuple[Session, dict[str, Any], str]) -> None:
    result, found, _ = judged
    assert result.returncode == 1, result.stdout[-3000:]
    verdicts = {v["candidate"]: v["verdict"] for v in found["verdicts"]
                if v["track"] == "5s-lossless"}
    assert verdicts == dict.fromkeys(PLANTED, "failed"), verdicts


@pytest.mark.parametrize(("candidate", "point", "where", "step"), [
    ("lossless-text-kv", "dit.step002", "dit.blocks.3.cross_kv", 2),
    ("reduction-order", "cond.text", "text_encoder.layers.0.fc1", None),
])
def test_the_pass_names_the_planted_module(judged: tuple[Session, dict[str, Any], str],
                                           candidate: str, point: str, where: str,
                                           step: int | None) -> None:
    _, found, report = judged
    checks = _checks(found, candidate)
    assert checks["lossless_gate"]["data"]["first_divergence"] == point
    data = checks["localization"]["data"]
    assert checks["localization"]["status"] == "pass", checks["localization"]["detail"]
    assert (data["module"], data["step"]) == (where, step)
    assert data["inputs_equal"] is True and data["figures"]["differing"] > 0
    assert data["stage"] == ("encoders" if step is None else "dit")
    verdict = next(v for v in found["verdicts"] if v["candidate"] == candidate)
    assert verdict["localized"].startswith(where)
    assert where in report and "First divergence" in report


def test_with_the_candidates_capture_hooks_off_the_pass_is_open_and_names_nothing(
        judged: tuple[Session, dict[str, Any], str]) -> None:
    # The candidate fails the gate at dit.step002 (its planted nudge), and its engine's capture
    # hooks record nothing: B0's blocks at steps 1..2 must not read as "not run" by it.
    _, found, report = judged
    checks = _checks(found, "mislabelled-cache")
    assert checks["lossless_gate"]["data"]["first_divergence"] == "dit.step002"
    check = checks["localization"]
    assert check["status"] == "open", check["detail"]
    assert ("mislabelled-cache's level-1 capture of the DiT at steps 1..2 recorded no call (its "
            "capture report: ") in check["detail"]
    assert "hooks that never fired" in check["detail"] and "not run" not in check["detail"]
    data = check["data"]
    assert (data["found"], data["module"], data["level1"], data["level2"]) == (
        False, None, None, None)
    # The gate decided the verdict; the open pass is listed among its open checks, names nothing.
    verdict = next(v for v in found["verdicts"] if v["candidate"] == "mislabelled-cache")
    assert verdict["verdict"] == "failed" and verdict["reasons"] == ["quality_gate_failed"]
    assert "localization" in verdict["open_checks"] and verdict["localized"] == ""
    assert "first divergence OPEN" in report and "recorded no call" in report
