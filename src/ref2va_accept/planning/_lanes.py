"""Lanes: a campaign's tracks split into groups that run as separate pytest sessions at once.

On the CPU reference engine one session keeps about one core busy (the judge and its engine take
turns), so `./ref2va campaign` runs the tracks in lanes, one session per lane, each pinned to CPUs
of its own. Each lane is a run in its own right: every track's candidates are judged against the
B0 that the same lane measured under the frozen protocol, and `ref2va-accept merge --lanes` then
puts the lanes' verdicts in one report without combining any number across them. A campaign whose
instances hold accelerator devices (the 910C host's: every instance holds all four logical
devices) always has one lane: two sessions would contend for the same devices.

Tracks are assigned whole (a track's B0 and candidates never span lanes), heaviest first to the
lightest lane. A track's weight is the requests its frozen protocol asks for (the least count:
the minimum warm-ups), priced with the campaign's preflight median for its duration when frozen
(`protocol.expected_request_s`), else with its frame count times its denoising steps, a rough
stand-in for a request's cost that only has to order the tracks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ref2va_accept.campaign import LoadedCampaign, duration_class, quality_class
from ref2va_accept.planning._budget import device_count
from ref2va_accept.planning._cost import campaign_costs
from ref2va_accept.planning._prices import Prices
from ref2va_accept.planning._track_plan import TrackPlan, plan_campaign

__all__ = ["Lane", "campaign_lanes", "split_lanes", "track_weights"]


@dataclass(frozen=True)
class Lane:
    tracks: tuple[str, ...]
    weight: float

    @property
    def marks(self) -> str:
        """The lane's pytest -m expression: its tracks' duration and quality marks."""
        return " or ".join(f"({duration_class(t)} and {quality_class(t)})" for t in self.tracks)


def track_weights(campaign: LoadedCampaign,
                  plans: Mapping[str, TrackPlan] | None = None) -> dict[str, float]:
    """Each track's estimated cost in request-seconds (or the frames-times-steps stand-in)."""
    plans = plan_campaign(campaign) if plans is None else plans
    expected = campaign.model.protocol.expected_request_s
    requests: dict[str, int] = dict.fromkeys(plans, 0)
    # Lanes are sessions of their own: each measures its own B0, shared with no other lane.
    for cost in campaign_costs(plans, Prices.of(campaign), share=False):
        # B0's quality-gate requests are on the track's first candidate, once per track.
        requests[cost.track] += (cost.b0_requests.least + cost.b0_gate.requests.least
                                 + cost.candidate_requests.least)
    weights = {}
    for track_id, plan in plans.items():
        median = (expected or {}).get(plan.duration)
        unit = median if median is not None else float(
            plan.num_frames * plan.shape.num_inference_steps)
        weights[track_id] = requests[track_id] * unit
    return weights


def split_lanes(weights: Mapping[str, float], count: int) -> list[Lane]:
    """At most ``count`` lanes (never an empty one), heaviest track first onto the lightest lane;
    ties keep the campaign's track order, so the split is the same on every run."""
    if count < 1:
        raise ValueError(f"lanes: at least one, not {count}")
    order = sorted(weights, key=lambda t: (-weights[t], list(weights).index(t)))
    bins: list[list[str]] = [[] for _ in range(min(count, len(order)))]
    loads = [0.0] * len(bins)
    for track_id in order:
        lightest = min(range(len(bins)), key=lambda i: (loads[i], i))
        bins[lightest].append(track_id)
        loads[lightest] += weights[track_id]
    lanes = [Lane(tuple(sorted(b, key=list(weights).index)), load)
             for b, load in zip(bins, loads, strict=True)]
    return sorted(lanes, key=lambda lane: -lane.weight)


def campaign_lanes(campaign: LoadedCampaign, count: int) -> list[Lane]:
    """The campaign's lanes: at most ``count``, one for a campaign whose instances hold devices."""
    if device_count(campaign):
        count = 1
    return split_lanes(track_weights(campaign), count)
