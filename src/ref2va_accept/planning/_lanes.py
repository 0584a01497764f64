"""Lanes: a campaign's tracks split into groups that run as separate pytest sessions at once.

On the CPU reference engine one session keeps about one core busy (the judge and its engine take
turns), so `./ref2va campaign` runs the tracks in lanes, one session per lane, each pinned to CPUs
of its own. Each lane is a run in its own right: every track's candidates are judged against the
B0 that the same lane measured under the frozen protocol, and `ref2va-accept merge --lanes` then
puts the lanes' verdicts in one report without combining any number across them. A campaign whose
instances hold accelerator devices (the 910C host's: every instance holds all four logical
devices) always has one lane: two sessions would contend for the same devices.

Tracks are assigned whole (a track's B0 and candidates never span lanes), and so are the tracks
that share B0's instances (`sharing_groups`, as `verify` lists them: the lossless and lossy
tracks of one duration class usually share B0's quality-gate pair and its latency instances):
split across lanes, each lane would start and ask those B0 instances again. A group is split
only for a lane that would otherwise have no track (more lanes than groups), heaviest group
first. The groups then go heaviest first onto the lightest lane. A lane's weight is the requests
its tracks' frozen protocol asks for in one session (the least count: the minimum warm-ups; B0's
shared instances once), each priced with the campaign's preflight median for its duration when
frozen (`protocol.expected_request_s`), else with its frame count times its denoising steps, a
rough stand-in for a request's cost that only has to order the tracks.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from ref2va_accept.campaign import LoadedCampaign, duration_class, quality_class
from ref2va_accept.planning._budget import device_count
from ref2va_accept.planning._cost import campaign_costs, shared_groups
from ref2va_accept.planning._prices import Prices
from ref2va_accept.planning._track_plan import TrackPlan, plan_campaign

__all__ = ["Lane", "campaign_lanes", "lane_weigher", "sharing_groups", "split_lanes"]

# What a lane's tracks ask for, together in one session.
Weigher = Callable[[Collection[str]], float]


@dataclass(frozen=True)
class Lane:
    tracks: tuple[str, ...]
    weight: float

    @property
    def marks(self) -> str:
        """The lane's pytest -m expression: its tracks' duration and quality marks."""
        return " or ".join(f"({duration_class(t)} and {quality_class(t)})" for t in self.tracks)


def lane_weigher(campaign: LoadedCampaign,
                 plans: Mapping[str, TrackPlan] | None = None) -> Weigher:
    """The estimated cost, in request-seconds (or the frames-times-steps stand-in), of a set of
    the campaign's tracks run in one session: B0's instances that the set's tracks share are
    counted once (`campaign_costs` with sharing, over the set alone)."""
    plans = plan_campaign(campaign) if plans is None else plans
    expected = campaign.model.protocol.expected_request_s or {}
    unit = {track_id: expected.get(plan.duration)
            or float(plan.num_frames * plan.shape.num_inference_steps)
            for track_id, plan in plans.items()}
    prices = Prices.of(campaign)
    known: dict[frozenset[str], float] = {}

    def weigh(tracks: Collection[str]) -> float:
        key = frozenset(tracks)
        if key not in known:
            subset = {t: plan for t, plan in plans.items() if t in key}
            known[key] = sum(
                (cost.b0_requests.least + cost.b0_gate.requests.least
                 + cost.candidate_requests.least) * unit[cost.track]
                for cost in campaign_costs(subset, prices, share=True))
        return known[key]

    return weigh


def sharing_groups(plans: Mapping[str, TrackPlan]) -> list[tuple[str, ...]]:
    """The tracks that share B0's instances in one session, in campaign order: joined where one
    set of B0 latency instances or one pair of B0 quality-gate instances serves both (the groups
    `verify` lists, `shared_groups`); every other track is a group of its own."""
    group = {t: {t} for t in plans}
    for joined in (*shared_groups(plans), *shared_groups(plans, gates=True)):
        merged = set().union(*(group[t] for t in joined))
        for track_id in merged:
            group[track_id] = merged
    order = list(plans)
    return list(dict.fromkeys(tuple(sorted(g, key=order.index)) for g in group.values()))


def split_lanes(tracks: Sequence[str], count: int, weigh: Weigher,
                together: Sequence[Collection[str]] = ()) -> list[Lane]:
    """At most ``count`` lanes (never an empty one) of ``tracks`` (in campaign order). Each group
    in ``together`` stays in one lane unless a lane would otherwise have no track: then the
    heaviest group is split into its tracks, until every lane can have one. Groups (a track not in
    one is its own) go heaviest first onto the lightest lane, weighed with ``weigh`` (a lane's
    weight is ``weigh`` of its tracks); ties keep the campaign's order, so the split is the same
    on every run."""
    if count < 1:
        raise ValueError(f"lanes: at least one, not {count}")
    position = {t: i for i, t in enumerate(tracks)}
    grouped = {t for group in together for t in group}
    units = sorted([tuple(sorted(g, key=position.__getitem__)) for g in together if g]
                   + [(t,) for t in tracks if t not in grouped],
                   key=lambda unit: position[unit[0]])
    while len(units) < count and any(len(unit) > 1 for unit in units):
        heaviest = min((u for u in units if len(u) > 1),
                       key=lambda u: (-weigh(u), position[u[0]]))
        at = units.index(heaviest)
        units[at:at + 1] = [(t,) for t in heaviest]
    bins: list[list[str]] = [[] for _ in range(min(count, len(units)))]
    for unit in sorted(units, key=lambda u: (-weigh(u), position[u[0]])):
        lightest = min(range(len(bins)), key=lambda i: (weigh(bins[i]), i))
        bins[lightest].extend(unit)
    lanes = [Lane(tuple(sorted(b, key=position.__getitem__)), weigh(b)) for b in bins]
    return sorted(lanes, key=lambda lane: (-lane.weight, position[lane.tracks[0]]))


def campaign_lanes(campaign: LoadedCampaign, count: int) -> list[Lane]:
    """The campaign's lanes: at most ``count``, one for a campaign whose instances hold devices."""
    if device_count(campaign):
        count = 1
    plans = plan_campaign(campaign)
    return split_lanes(list(plans), count, lane_weigher(campaign, plans), sharing_groups(plans))
