"""The 910C campaign asks the worker extension only for points it knows how to write."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.vllm_omni.request_block import DiagnosticsRefused, parse_request
from ref2va_accept.campaign import load_campaign

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("track", ["5s-lossless", "15s-lossless"])
def test_every_frozen_diagnostics_point_is_a_name_the_extension_writes(track: str,
                                                                       tmp_path: Path) -> None:
    campaign = load_campaign(ROOT / "fixtures/campaigns/910c.yaml")
    model = campaign.model.tracks[track]  # type: ignore[index]
    names = [p.name for p in model.comparison_points if p.source == "diagnostics"]
    assert names
    parsed = parse_request({"dump_dir": str(tmp_path / "d"), "points": names},
                           model.request.num_inference_steps, (tmp_path,))
    assert parsed.points == frozenset(names)


def test_a_joint_step_name_is_refused_by_the_extension(tmp_path: Path) -> None:
    # H3's DiT returns two tensors per step: the reference engine's joint name is unknown here.
    with pytest.raises(DiagnosticsRefused, match=r"unknown comparison point.*dit\.step000"):
        parse_request({"dump_dir": str(tmp_path / "d"), "points": ["dit.step000"]}, 50,
                      (tmp_path,))
