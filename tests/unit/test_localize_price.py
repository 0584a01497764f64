"""What `plan` says a localization pass costs, now that each of its requests stops once its capture
is written: a request priced at its share of the track's steps up to where the gate's first
divergence is (the worst case at the last frozen DiT point, the cheap case at the first), the
captures' own cost named as unpriced until it is measured, and the shares said on a campaign
without prices too."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError

from ref2va_accept.campaign import load_campaign
from ref2va_accept.judging.localize._price import PassCost, pass_cost, request_share
from ref2va_accept.judging.localize._runner import REQUESTS, STARTS
from ref2va_accept.planning import LosslessContract, Prices, TrackPlan, plan_campaign
from ref2va_accept.tensors._comparison import dit_step
from tests.unit.suite_runner import ROOT

pytestmark = pytest.mark.fast

HOST = ROOT / "fixtures/campaigns/910c.yaml"
REFERENCE = ROOT / "fixtures/campaigns/reference.yaml"


def _plans(path: Path) -> tuple[dict[str, TrackPlan], Prices]:
    campaign = load_campaign(path)
    return plan_campaign(campaign), Prices.of(campaign)


def _lossless(plans: dict[str, TrackPlan]) -> list[TrackPlan]:
    return [p for p in plans.values() if p.quality == "lossless"]


def _up_to(plan: TrackPlan, last: int) -> TrackPlan:
    """The plan with its frozen DiT points after step ``last`` dropped."""
    kept = tuple(p for p in plan.lossless.points if (dit_step(p.name) or 0) <= last)
    return replace(plan, gate=LosslessContract(kept))


def test_a_request_is_priced_at_its_share_of_the_steps_up_to_the_point() -> None:
    plans, _ = _plans(HOST)
    plan = _lossless(plans)[0]
    steps = plan.shape.num_inference_steps
    assert request_share(plan, "dit.step000.video") == pytest.approx(1 / steps)
    assert request_share(plan, "dit.step025.audio") == pytest.approx(26 / steps)
    # the worst case is the last frozen DiT point: dit.step049 of 50 runs every step
    assert request_share(plan) == 1.0
    assert request_share(_up_to(plan, 25)) == pytest.approx(26 / steps)
    # a point no step makes (the encoders', or a track freezing no DiT point) is priced whole
    assert request_share(plan, "cond.text") == 1.0
    assert request_share(_up_to(plan, -1)) == 1.0


def test_plan_prices_the_pass_at_the_stop_and_names_the_captures_cost_unpriced() -> None:
    plans, prices = _plans(HOST)
    found = pass_cost(plans, prices, 4)
    lossless = _lossless(plans)
    assert len({p.duration for p in lossless}) == 2  # 5 s and 15 s, each at its own prices
    n = sum(len(p.candidates) for p in lossless)
    steps = lossless[0].shape.num_inference_steps
    worst = first = 0.0
    for plan in lossless:
        start, request = prices.start_s[plan.duration], prices.request_s[plan.duration]
        worst += len(plan.candidates) * (STARTS * start + REQUESTS * request)
        first += len(plan.candidates) * (STARTS * start + REQUESTS * request / steps)
    assert found.passes == n and found.requests == REQUESTS * n
    assert found.wall_s is not None and found.first_point_wall_s is not None
    assert found.wall_s == pytest.approx(worst)
    assert found.first_point_wall_s == pytest.approx(first)
    assert found.first_point_wall_s < found.wall_s
    line = found.line()
    assert "worst case" not in line  # the captures' own cost is not measured
    assert f"{found.wall_s / 3600:.2f} wall-h" in line
    assert ("with its requests at a plain request's price (the captures' own cost unpriced: "
            "protocol.capture_overhead") in line
    assert (f"each request stops once its capture is written: parting at dit.step049 it runs "
            f"{steps} of {steps} steps, at dit.step000 it runs 1 of {steps} steps: "
            f"{found.first_point_wall_s / 3600:.2f} wall-h") in line
    data = found.json_dict()
    assert data["stops_after_capture"] is True and data["capture_overhead_priced"] is False
    assert data["first_point_wall_s"] == found.first_point_wall_s
    assert list(data) == ["passes", "starts", "requests", "wall_s", "device_h",
                          "first_point_wall_s", "first_point_device_h", "stops_after_capture",
                          "capture_overhead_priced", "tracks", "unpriced"]
    # What it writes is the whole record (its devices aside); a misspelt key, or a pass whose
    # requests would not stop once their capture is written, is refused.
    assert PassCost.model_validate(data | {"devices": 4}) == found
    for planted in ({"first_wall_s": 1.0}, {"stops_after_capture": False}):
        with pytest.raises(ValidationError):
            PassCost.model_validate(data | {"devices": 4} | planted)


def test_a_measured_capture_cost_makes_the_figure_a_worst_case() -> None:
    plans, prices = _plans(HOST)
    bare = pass_cost(plans, prices, 4)
    measured = pass_cost(plans, replace(prices, capture_overhead={"level1": 1.1, "level2": 1.3}),
                         4)
    assert bare.wall_s is not None and measured.wall_s is not None
    # every request at the mean of the two levels' factors (half the pass's requests at each)
    added = sum(len(p.candidates) * REQUESTS * prices.request_s[p.duration] * 0.2
                for p in _lossless(plans))
    assert measured.wall_s == pytest.approx(bare.wall_s + added)
    assert f"worst case {measured.wall_s / 3600:.2f} wall-h" in measured.line()
    assert "unpriced" not in measured.line()
    # one level measured and not the other leaves it unpriced
    other = pass_cost(plans, replace(prices, capture_overhead={"level1": 1.1}), 4)
    assert other.wall_s == pytest.approx(bare.wall_s)
    assert "worst case" not in other.line() and "unpriced" in other.line()


def test_an_earlier_last_point_makes_the_worst_case_cheaper() -> None:
    plans, prices = _plans(HOST)
    cut = {t: _up_to(p, 25) if p.quality == "lossless" else p for t, p in plans.items()}
    whole, early = pass_cost(plans, prices, 4), pass_cost(cut, prices, 4)
    assert early.wall_s is not None and whole.wall_s is not None
    assert early.wall_s < whole.wall_s
    assert "parting at dit.step025 it runs 26 of 50 steps" in early.line()


def test_a_campaign_without_prices_still_says_what_a_request_runs() -> None:
    plans, prices = _plans(REFERENCE)
    line = pass_cost(plans, prices, 1).line()
    assert "not priced (protocol.expected_request_s.5s" in line
    assert ("parting at dit.step049 it runs 50 of 50 steps, at dit.step000 it runs 1 of 50 steps "
            "(the encoders and each request's own overhead on top)") in line
    assert "wall-h" not in line
