"""Lanes (planning/_lanes.py, `ref2va-accept lanes`): the campaign's tracks split whole into
sessions that `./ref2va campaign` runs at once, the tracks that share B0's instances kept
together; together the lanes must select every campaign scenario exactly once."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from pathlib import Path

import pytest
import yaml
from _pytest.mark.expression import Expression

from ref2va_accept.campaign import (
    TRACK_IDS,
    LoadedCampaign,
    duration_class,
    load_campaign,
    quality_class,
)
from ref2va_accept.cli import main
from ref2va_accept.planning import (
    campaign_lanes,
    lane_weigher,
    plan_campaign,
    sharing_groups,
    split_lanes,
)
from tests.unit.suite_runner import ROOT, campaign_variant

pytestmark = pytest.mark.fast

REFERENCE = ROOT / "fixtures/campaigns/reference.yaml"
HOST = ROOT / "fixtures/campaigns/910c.yaml"
SCRIPT = (ROOT / "ref2va").read_text()


def _scenarios() -> str:
    found = re.search(r'^SCENARIOS="([^"]+)"$', SCRIPT, re.MULTILINE)
    assert found, "./ref2va names the campaign's scenario marks in SCENARIOS"
    return found.group(1)


def _alone(campaign: LoadedCampaign) -> dict[str, float]:
    """Each track's weight in a session of its own."""
    weigh = lane_weigher(campaign)
    return {track_id: weigh((track_id,)) for track_id in plan_campaign(campaign)}


def _summed(weights: dict[str, float], saved: float = 0.0,
            shared: frozenset[str] = frozenset()) -> Callable[[Collection[str]], float]:
    """A weigher: the tracks' weights added, less ``saved`` where a lane holds all of ``shared``
    (what their shared B0 instances save when they run in one session)."""
    def weigh(tracks: Collection[str]) -> float:
        return sum(weights[t] for t in tracks) - (saved if shared and shared <= set(tracks) else 0)
    return weigh


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("together", [(), (("b", "e"),), (("a", "c", "d"),)])
def test_every_track_lands_in_exactly_one_lane_and_no_lane_is_empty(
        count: int, together: tuple[tuple[str, ...], ...]) -> None:
    weights = {"a": 3.0, "b": 9.0, "c": 1.0, "d": 4.0, "e": 4.0}
    weigh = _summed(weights)
    lanes = split_lanes(list(weights), count, weigh, together)
    assert len(lanes) == min(count, len(weights))
    placed = [t for lane in lanes for t in lane.tracks]
    assert sorted(placed) == sorted(weights)
    assert all(lane.tracks for lane in lanes)
    assert [lane.weight for lane in lanes] == sorted((lane.weight for lane in lanes), reverse=True)
    assert all(lane.weight == weigh(lane.tracks) for lane in lanes)
    assert split_lanes(list(weights), count, weigh, together) == lanes  # the same on every run


def test_the_heaviest_track_goes_first_onto_the_lightest_lane() -> None:
    weights = {"a": 10.0, "b": 7.0, "c": 5.0, "d": 4.0}
    lanes = split_lanes(list(weights), 2, _summed(weights))
    # 10 -> lane 1; 7 -> lane 2; 5 -> lane 2 (7 < 10); 4 -> lane 1 (10 < 12).
    assert [(lane.tracks, lane.weight) for lane in lanes] == [(("a", "d"), 14.0),
                                                              (("b", "c"), 12.0)]
    # Equal weights keep the campaign's order, within a lane as across lanes.
    equal = {"x": 1.0, "y": 1.0, "z": 1.0}
    assert [lane.tracks for lane in split_lanes(list(equal), 2, _summed(equal))] == [
        ("x", "z"), ("y",)]
    with pytest.raises(ValueError, match="at least one"):
        split_lanes(["a"], 0, _summed({"a": 1.0}))


def test_tracks_that_share_b0_stay_in_one_lane_unless_a_lane_would_have_none() -> None:
    weights = {"a": 10.0, "b": 7.0, "c": 5.0, "d": 4.0}
    # a and c share B0's instances: together they ask for 3 less than apart.
    weigh = _summed(weights, saved=3.0, shared=frozenset({"a", "c"}))
    # Two lanes: (a, c) weighs 12 and goes first; 7 -> lane 2; 4 -> lane 2 (7 < 12). Apart, the
    # split would have been (a, d) and (b, c), each lane asking B0's instances again.
    lanes = split_lanes(list(weights), 2, weigh, [("a", "c")])
    assert [(lane.tracks, lane.weight) for lane in lanes] == [(("a", "c"), 12.0),
                                                              (("b", "d"), 11.0)]
    # Three lanes: three groups, one each; the group stays whole.
    assert [lane.tracks for lane in split_lanes(list(weights), 3, weigh, [("a", "c")])] == [
        ("a", "c"), ("b",), ("d",)]
    # Four: a lane would be empty, so the group is split and each track has a lane.
    assert [lane.tracks for lane in split_lanes(list(weights), 4, weigh, [("c", "a")])] == [
        ("a",), ("b",), ("c",), ("d",)]


def test_the_reference_campaign_runs_each_duration_in_a_lane_of_its_own() -> None:
    campaign = load_campaign(REFERENCE)
    weights = _alone(campaign)
    assert list(weights) == list(TRACK_IDS)
    # No frozen medians: requests times frames times steps (a 4-step warm-up counted whole);
    # the 15 s tracks are the heaviest, 15 s lossless heavier than 15 s lossy (four arms per
    # instance block against three); at 5 s the lossy track has four arms too (frame-hold) and
    # two seeds, and its hosted gates' full requests are not its instances' 4-step warm-ups, so
    # it asks for more than 5 s lossless.
    assert weights["15s-lossless"] > weights["15s-lossy"] > weights["5s-lossy"] > weights[
        "5s-lossless"]
    # The lossless and lossy tracks of one duration ask B0 the same requests on the same launch
    # line: one lane runs B0's gate pair and its three latency instances for both. In one
    # session the two 5 s tracks ask for 10 requests of 124 frames x 50 steps less than apart:
    # B0's latency instances (two warm-ups and a measured request each) and one gate request.
    plans = plan_campaign(campaign)
    assert sharing_groups(plans) == [("5s-lossless", "5s-lossy"), ("15s-lossless", "15s-lossy")]
    weigh = lane_weigher(campaign)
    assert weights["5s-lossless"] + weights["5s-lossy"] - weigh(("5s-lossy", "5s-lossless")) \
        == 10 * 124 * 50
    lanes = campaign_lanes(campaign, 2)
    assert [lane.tracks for lane in lanes] == [("15s-lossless", "15s-lossy"),
                                               ("5s-lossless", "5s-lossy")]
    assert lanes[0].weight < weights["15s-lossless"] + weights["15s-lossy"]
    # Three lanes: the heavier group, 15 s, is split; four: a track each.
    assert [lane.tracks for lane in campaign_lanes(campaign, 3)] == [
        ("15s-lossless",), ("15s-lossy",), ("5s-lossless", "5s-lossy")]
    assert [len(lane.tracks) for lane in campaign_lanes(campaign, 4)] == [1, 1, 1, 1]


def test_a_track_that_shares_no_b0_is_a_group_of_its_own(tmp_path: Path) -> None:
    # 5 s lossy on seeds of its own: its B0 gate requests and measured request are not the
    # lossless track's, so the two 5 s tracks share nothing and may go to different lanes.
    data = yaml.safe_load(REFERENCE.read_text())
    lossy = data["tracks"]["5s-lossy"]
    campaign = load_campaign(campaign_variant(tmp_path, tracks={
        **data["tracks"], "5s-lossy": {**lossy, "request": {**lossy["request"],
                                                            "seeds": [7, 8]}}}))
    plans = plan_campaign(campaign)
    assert sharing_groups(plans) == [("5s-lossless",), ("5s-lossy",),
                                     ("15s-lossless", "15s-lossy")]
    weights = _alone(campaign)
    assert lane_weigher(campaign)(("5s-lossless", "5s-lossy")) == weights["5s-lossless"] \
        + weights["5s-lossy"]
    assert [lane.tracks for lane in campaign_lanes(campaign, 3)] == [
        ("15s-lossless", "15s-lossy"), ("5s-lossy",), ("5s-lossless",)]


def test_frozen_preflight_medians_price_the_tracks(tmp_path: Path) -> None:
    data = yaml.safe_load(REFERENCE.read_text())
    protocol = {**data["protocol"], "expected_request_s": {"5s": 100.0, "15s": 1.0}}
    campaign = load_campaign(campaign_variant(tmp_path, protocol=protocol))
    weights = _alone(campaign)
    unpriced = _alone(load_campaign(REFERENCE))
    for track_id in TRACK_IDS:
        median = 100.0 if duration_class(track_id) == "5s" else 1.0
        requests = unpriced[track_id] / (campaign.model.tracks[track_id].num_frames * 50)
        assert weights[track_id] == pytest.approx(requests * median)
    # Priced so, the 5 s tracks are now the heavy ones: with three lanes their group is the one
    # split, each 5 s track in a lane of its own.
    assert [lane.tracks for lane in campaign_lanes(campaign, 3)] == [
        ("5s-lossy",), ("5s-lossless",), ("15s-lossless", "15s-lossy")]


def test_a_campaign_whose_instances_hold_devices_has_one_lane() -> None:
    lanes = campaign_lanes(load_campaign(HOST), 4)
    assert len(lanes) == 1 and set(lanes[0].tracks) == set(TRACK_IDS)


@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_the_lanes_marks_select_each_track_in_exactly_one_lane(count: int) -> None:
    """The expression each lane's session runs, evaluated as pytest evaluates -m, against the
    marks a campaign scenario of each track carries (selection.py: scenario, duration, quality)."""
    lanes = campaign_lanes(load_campaign(REFERENCE), count)
    for scenario in ("acceptance", "perf", "quality", "verdict"):
        for track_id in TRACK_IDS:
            marks = {scenario, duration_class(track_id), quality_class(track_id)}
            chosen = [lane for lane in lanes if Expression.compile(
                f"({_scenarios()}) and ({lane.marks})").evaluate(
                    lambda name, marks=marks: name in marks)]  # type: ignore[misc]
            assert [lane.tracks for lane in chosen] == [
                lane.tracks for lane in lanes if track_id in lane.tracks]
            assert len(chosen) == 1
        # A harness self-test (no track marks) is in no lane.
        assert not any(Expression.compile(f"({_scenarios()}) and ({lane.marks})").evaluate(
            lambda name, scenario=scenario: name == scenario)  # type: ignore[misc]
            for lane in lanes)


def test_the_command_prints_a_line_per_lane(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lanes", str(REFERENCE)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["15s-lossless,15s-lossy\t(15s and lossless) or (15s and lossy)",
                     "5s-lossless,5s-lossy\t(5s and lossless) or (5s and lossy)"]
    assert main(["lanes", str(REFERENCE), "--count", "0"]) == 2
    assert "--count must be at least 1, not 0" in capsys.readouterr().err
    assert main(["lanes", str(ROOT / "no-such.yaml")]) == 2
