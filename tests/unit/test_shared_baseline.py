"""A shared B0 (`baseline_instances: shared`): one set of B0 instances per track, interleaved in
blocks with every candidate, each candidate judged on B0's values and its own."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from ref2va_accept.campaign import load_campaign
from ref2va_accept.core import ArmRole, CampaignError, EngineStartError
from ref2va_accept.judging import _latency as latency
from ref2va_accept.judging import _latency_run as latency_run
from ref2va_accept.planning import (
    Prices,
    ScenarioItem,
    TrackPlan,
    baseline_groups,
    campaign_costs,
    latency_requests,
    plan_campaign,
    plan_run,
    plan_track,
)
from ref2va_accept.timing import LatencySettings, candidate_schedule, latency_schedule
from tests.unit.latency_doubles import SECONDS, THREE, ScriptedArms, StandInEngine
from tests.unit.suite_runner import ROOT, campaign_variant

pytestmark = pytest.mark.fast

CAMPAIGN = ROOT / "fixtures/campaigns/reference.yaml"
BASELINE = ArmRole.B0


@pytest.fixture(scope="module")
def plan() -> TrackPlan:
    return plan_track(load_campaign(CAMPAIGN), "5s-lossless")


def _settings(plan: TrackPlan, **changes: Any) -> LatencySettings:
    return dataclasses.replace(plan.latency, **changes)


# -- the schedule --------------------------------------------------------------------------------
def test_the_reference_and_host_campaigns_share_b0(plan: TrackPlan) -> None:
    assert plan.latency.baseline_instances == "shared"
    host = yaml.safe_load((ROOT / "fixtures/campaigns/910c.yaml").read_text())
    assert host["protocol"]["baseline_instances"] == "shared"


def test_shared_schedule_is_blocks_of_b0_and_every_candidate(plan: TrackPlan) -> None:
    order = latency_schedule(plan.latency, "5s-lossless", THREE)
    n = plan.latency.instances_per_arm
    assert n == 3 and len(order) == 4 * n
    for block in range(n):
        assert sorted(order[4 * block:4 * block + 4]) == sorted([BASELINE, *THREE])
    # Frozen: the same order on every host and run; another track draws its own.
    assert order == latency_schedule(plan.latency, "5s-lossless", THREE)
    assert order != latency_schedule(plan.latency, "15s-lossless", THREE)
    # Not one fixed block repeated: the order seed draws each block.
    blocks = {tuple(order[4 * b:4 * b + 4]) for b in range(n)}
    assert len(blocks) > 1


def test_one_candidate_is_exactly_the_pair_design(plan: TrackPlan) -> None:
    for candidate in THREE:
        assert (latency_schedule(plan.latency, "5s-lossless", [candidate])
                == candidate_schedule(plan.latency, candidate))


def test_per_candidate_b0_runs_each_candidates_own_pairs(plan: TrackPlan) -> None:
    settings = _settings(plan, baseline_instances="per_candidate")
    order = latency_schedule(settings, "5s-lossless", THREE)
    assert order == [a for c in THREE for a in candidate_schedule(settings, c)]
    assert Counter(order)[BASELINE] == 3 * 3


def test_repeated_or_b0_candidates_are_refused(plan: TrackPlan) -> None:
    with pytest.raises(ValueError, match="distinct"):
        latency_schedule(plan.latency, "5s-lossless", ["a", "a"])
    with pytest.raises(ValueError, match="distinct"):
        latency_schedule(plan.latency, "5s-lossless", ["a", BASELINE])


def test_shared_b0_belongs_to_the_instance_design(tmp_path: Path) -> None:
    path = campaign_variant(tmp_path / "c")
    data = yaml.safe_load(path.read_text())
    for key in ("instances_per_arm", "max_warmups", "steady_fraction"):
        data["protocol"].pop(key, None)
    data["protocol"].update(replication="request", ordering="ABA", warmups=1)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(CampaignError, match="baseline_instances 'shared' belongs to replication"):
        load_campaign(path)


def test_absent_field_means_per_candidate_and_stays_out_of_the_lock(tmp_path: Path) -> None:
    from ref2va_accept.campaign import canonical_campaign

    path = campaign_variant(tmp_path / "c")
    data = yaml.safe_load(path.read_text())
    del data["protocol"]["baseline_instances"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    loaded = load_campaign(path)
    assert plan_track(loaded, "5s-lossless").latency.baseline_instances == "per_candidate"
    assert "baseline_instances" not in str(canonical_campaign(loaded))


# -- the runner ----------------------------------------------------------------------------------
def _judge(arms: ScriptedArms, schedules: latency.LatencySchedules, candidate: str
           ) -> dict[str, Any]:
    checks = latency.run_latency(arms, candidate, schedules)  # type: ignore[arg-type]
    check = next(c for c in checks if c.name == "latency_ratio")
    return {**check.json_dict(), "latency": check.latency}


def test_a_shared_schedule_runs_b0_once_per_track_and_judges_each_candidate(
        plan: TrackPlan) -> None:
    arms = ScriptedArms(plan, SECONDS)
    schedules = latency.LatencySchedules()
    schedules.cover("5s-lossless", THREE)
    results = {c: _judge(arms, schedules, c) for c in THREE}
    # Three B0 instances for three candidates (per candidate it was nine), all started once;
    # reduction-order, no faster than B0, stopped once supported was out of reach.
    started = Counter(arms.starts)
    assert started[BASELINE] == 3 and started["lossless-text-kv"] == 3
    assert started["mislabelled-cache"] == 3 and started["reduction-order"] < 3
    frozen = latency_schedule(plan.latency, "5s-lossless", THREE)
    assert arms.starts == [a for i, a in enumerate(frozen) if a != "reduction-order"
                           or frozen[:i + 1].count(a) <= started["reduction-order"]]
    b0_values = None
    for candidate, check in results.items():
        data = check["data"]
        assert data["baseline_instances"] == "shared"
        assert data["sequence"].count(BASELINE) == 3
        assert data["sequence"].count(candidate) == started[candidate]
        assert set(data["sequence"]) == {BASELINE, candidate}
        assert data["baseline_shared_with"] == [c for c in THREE if c != candidate]
        assert len(data["baseline_s"]) == 3 and 6.9 < min(data["baseline_s"])
        assert b0_values in (None, data["baseline_s"])  # the same B0 values for each
        b0_values = data["baseline_s"]
    assert results["lossless-text-kv"]["latency"].verdict == "supported"
    assert results["reduction-order"]["latency"].verdict != "supported"
    assert "futility" in results["reduction-order"]["data"]
    # The requests are what the progress plan counts: B0's once, each candidate's own.
    b0_per_candidate = latency_requests(plan.latency, "lossless-text-kv") - 3 * (
        plan.latency.warmups + plan.latency.repeats) - plan.latency.caching_probe_requests
    assert Counter(a for a, _ in arms.requests)[BASELINE] == b0_per_candidate


LOSSY = ("cache-dit-mild", "frame-hold")


def test_one_b0_serves_the_lossless_and_lossy_tracks_of_one_duration() -> None:
    plans = plan_campaign(load_campaign(CAMPAIGN))
    lossless_plan, lossy_plan = plans["5s-lossless"], plans["5s-lossy"]
    seconds = {**SECONDS, "cache-dit-mild": 3.0, "frame-hold": 2.5}
    arms = ScriptedArms(lossless_plan, seconds)
    schedules = latency.LatencySchedules()
    schedules.cover("5s-lossless", THREE)
    schedules.cover("5s-lossy", LOSSY)
    schedules.share(baseline_groups(plans), plans)
    results = {("5s-lossless", c): _judge(arms, schedules, c) for c in THREE}
    lossy_arms = arms.for_track(lossy_plan)
    results |= {("5s-lossy", c): _judge(lossy_arms, schedules, c) for c in LOSSY}
    started = Counter(arms.starts)
    # Three B0 instances for five candidates of two tracks, run once.
    assert started[BASELINE] == 3
    assert all(started[c] == 3 for c in ("lossless-text-kv", "mislabelled-cache", *LOSSY))
    tracks = ("5s-lossless", "5s-lossy")
    frozen = latency_schedule(lossless_plan.latency, "+".join(tracks),
                      [f"{t}:{c}" for t, cs in zip(tracks, (THREE, LOSSY), strict=True)
                       for c in cs])
    # Started in the order drawn for the two tracks together (reduction-order, no faster than
    # B0, stopped early: left out of the comparison).
    assert [a.split(":")[-1] for a in frozen if not a.endswith(":reduction-order")] == [
        a for a in arms.starts if a != "reduction-order"]
    b0_values = None
    for (track, candidate), check in results.items():
        data = check["data"]
        assert check["track"] == track
        assert set(data["sequence"]) == {BASELINE, candidate}
        assert data["sequence"].count(BASELINE) == 3
        assert data["baseline_tracks"] == list(tracks)
        assert len(data["baseline_shared_with"]) == 4
        assert f"{track}:{candidate}" not in data["baseline_shared_with"]
        assert b0_values in (None, data["baseline_s"])  # the same B0 values for every one
        b0_values = data["baseline_s"]
    assert results[("5s-lossy", "frame-hold")]["latency"].verdict == "supported"
    # Each candidate's requests are its own track's: the lossy candidates' through its arms.
    assert len(arms.outcomes.of("5s-lossy", "frame-hold", "measured")) == 3
    assert arms.outcomes.of("5s-lossless", "frame-hold", "measured") == []
    # The progress plan counts that B0 once for both tracks.
    items = [ScenarioItem(f"tests/perf/test_latency.py::t[{t}:{c}]", "test_latency.py",
                          "test_latency_against_matched_b0", t, c)
             for t, cs in zip(tracks, (THREE, LOSSY), strict=True) for c in cs]
    counted = plan_run(items, plans)
    per_instance = lossless_plan.latency.warmups + lossless_plan.latency.repeats
    own = 3 * per_instance + lossless_plan.latency.caching_probe_requests
    assert counted.total == 3 * per_instance + 5 * own


def test_a_failed_candidate_stops_only_its_own_instances(plan: TrackPlan) -> None:
    arms = ScriptedArms(plan, SECONDS, failing={"reduction-order": 1})
    schedules = latency.LatencySchedules()
    schedules.cover("5s-lossless", THREE)
    results = {c: _judge(arms, schedules, c) for c in THREE}
    assert Counter(arms.starts) == {BASELINE: 3, "lossless-text-kv": 3, "reduction-order": 1,
                                    "mislabelled-cache": 3}
    assert results["reduction-order"]["reason"] == "candidate_request_failed"
    assert results["lossless-text-kv"]["latency"].verdict == "supported"
    assert any(note.startswith("5s-lossless reduction-order: latency protocol ended after "
                               "reduction-order#") and note.endswith("2 instance(s) not started")
               for note in arms.notes), arms.notes


def test_a_failed_b0_decides_every_candidate_and_starts_nothing_more(plan: TrackPlan) -> None:
    arms = ScriptedArms(plan, SECONDS, failing={BASELINE: 1})
    schedules = latency.LatencySchedules()
    schedules.cover("5s-lossless", THREE)
    results = {c: _judge(arms, schedules, c) for c in THREE}
    assert arms.starts.count(BASELINE) == 1
    first_b0 = latency_schedule(plan.latency, "5s-lossless", THREE).index(BASELINE)
    assert len(arms.starts) == first_b0 + 1
    for check in results.values():
        assert check["reason"] == "baseline_request_failed"
    assert arms.notes == [f"5s-lossless {', '.join(THREE)}: latency protocol ended after "
                          f"b0#{first_b0}; {12 - first_b0 - 1} instance(s) not started"]


def test_an_engine_that_does_not_start_fails_only_its_own_scenario(plan: TrackPlan) -> None:
    arms = ScriptedArms(plan, SECONDS, not_starting="reduction-order")
    schedules = latency.LatencySchedules()
    schedules.cover("5s-lossless", THREE)
    # The first candidate's scenario runs the schedule; reduction-order's start failure is not
    # its error.
    assert _judge(arms, schedules, "lossless-text-kv")["latency"].verdict == "supported"
    with pytest.raises(EngineStartError, match="reduction-order not healthy"):
        _judge(arms, schedules, "reduction-order")
    assert _judge(arms, schedules, "mislabelled-cache")["status"] == "pass"
    # Started once, never retried; the schedule ran once.
    assert arms.starts.count("reduction-order") == 1
    assert arms.starts.count(BASELINE) == 3


def test_a_b0_that_does_not_start_fails_every_scenario_of_the_schedule(
        plan: TrackPlan) -> None:
    arms = ScriptedArms(plan, SECONDS, not_starting=BASELINE)
    schedules = latency.LatencySchedules()
    schedules.cover("5s-lossless", THREE)
    for candidate in THREE:
        with pytest.raises(EngineStartError, match="b0 not healthy"):
            _judge(arms, schedules, candidate)
    assert arms.starts.count(BASELINE) == 1


def test_with_one_candidate_a_decided_candidate_ends_the_protocol(plan: TrackPlan) -> None:
    arms = ScriptedArms(plan, SECONDS, failing={"reduction-order": 1})
    check = _judge(arms, latency.LatencySchedules(), "reduction-order")
    order = candidate_schedule(plan.latency, "reduction-order")
    stop = order.index("reduction-order")
    assert arms.starts == order[:stop + 1]
    assert check["reason"] == "candidate_request_failed"
    assert arms.notes and arms.notes[0].endswith(f"{len(order) - stop - 1} instance(s) not "
                                                 "started")


def test_a_candidate_outside_the_collected_ones_runs_its_own_pairs(plan: TrackPlan) -> None:
    arms = ScriptedArms(plan, SECONDS)
    schedules = latency.LatencySchedules()
    schedules.cover("5s-lossless", ["lossless-text-kv"])
    _judge(arms, schedules, "mislabelled-cache")
    assert arms.starts == candidate_schedule(plan.latency, "mislabelled-cache")


def test_per_candidate_b0_runs_each_candidates_pairs_in_its_own_scenario(
        plan: TrackPlan) -> None:
    settings = _settings(plan, baseline_instances="per_candidate")
    # Every candidate in reach of the target here, so that each runs its pairs whole.
    arms = ScriptedArms(dataclasses.replace(plan, latency=settings),
                        {**SECONDS, "reduction-order": 2.6})
    schedules = latency.LatencySchedules()
    schedules.cover("5s-lossless", THREE)
    for candidate in THREE:
        before = len(arms.starts)
        check = _judge(arms, schedules, candidate)
        assert arms.starts[before:] == candidate_schedule(settings, candidate)
        assert "baseline_shared_with" not in check["data"]
    assert arms.starts.count(BASELINE) == 9


# -- what the plan, the progress and the cost count ----------------------------------------------
def test_progress_counts_b0_once_per_track(plan: TrackPlan) -> None:
    items = [ScenarioItem(f"tests/perf/test_latency.py::t[5s-lossless:{c}]", "test_latency.py",
                          "test_latency_against_matched_b0", "5s-lossless", c) for c in THREE]
    counted = plan_run(items, {"5s-lossless": plan})
    per_instance = plan.latency.warmups + plan.latency.repeats
    own = 3 * per_instance + plan.latency.caching_probe_requests
    assert counted.total == 3 * per_instance + 3 * own


def test_cost_counts_b0_on_the_first_candidate_only() -> None:
    plans = plan_campaign(load_campaign(CAMPAIGN))
    costs = [c for c in campaign_costs(plans, Prices()) if c.track == "5s-lossless"]
    assert [c.instance_starts for c in costs] == [6, 3, 3]
    assert [c.b0_requests.least for c in costs] == [9, 0, 0]


def test_the_report_names_a_b0_shared_across_tracks() -> None:
    from ref2va_accept.evidence import LatencyData
    from ref2va_accept.report._latency import _unit_text

    # Only what the unit's text reads (a judged comparison's data has every key).
    data = LatencyData.model_construct(unit="instance", instances_per_arm=3,
                                       baseline_shared_with=["5s-lossy:frame-hold"],
                                       baseline_tracks=["5s-lossless", "5s-lossy"])
    text = _unit_text(data)
    assert "B0's instances shared with 5s-lossy:frame-hold" in text
    assert "one B0 for the tracks 5s-lossless + 5s-lossy" in text
    assert "one B0 for the tracks" not in _unit_text(
        data.model_copy(update={"baseline_tracks": ["5s-lossy"]}))


def test_a_candidate_id_with_a_colon_is_no_track_label() -> None:
    assert latency_run._plain("5s-lossy:frame-hold") == "frame-hold"
    assert latency_run._plain("mine:v2") == "mine:v2"
    assert latency_run._plain(BASELINE) == BASELINE


def test_a_start_failure_recorded_by_the_schedule_runs_no_second_schedule(
        plan: TrackPlan) -> None:
    # Arms.start records a failed engine start as a check; the next candidate's scenario must
    # be judged on the schedule already run, not draw a new one without that candidate.
    from ref2va_accept.core import Check, Reason
    from tests.unit.check_records import make_check

    arms = ScriptedArms(plan, SECONDS, not_starting="reduction-order")
    real_start = arms.start

    def start(arm_id: str = "b0") -> StandInEngine:
        try:
            return real_start(arm_id)
        except EngineStartError as exc:
            arms.checks.append(make_check("5s-lossless", arm_id, Check.ENGINE_START, "fail",
                                          Reason.ENGINE_START_FAILED, str(exc)))
            raise

    arms.start = start  # type: ignore[method-assign]
    schedules = latency.LatencySchedules()
    schedules.cover("5s-lossless", THREE)
    _judge(arms, schedules, "lossless-text-kv")
    started = list(arms.starts)
    _judge(arms, schedules, "mislabelled-cache")
    assert arms.starts == started  # nothing started again
    assert started.count(BASELINE) == 3
