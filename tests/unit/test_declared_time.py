"""Declared device time is refused, or capped; a NaN spread or score is open, never 0.

A reference launch profile can make the engine sleep a stated cost per unit of work
(`cost-model`, `step-cost-ms`, or the cost-model variable in the campaign's environment): a
candidate would then win by what it declares. The judge refuses such a profile or variable unless
the campaign says it allows them (its harness self-tests), and then caps every verdict; an arm
whose enabled_path.json reports a non-zero cost model is capped too.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from ref2va_accept.campaign import load_campaign
from ref2va_accept.core import CampaignError, Check, Reason
from ref2va_accept.judging import OPEN, decide, declared_time, judge
from ref2va_accept.quality import relative_errors
from ref2va_accept.quality._registry import ok_score, scorer
from tests.unit.check_records import make_check
from tests.unit.suite_runner import campaign_variant

pytestmark = pytest.mark.fast


def _copy(tmp_path: Path, allowed: bool | None, **changes: object) -> Path:
    path = campaign_variant(tmp_path / "c", **changes)
    data = yaml.safe_load(path.read_text())
    data["protocol"].pop("declared_device_time", None)
    if allowed is not None:
        data["protocol"]["declared_device_time"] = allowed
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize("flag", [{"cost-model": {"step_ms": 5}}, {"step-cost-ms": 100}])
def test_a_profile_that_declares_device_time_is_refused(tmp_path: Path, flag: dict) -> None:
    campaign = load_campaign(_copy(tmp_path, None, profile_args=flag))
    with pytest.raises(CampaignError) as caught:
        campaign.profile(campaign.model.baseline)
    said = str(caught.value)
    assert "b0.yaml" in said and f"args.{next(iter(flag))}" in said
    assert "declares device time" in said


def test_a_profile_env_that_declares_device_time_is_refused(tmp_path: Path) -> None:
    path = _copy(tmp_path, False)
    profile = yaml.safe_load((path.parent / "b0.yaml").read_text())
    profile["env"] = {"REF2VA_REFERENCE_COST_MODEL": json.dumps({"block_ms": 1})}
    (path.parent / "b0.yaml").write_text(yaml.safe_dump(profile))
    campaign = load_campaign(path)
    with pytest.raises(CampaignError, match=r"env\.REF2VA_REFERENCE_COST_MODEL"):
        campaign.profile(campaign.model.baseline)


def test_the_campaign_environment_may_not_declare_device_time(tmp_path: Path) -> None:
    path = _copy(tmp_path, None, environment={"REF2VA_REFERENCE_COST_MODEL": '{"step_ms": 1}'})
    with pytest.raises(CampaignError) as caught:
        load_campaign(path)
    assert "environment.REF2VA_REFERENCE_COST_MODEL" in str(caught.value)


def test_a_campaign_that_allows_it_loads_and_every_verdict_is_capped(tmp_path: Path) -> None:
    campaign = load_campaign(_copy(tmp_path, True, profile_args={"step-cost-ms": 100}))
    assert campaign.profile(campaign.model.baseline).args["step-cost-ms"] == 100
    passed = [make_check("5s-lossless", "c", name, "pass") for name in
              (Check.B0_MEDIA, Check.CANDIDATE_MEDIA)]
    verdict = judge("5s-lossless", "lossless", "c", passed,
                    ["protocol_not_frozen", Reason.DECLARED_DEVICE_TIME.value])
    assert verdict.verdict == "inconclusive"
    assert Reason.DECLARED_DEVICE_TIME in verdict.reasons
    assert Reason.PROTOCOL_NOT_FROZEN in verdict.reasons


def test_the_shipped_campaigns_declare_no_device_time() -> None:
    root = Path(__file__).resolve().parents[2] / "fixtures" / "campaigns"
    for name in ("reference.yaml", "910c.yaml"):
        campaign = load_campaign(root / name)
        assert not campaign.model.protocol.declared_device_time
        for arm in (campaign.model.baseline, *campaign.model.candidates):
            campaign.profile(arm)  # none is refused


def test_an_enabled_path_with_a_non_zero_cost_model_is_named() -> None:
    assert declared_time({"cost_model": {"step_ms": 0.0, "block_ms": 0.0, "source": "default"}}
                         ) == ""
    assert declared_time({}) == ""
    assert declared_time({"cost_model": {"step_ms": 0.0, "text_kv_ms": 6.0,
                                         "source": "profile"}}) == "text_kv_ms 6"
    check = make_check("5s-lossless", "c", Check.DECLARED_TIME, "fail",
                       Reason.DECLARED_DEVICE_TIME, "x")
    assert judge("5s-lossless", "lossless", "c", [check]).verdict == "inconclusive"


def test_a_nan_relative_error_is_open_never_zero_or_broken() -> None:
    info = scorer("vbench.temporal_flickering")
    errors = relative_errors([ok_score(info, math.nan)], [ok_score(info, 0.98)],
                             normalized=False)
    single = next(e for e in errors if e.scorer == "vbench.temporal_flickering")
    assert single.status == "open" and single.error is None
    assert "not a number" in single.detail
    assert all(e.error is None or not math.isnan(e.error) for e in errors)
    assert decide(single, 0.01) == OPEN
    assert decide(single.__class__(**{**single.__dict__, "error": math.nan,
                                      "status": "ok"}), 0.01) == OPEN


# --- the scoring device (campaign.scoring.device) ----------------------------------------------

def test_the_scoring_device_reaches_the_lossy_plan_and_defaults_to_the_cpu(tmp_path: Path
                                                                          ) -> None:
    from ref2va_accept.planning import plan_campaign

    root = Path(__file__).resolve().parents[2] / "fixtures" / "campaigns"
    assert plan_campaign(load_campaign(root / "reference.yaml"))["5s-lossy"].lossy.device == "cpu"
    path = _copy(tmp_path, None)
    data = yaml.safe_load(path.read_text())
    data["scoring"] = {"device": "npu:1"}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert plan_campaign(load_campaign(path))["5s-lossy"].lossy.device == "npu:1"
    data["scoring"] = {"device": "gpu"}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(CampaignError, match=r"scoring\.device"):
        load_campaign(path)


@pytest.mark.parametrize("device", ["cuda:0", "npu:0"])
def test_a_scoring_device_this_machine_lacks_puts_every_model_dimension_in_error(
        tmp_path: Path, device: str) -> None:
    import numpy as np

    from ref2va_accept.quality import score_frames

    weights = tmp_path / "ViT-B-32.pt"
    weights.write_bytes(b"not loaded: the device is refused first")
    frames = [np.zeros((16, 16, 3), np.uint8)] * 3
    scores = {s.scorer: s for s in score_frames(frames, fps=24.0,
                                                   weights={"clip_vitb32": weights},
                                                   include_proxies=False, device=device)}
    background = scores["vbench.background_consistency"]
    assert background.status == "error" and device in background.detail
    # What needs no model still scores: the device is for the models only.
    assert scores["vbench.temporal_flickering"].status == "ok"
