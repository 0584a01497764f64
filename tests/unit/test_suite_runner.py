"""The cheap campaign copies the suite-running tests use (tests/unit/suite_runner.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ref2va_accept.campaign import load_campaign
from tests.unit.suite_runner import CHEAP_STEPS, ROOT, campaign_variant

pytestmark = pytest.mark.fast


def _points(data: dict[str, object], track: str) -> list[tuple[str, list[int]]]:
    tracks = data["tracks"]
    assert isinstance(tracks, dict)
    return [(p["name"], p["shape"]) for p in tracks[track].get("comparison_points", [])]


def test_a_cheap_copy_denoises_in_few_steps_at_points_that_exist(tmp_path: Path) -> None:
    shipped = yaml.safe_load((ROOT / "fixtures/campaigns/reference.yaml").read_text())
    path = campaign_variant(tmp_path / "c", steps=5)
    copy = yaml.safe_load(path.read_text())
    loaded = load_campaign(path)  # still a valid campaign
    for track_id, track in loaded.model.tracks.items():
        assert track.request.num_inference_steps == 5, track_id
        before, after = _points(shipped, track_id), _points(copy, track_id)
        renamed = {"dit.step000": "dit.step000", "dit.step025": "dit.step002",
                   "dit.step049": "dit.step004"}
        # Same points in the same order with the same shapes; only the step numbers moved.
        assert after == [(renamed.get(name, name), shape) for name, shape in before], track_id
    assert {t: len(_points(copy, t)) for t in copy["tracks"]} == {
        "5s-lossless": 12, "5s-lossy": 0, "15s-lossless": 12, "15s-lossy": 0}


def test_a_plain_copy_keeps_the_shipped_steps(tmp_path: Path) -> None:
    copy = yaml.safe_load(campaign_variant(tmp_path / "c").read_text())
    assert {t["request"]["num_inference_steps"] for t in copy["tracks"].values()} == {50}
    assert ("dit.step049", [1166, 16]) in _points(copy, "5s-lossless")


def test_too_few_steps_for_three_distinct_points_is_refused(tmp_path: Path) -> None:
    assert CHEAP_STEPS >= 3
    with pytest.raises(ValueError, match="steps=2"):
        campaign_variant(tmp_path / "c", steps=2)
