"""bringup.json is one typed record (bringup/_records.py's BringupData) that the bring-up's
writers fill in: a field misspelt or mistyped where it is written is refused there; what the
bring-up did not reach is left out; the schedule, the cost, a scoring price and the server
bounds write the keys and values their hand-written dicts wrote."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from ref2va_accept.bringup import price, step_schedule
from ref2va_accept.bringup._judge import Judging
from ref2va_accept.bringup._records import (
    BadAudio,
    Bound,
    BringupData,
    CacheDit,
    Flags,
    PreflightError,
    ServerBounds,
)
from ref2va_accept.bringup._scoring import measure
from ref2va_accept.campaign import LoadedCampaign, load_campaign
from tests.unit.suite_runner import ROOT

pytestmark = pytest.mark.fast

CAMPAIGN_910C = ROOT / "fixtures/campaigns/910c.yaml"


def test_a_field_misspelt_where_bringup_json_is_written_is_refused_there() -> None:
    data = BringupData()
    # A step that writes a field bringup.json does not have (as `data["bad_adio"] = ...` wrote
    # one silently into the free dict) fails at that line, naming it.
    with pytest.raises(ValidationError, match="bad_adio"):
        data.bad_adio = BadAudio(status=400, wording="too short", failure=None)  # type: ignore[attr-defined]
    with pytest.raises(ValidationError, match="exit_cod"):
        BringupData(exit_cod=3)  # type: ignore[call-arg]
    # So does a misspelt key of a field's record, and a value of the wrong kind.
    with pytest.raises(ValidationError, match="failur"):
        BadAudio(status=400, wording="too short", failur=None)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="missing"):
        Flags(used={"--omni": ["b0.yaml"]})  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="exit_code"):
        data.exit_code = "three"  # type: ignore[assignment]
    with pytest.raises(ValidationError, match="preflight"):
        data.preflight = "npu-smi is missing"  # type: ignore[assignment]
    assert data.json_dict() == {}


def test_what_the_bringup_did_not_reach_is_left_out_of_its_json() -> None:
    data = BringupData(campaign="910c.yaml", questions=26)
    assert data.json_dict() == {"campaign": "910c.yaml", "questions": 26}
    # A field written as None is written (a bring-up that finished has no failure).
    data.failure = None
    data.preflight = PreflightError(error="npu-smi not found")
    # The Cache-DiT server's record grows as its step goes: its stop, then its requests.
    cache = CacheDit()
    data.cache_dit = cache
    cache.requests = {}
    assert data.json_dict() == {"campaign": "910c.yaml", "questions": 26, "failure": None,
                                "preflight": {"error": "npu-smi not found"},
                                "cache_dit": {"requests": {}}}


def test_the_schedule_and_its_cost_write_what_their_dicts_wrote() -> None:
    campaign = load_campaign(CAMPAIGN_910C)
    plan = step_schedule(campaign)
    written = plan.json_dict()
    # The profiles' paths are this host's: bringup.json names them as an operator finds them.
    assert "profiles" not in written
    assert written["policies"] == ["engine/profiles/vllm-omni/b0.yaml",
                                   "engine/profiles/vllm-omni/b0-legacy-dlo.yaml"]
    assert list(written) == ["policies", "cache_dit", "track_5s", "track_15s", "starts",
                             "requests_5s", "requests_15s", "capture_requests",
                             "bad_audio_requests", "cache_dit_steps", "warmup_demonstration",
                             "scoring"]
    assert written["cache_dit_steps"] == {"warmup_steps": 4, "track_steps": 50,
                                          "requested_steps": 50, "raised": False}
    assert written["warmup_demonstration"][0] == {
        "track": "5s-lossless", "duration": "5s", "pairs": 2, "starts": 4, "warmups": [2, 3],
        "warmup_steps": 4, "track_steps": 50}
    assert written["scoring"][1] | {"dimensions": None} == {
        "duration": "15s", "track": "15s-lossy", "output_of": "15s-lossless",
        "dimensions": None, "device": "cpu", "same_shape": True}
    # The cost keeps what it priced and writes its seconds to the tenth, its hours to the
    # thousandth.
    cost = price(campaign, plan)
    assert cost.json_dict() == {
        "wall_s": 42171.7, "starts_s": 1800.0, "requests_s": 3748.0, "stops_s": 540.0,
        "warmup_demonstration_s": 27148.5, "scoring_s": 8935.2, "logical_device_h": 36.929,
        "devices": 4, "unpriced": [], "at_least": True}
    assert cost.requests_s == pytest.approx(3747.975)


def test_a_cost_without_its_prices_writes_no_total(tmp_path: Path) -> None:
    campaign = load_campaign(CAMPAIGN_910C)
    plan = step_schedule(campaign, demonstrate=False)
    cost = price(campaign, plan, SimpleNamespace(  # type: ignore[arg-type]
        start_s={}, request_s={}, stop=lambda _duration: 0.0, overhead=lambda: None,
        scoring=lambda _duration, _dims: (0.0, []), scoring_devices=0))
    written = cost.json_dict()
    assert (written["wall_s"], written["logical_device_h"]) == (None, None)
    assert written["unpriced"] == ["protocol.expected_start_s.5s",
                                   "protocol.expected_request_s.5s",
                                   "protocol.expected_request_s.15s"]
    assert "not priced: the campaign freezes no" in cost.line(plan)


def test_the_server_bounds_are_keyed_by_the_variables_that_set_them() -> None:
    bounds = ServerBounds(wave=Bound.read("3720", "the server's environment"),
                          sync=Bound.read(None, "unset"))
    assert bounds.json_dict() == {
        "VLLM_OMNI_DLO_DP_WAVE_TIMEOUT": {"value": "3720", "seconds": 3720.0,
                                          "source": "the server's environment"},
        "VLLM_OMNI_VIDEO_SYNC_TIMEOUT": {"value": None, "seconds": 600.0, "source": "unset"}}
    assert bounds.line() == ("the 600 s server bound (VLLM_OMNI_VIDEO_SYNC_TIMEOUT unset: "
                             "upstream's default)")
    assert ServerBounds.model_validate(bounds.json_dict()) == bounds
    unread = ServerBounds(wave=Bound.read("1h", "the profile's env"), sync=bounds.sync)
    assert unread.tightest is None and unread.wave.seconds is None


class _Scores:
    """A scorer whose passes take the seconds given, by the weights they run with."""

    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds, self.now = seconds, 0.0

    def clock(self) -> float:
        return self.now

    def __call__(self, _video: Path, **kwargs: Any) -> list[Any]:
        weights = kwargs["weights"]
        self.now += self.seconds[next(iter(weights), "base")]
        return [SimpleNamespace(scorer=d, status="ok", detail="") for d in (
            "vbench.temporal_flickering", "vbench.subject_consistency")]


def test_a_scoring_price_keeps_its_seconds_and_writes_them_to_the_millisecond(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    campaign = load_campaign(CAMPAIGN_910C)
    folder = tmp_path / "fixtures/standins"
    monkeypatch.setattr(LoadedCampaign, "engine_workdir", lambda self: tmp_path)
    from ref2va_accept.quality._weight_names import VBENCH_LAYOUT

    path = folder / VBENCH_LAYOUT["dino_vitb16"]
    path.parent.mkdir(parents=True)
    path.write_bytes(b"stand-in")
    scorer = _Scores({"base": 1.23449, "dino_vitb16": 3.0})
    found = measure(campaign, "5s", "5s-lossy", ["vbench.temporal_flickering",
                                                 "vbench.subject_consistency"],
                    tmp_path / "b0.mp4", None, "cpu", scorer, scorer.clock)
    assert found.seconds == pytest.approx({"vbench.temporal_flickering": 1.23449,
                                           "vbench.subject_consistency": 1.76551})
    assert found.models == 1 and found.with_standins
    assert found.json_dict() == {
        "duration": "5s", "track": "5s-lossy", "device": "cpu",
        "seconds": {"vbench.subject_consistency": 1.766, "vbench.temporal_flickering": 1.234},
        "missing": {},
        "passes": [{"pass": "decode and every dimension no model serves", "seconds": 1.234},
                   {"pass": "dino_vitb16", "seconds": 3.0, "stand_ins": ["dino_vitb16"]}],
        "with_standins": True}


def test_the_prices_write_the_keys_they_wrote() -> None:
    campaign = load_campaign(CAMPAIGN_910C)
    judging = Judging(campaign, SimpleNamespace(run_id="bringup-t"),  # type: ignore[arg-type]
                      step_schedule(campaign))
    judging.demos["5s"] = "no B0 memory policy started, served and released"
    judging.judge_prices()
    assert judging.data.json_dict() == {"prices": {
        "stops": [], "capture": {}, "capture_problems": {},
        "warmup_demonstration": {"5s": "no B0 memory policy started, served and released"},
        "scoring": [], "scoring_missing": {}}}
