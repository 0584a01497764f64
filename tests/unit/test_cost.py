"""What the frozen protocol costs on the host, as `plan` and `verify` print it: counted by the
run's code, every engine start, request and score priced, the declared search against the budget."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from ref2va_accept.campaign import load_campaign
from ref2va_accept.planning import (
    Prices,
    baseline_groups,
    campaign_costs,
    candidate_cost,
    cost_lines,
    plan_campaign,
    search_cost,
    track_costs,
)
from ref2va_accept.planning._cost import Part, Requests

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "fixtures/campaigns/910c.yaml"
MEDIAN = {"5s": 292.148, "15s": 1702.939}
PRICES = Prices(MEDIAN, {"5s": 600.0, "15s": 900.0},
                {"5s": {"vbench.temporal_flickering": 1.0, "vbench.motion_smoothness": 100.0},
                 "15s": {}})


@pytest.fixture(scope="module")
def host_plans():  # type: ignore[no-untyped-def]
    return plan_campaign(load_campaign(HOST))


def test_instance_design_prices_every_start_request_and_score(host_plans) -> None:  # type: ignore[no-untyped-def]
    plan = host_plans["15s-lossless"]
    cost = candidate_cost(plan, "cache-dit-lossless-guard", PRICES)
    # 3 B0 + 3 candidate latency instances, each 2..3 warm-ups and 1 measured.
    assert cost.instance_starts == 6
    assert (cost.b0_requests.least, cost.b0_requests.most) == (9, 12)
    # The candidate's: 9..12 in the protocol, 2 caching-probe requests, 1 lossless-gate request
    # (on its first latency instance, whose first measured output is its unobserved one).
    assert (cost.candidate_requests.least, cost.candidate_requests.most) == (12, 15)
    # B0's gate: two instances, three requests; the candidate's: no instance of its own.
    assert (cost.b0_gate.starts, cost.b0_gate.requests.most, cost.gate.starts) == (2, 3, 0)
    at_target, upper = cost.host_seconds()  # type: ignore[misc]
    starts = (2 + 3 + 0 + 3) * 900.0
    assert at_target == pytest.approx(starts + (12 + 3) * 1702.939 + 15 * 1702.939 * 0.5)
    assert upper == pytest.approx(starts + (12 + 3 + 15) * 1702.939)



def test_a_candidate_cost_writes_its_keys_and_refuses_a_part_misbuilt(host_plans) -> None:  # type: ignore[no-untyped-def]
    cost = candidate_cost(host_plans["15s-lossless"], "cache-dit-lossless-guard", PRICES)
    written = cost.json_dict()
    # plan --json and verify --json write these keys in this order (a part's warm-ups left out).
    assert list(written) == ["track", "candidate", "instance_starts", "gate", "latency",
                             "b0_gate", "b0_latency", "b0_requests", "candidate_requests",
                             "host_s_at_target", "host_s_upper", "scoring_s", "unpriced"]
    assert written["b0_gate"] == {"starts": 2, "requests": [3, 3], "scored_outputs": 0}
    assert (written["b0_requests"], written["candidate_requests"]) == ([9, 12], [12, 15])
    # A part without its scored outputs would leave the key out of the JSON; a misspelt one
    # would be lost: both are refused where the part is built.
    with pytest.raises(ValidationError, match="scored_outputs"):
        Part(starts=1, requests=Requests.exactly(1))  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="scored"):
        Part(starts=1, requests=Requests.exactly(1), scored_outputs=0, scored=1)  # type: ignore[call-arg]

def test_a_lossy_track_prices_its_scores(host_plans) -> None:  # type: ignore[no-untyped-def]
    plan = host_plans["5s-lossy"]
    gated = plan.lossy.gate.gated
    prices = dataclasses.replace(PRICES, scoring_s={"5s": dict.fromkeys(gated, 10.0)})
    cost = candidate_cost(plan, "cache-dit", prices)
    # B0 scores both seeds on two instances, the candidate both seeds once.
    assert (cost.b0_gate.scored_outputs, cost.gate.scored_outputs) == (4, 2)
    without = candidate_cost(plan, "cache-dit", dataclasses.replace(
        prices, scoring_s={"5s": dict.fromkeys(gated, 0.0)}))
    assert cost.host_seconds()[0] - without.host_seconds()[0] == pytest.approx(  # type: ignore[index]
        6 * 10.0 * len(gated))


def test_what_is_not_priced_is_named_never_left_out(host_plans) -> None:  # type: ignore[no-untyped-def]
    plan = host_plans["5s-lossy"]
    cost = candidate_cost(plan, "cache-dit", PRICES)
    assert cost.host_seconds() is None
    assert "scoring.seconds_per_output.5s.vbench.dynamic_degree" in cost.unpriced
    no_starts = candidate_cost(host_plans["5s-lossless"], "x", Prices(MEDIAN))
    assert no_starts.unpriced == ("protocol.expected_start_s.5s",)
    lines = cost_lines(host_plans, Prices(MEDIAN))
    assert all("h /" not in line for line in lines)
    assert "host time not priced: the campaign freezes no protocol.expected_start_s (5s" \
        in lines[-1]
    assert not any("not included" in line for line in lines)


def test_a_shared_b0_is_counted_once_per_track(host_plans) -> None:  # type: ignore[no-untyped-def]
    costs = track_costs(host_plans["5s-lossless"], ["a", "b", "c"], Prices.of(load_campaign(HOST)))
    assert [c.b0_latency.starts for c in costs] == [3, 0, 0]
    assert [c.b0_gate.starts for c in costs] == [2, 0, 0]
    # The gate on each candidate's first latency instance: no start of its own.
    assert [c.latency.starts + c.gate.starts for c in costs] == [3, 3, 3]


def test_request_design_as_before_costs_less_and_is_labelled(host_plans) -> None:  # type: ignore[no-untyped-def]
    plan = host_plans["5s-lossy"]
    old = dataclasses.replace(plan.latency, replication="request", instances_per_arm=None,
                              ordering="ABA", warmups=1, max_warmups=1, steady_fraction=None,
                              repeats=3)
    cost = candidate_cost(dataclasses.replace(plan, latency=old), "cache-dit", PRICES)
    # B0, candidate, B0 again: (1 + 3) each; the candidate adds 2 probes and its 2 seeds.
    assert (cost.instance_starts, cost.b0_requests.most, cost.candidate_requests.most) == (3, 8, 8)
    lines = cost_lines({"5s-lossy": dataclasses.replace(plan, latency=old)}, PRICES)
    assert lines[0].startswith("protocol: request design: ABA")


def test_the_host_campaign_prices_its_whole_search_and_the_confirmation(host_plans) -> None:  # type: ignore[no-untyped-def]
    from ref2va_accept.cli._plan import pass_pricer

    campaign = load_campaign(HOST)
    prices = Prices.of(campaign)
    found = search_cost(campaign, host_plans, prices, pass_pricer(4), 4)
    assert found is not None and found.directions == 12
    assert found.screened == {"5s-lossy": 5, "5s-lossless": 7}
    assert found.worst_s is not None and found.mix_s is not None
    assert found.mix_s < found.worst_s  # half the directions stop at their gate
    assert found.confirmation_s is not None and found.confirmation_s > 0
    # plan --json writes its figures, not the prices and terms the what-if table reprices.
    assert list(found.json_dict()) == [
        "directions", "screened", "worst_s", "mix_s", "worst_device_s", "mix_device_s",
        "confirmation_s", "confirmation_device_s", "unpriced", "lossless_directions",
        "localization_passes_expected", "localization_pass_s", "at_least", "worst_outcomes"]
    # Each of the 7 lossless directions that fails its gate starts a localization pass: 3.5 at
    # the mix, each 3 starts (and their stops at the bound, 60 s grace + 120 s memory wait) and
    # 4 requests, at a plain request's price while the capture overhead is unpriced.
    assert (found.lossless_directions, found.localization_passes_expected, found.at_least) == (
        7, 3.5, True)
    assert found.localization_pass_s == pytest.approx(3 * (600 + 180) + 4 * 292.148)
    # Every start has its stop: 41 of them in the worst case (B0's 2 gate and 3 latency starts
    # once for the two 5 s tracks, 3 per direction), so 10 s more per stop is 410 s more.
    dearer = search_cost(campaign, host_plans, dataclasses.replace(
        prices, stop_s={"5s": 190.0, "15s": 190.0}), pass_pricer(4), 4)
    assert dearer is not None and dearer.worst_s is not None and dearer.mix_s is not None
    assert dearer.worst_s - found.worst_s == pytest.approx(41 * 10)
    assert dearer.mix_s > found.mix_s
    # A measured capture overhead prices the pass's requests: the figures are no longer "at least".
    priced = search_cost(campaign, host_plans, dataclasses.replace(
        prices, capture_overhead={"level1": 1.5, "level2": 2.5}), pass_pricer(4), 4)
    assert priced is not None and not priced.at_least
    assert priced.localization_pass_s is not None and found.localization_pass_s is not None
    assert priced.localization_pass_s - found.localization_pass_s == pytest.approx(
        4 * 292.148 * (2.0 - 1.0))
    assert priced.mix_s - found.mix_s == pytest.approx(
        3.5 * 4 * 292.148, rel=1e-6)


def test_a_b0_shared_across_tracks_is_counted_once_and_named(host_plans) -> None:  # type: ignore[no-untyped-def]
    campaign = load_campaign(HOST)
    prices = Prices.of(campaign)
    shared = campaign_costs(host_plans, prices)
    alone = campaign_costs(host_plans, prices, share=False)
    b0_starts = {t: sum(c.b0_latency.starts for c in shared if c.track == t) for t in host_plans}
    assert b0_starts == {"5s-lossless": 3, "5s-lossy": 0, "15s-lossless": 3, "15s-lossy": 0}
    assert sum(c.b0_latency.starts for c in alone) == 4 * 3  # lanes: each session its own
    lines = cost_lines(host_plans, prices)
    assert ("B0's latency instances shared across tracks (the same server asked the same timed "
            "request; counted on the first): 5s-lossless + 5s-lossy; 15s-lossless + 15s-lossy"
            ) in lines
    # A different B0 launch line, or a different timed request, is not shared.
    for changed in (
            dataclasses.replace(host_plans["5s-lossy"], seeds=(7, 43)),
            dataclasses.replace(host_plans["5s-lossy"], latency=dataclasses.replace(
                host_plans["5s-lossy"].latency, instances_per_arm=4))):
        plans = dict(host_plans, **{"5s-lossy": changed})
        assert baseline_groups(plans)["5s-lossy"] == ("5s-lossy",)
    b0 = host_plans["5s-lossy"].arm("b0")
    other = dataclasses.replace(b0, spec=b0.spec.model_copy(update={"profile": "other.yaml"}))
    arms = tuple(other if a.is_baseline else a for a in host_plans["5s-lossy"].arms)
    plans = dict(host_plans, **{"5s-lossy": dataclasses.replace(host_plans["5s-lossy"],
                                                               arms=arms)})
    assert baseline_groups(plans)["5s-lossless"] == ("5s-lossless",)
    # Seeds past the first (the lossy gate's) are no part of the timed request.
    assert baseline_groups(host_plans)["5s-lossy"] == ("5s-lossless", "5s-lossy")
    assert host_plans["5s-lossy"].seeds != host_plans["5s-lossless"].seeds


def test_a_search_naming_a_track_the_campaign_lacks_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(HOST.read_text())
    data["search"]["directions"][0]["tracks"] = ["5s-lossy", "7s-lossy"]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    from ref2va_accept.core import CampaignError
    with pytest.raises(CampaignError, match=r"search\.directions"):
        load_campaign(path)


