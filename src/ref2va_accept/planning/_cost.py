"""What the frozen protocol costs on the host, per track and candidate, before anything runs.

Every engine start, warm-up, request and score is host time (on the 910C a 5 s request takes
about 292 s and a 15 s one about 1,703 s; scoring one 15 s output on every model-based VBench
dimension took 1 h 50 min of two CPU cores), so the choice of instances per arm, warm-ups,
measured requests and gated dimensions is made with this in view. `ref2va-accept plan` and
`verify` print it; the budget check refuses a run that would pass a ceiling. The counts come from
the same code the run uses: the latency protocol's instance sequence (replication.sequence), its
caching probe, and the quality gates' request counts (planning/_request_plan.py, which a test holds
to the gates). Warm-ups are a range when the steady-state rule may ask for more than the minimum.

Prices are the campaign's frozen figures (`Prices.of`): B0's complete-request latency per
duration class (`protocol.expected_request_s`), an engine start per duration class
(`protocol.expected_start_s`) and the seconds one output costs per scored dimension
(`scoring.seconds_per_output`). B0's requests are priced at the median; the candidate's at the
target ratio of it (a supported candidate is at most that fast) and, as the upper bound, at the
median itself (a candidate no faster than B0). What a campaign does not price is named, never
left out silently: a total is only given when every figure it needs is frozen.

A campaign's `search` (its candidate directions and the tracks each applies to) is priced as a
whole against the budget, worst case (every candidate passes its gate and sits at the target) and
at the stated outcome mix, with the four-track confirmation of one final configuration per track
as a figure of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ref2va_accept.campaign import DurationClass, LoadedCampaign
from ref2va_accept.core import ArmRole
from ref2va_accept.planning._request_plan import (
    gate_units,
    hosted_gate_requests,
    hosted_gate_warmups,
    hosted_warmup_requests,
    hosts_gate,
    lossless_baseline_requests,
    lossless_baseline_starts,
    lossless_candidate_requests,
    lossless_candidate_starts,
    lossy_baseline_requests,
    lossy_baseline_starts,
    lossy_candidate_requests,
    lossy_candidate_starts,
)
from ref2va_accept.planning._track_plan import TrackPlan, baseline_groups, gate_groups
from ref2va_accept.timing import sequence


@dataclass(frozen=True)
class Requests:
    """A count of requests, least and most (warm-ups may run to their bound)."""

    least: int
    most: int

    def __add__(self, other: Requests) -> Requests:
        return Requests(self.least + other.least, self.most + other.most)

    def text(self) -> str:
        return str(self.least) if self.least == self.most else f"{self.least}-{self.most}"


@dataclass(frozen=True)
class Prices:
    """The campaign's frozen price of each thing a run does on the host, per duration class."""

    request_s: Mapping[DurationClass, float] = field(default_factory=dict)
    start_s: Mapping[DurationClass, float] = field(default_factory=dict)
    # seconds per output and scored dimension (gated scorer ids), on the scoring device
    scoring_s: Mapping[DurationClass, Mapping[str, float]] = field(default_factory=dict)
    scoring_device: str = "cpu"

    @classmethod
    def of(cls, campaign: LoadedCampaign) -> Prices:
        protocol, scoring = campaign.model.protocol, campaign.model.scoring
        return cls(dict(protocol.expected_request_s or {}), dict(protocol.expected_start_s or {}),
                   {d: dict(v) for d, v in (scoring.seconds_per_output or {}).items()},
                   scoring.device)

    def unpriced(self, plan: TrackPlan) -> list[str]:
        """The campaign fields a price of this track is missing from."""
        missing = []
        if plan.duration not in self.request_s:
            missing.append(f"protocol.expected_request_s.{plan.duration}")
        if plan.duration not in self.start_s:
            missing.append(f"protocol.expected_start_s.{plan.duration}")
        return missing + self.unscored(plan)

    def unscored(self, plan: TrackPlan) -> list[str]:
        """The scoring prices of this track's gated dimensions the campaign does not freeze."""
        if plan.quality != "lossy":
            return []
        known = self.scoring_s.get(plan.duration, {})
        return [f"scoring.seconds_per_output.{plan.duration}.{dim}"
                for dim in plan.lossy.gate.gated if dim not in known]

    def score_s(self, plan: TrackPlan) -> float:
        """Scoring one output of this track on every gated dimension (0 on a lossless track)."""
        if plan.quality != "lossy":
            return 0.0
        known = self.scoring_s.get(plan.duration, {})
        return sum(known.get(dim, 0.0) for dim in plan.lossy.gate.gated)


@dataclass(frozen=True)
class Part:
    """What one arm's share of a track asks of the host: starts, requests and scored outputs."""

    starts: int
    requests: Requests  # every request, warm-ups included
    scored: int = 0
    warmups: Requests = Requests(0, 0)  # of the requests, the warm-ups

    def __add__(self, other: Part) -> Part:
        return Part(self.starts + other.starts, self.requests + other.requests,
                    self.scored + other.scored, self.warmups + other.warmups)

    def seconds(self, plan: TrackPlan, prices: Prices, speed: float, *, most: bool = True
                ) -> float:
        """Host seconds with requests at `speed` times B0's median (0 for what is unpriced); a
        demonstrated cheap warm-up (protocol.warmup_steps) at its share of the track's steps."""
        count = self.requests.most if most else self.requests.least
        warm = self.warmups.most if most else self.warmups.least
        steps = plan.latency.warmup_steps
        share = 1.0 if steps is None else min(1.0, steps / plan.shape.num_inference_steps)
        median = prices.request_s.get(plan.duration, 0.0)
        return (self.starts * prices.start_s.get(plan.duration, 0.0)
                + ((count - warm) + warm * share) * median * speed
                + self.scored * prices.score_s(plan))

    def to_dict(self) -> dict[str, Any]:
        return {"starts": self.starts, "requests": [self.requests.least, self.requests.most],
                "scored_outputs": self.scored}


@dataclass(frozen=True)
class CandidateCost:
    """One candidate of one track: its gate and latency protocol, and B0's share it needs (B0's
    whole part on the first candidate of a track with a shared B0, none on the others)."""

    track: str
    candidate: str
    gate: Part  # the candidate's quality gate
    latency: Part  # the candidate's latency instances and its caching probe
    b0_gate: Part  # B0's quality gate (once per track: on its first candidate)
    b0_latency: Part  # B0's latency instances (shared: on the first candidate only)
    target_ratio: float
    unpriced: tuple[str, ...] = ()
    seconds_at_target: float | None = None
    seconds_upper: float | None = None

    @property
    def starts(self) -> int:
        """Latency-protocol instance starts, B0's and the candidate's."""
        return self.latency.starts + self.b0_latency.starts

    @property
    def b0(self) -> Requests:
        return self.b0_latency.requests

    @property
    def candidate_requests(self) -> Requests:
        return self.latency.requests + self.gate.requests

    def host_seconds(self) -> tuple[float, float] | None:
        """(at the target ratio, no faster than B0); None while a price is missing."""
        if self.seconds_at_target is None or self.seconds_upper is None:
            return None
        return self.seconds_at_target, self.seconds_upper

    def to_dict(self) -> dict[str, Any]:
        host = self.host_seconds()
        return {"track": self.track, "candidate": self.candidate,
                "instance_starts": self.starts, "gate": self.gate.to_dict(),
                "latency": self.latency.to_dict(), "b0_gate": self.b0_gate.to_dict(),
                "b0_latency": self.b0_latency.to_dict(),
                "b0_requests": [self.b0.least, self.b0.most],
                "candidate_requests": [self.candidate_requests.least,
                                       self.candidate_requests.most],
                "host_s_at_target": None if host is None else host[0],
                "host_s_upper": None if host is None else host[1],
                "unpriced": list(self.unpriced)}


def _gate_parts(plan: TrackPlan) -> tuple[Part, Part]:
    """(B0's, a candidate's) quality gate. Hosted by the candidate's first latency instance
    (run_plan.hosts_gate: a session measures and judges it), the candidate's gate starts no
    instance (that start is the latency part's) and sends hosted_gate_requests."""
    hosted = hosts_gate(plan)
    if plan.quality == "lossless":
        own = hosted_gate_requests(plan) if hosted else lossless_candidate_requests()
        return (Part(lossless_baseline_starts(), Requests(*(lossless_baseline_requests(),) * 2)),
                Part(0 if hosted else lossless_candidate_starts(), Requests(own, own)))
    b0, cand = lossy_baseline_requests(plan.seeds), lossy_candidate_requests(plan.seeds)
    return (Part(lossy_baseline_starts(), Requests(b0, b0), b0),
            Part(0 if hosted else lossy_candidate_starts(), Requests(cand, cand), cand))


def _latency_parts(plan: TrackPlan, candidate: str) -> tuple[Part, Part]:
    """(B0's, the candidate's) latency instances, from the frozen sequence; the first of the
    candidate's hosts its gate where run_plan.hosts_gate."""
    settings = plan.latency
    per_instance = Requests(settings.warmups + settings.repeats,
                            settings.max_warmups + settings.repeats)
    warm = Requests(settings.warmups, settings.max_warmups)
    # The hosting instance does not send again the warm-ups its gate's requests were.
    least, most = hosted_warmup_requests(settings, hosted_gate_warmups(plan)) \
        if hosts_gate(plan) else (settings.warmups, settings.max_warmups)
    hosting = Part(1, Requests(least + settings.repeats, most + settings.repeats), 0,
                   Requests(least, most))
    b0, cand = Part(0, Requests(0, 0)), Part(0, Requests(0, 0))
    for arm in sequence(settings, candidate):
        if arm == ArmRole.B0:
            b0 = b0 + Part(1, per_instance, 0, warm)
        else:
            cand = cand + (Part(1, per_instance, 0, warm) if cand.starts else hosting)
    probe = settings.caching_probe_requests
    return b0, cand + Part(0, Requests(probe, probe))


def _priced(cost: CandidateCost, plan: TrackPlan, prices: Prices) -> CandidateCost:
    unpriced = tuple(prices.unpriced(plan))
    if unpriced:
        return replace(cost, unpriced=unpriced)
    b0 = cost.b0_gate + cost.b0_latency
    own = cost.gate + cost.latency
    at = b0.seconds(plan, prices, 1.0) + own.seconds(plan, prices, cost.target_ratio)
    upper = b0.seconds(plan, prices, 1.0) + own.seconds(plan, prices, 1.0)
    return replace(cost, seconds_at_target=at, seconds_upper=upper)


def _parts(plan: TrackPlan, candidate: str) -> CandidateCost:
    """One candidate with B0's whole part, not priced yet."""
    b0_gate, gate = _gate_parts(plan)
    b0_latency, latency = _latency_parts(plan, candidate)
    return CandidateCost(plan.track_id, candidate, gate, latency, b0_gate, b0_latency,
                         plan.latency.target_ratio)


def candidate_cost(plan: TrackPlan, candidate: str, prices: Prices) -> CandidateCost:
    """One candidate with B0's whole part (a track of one candidate)."""
    return _priced(_parts(plan, candidate), plan, prices)


def b0_gate_part(track_id: str, group: Mapping[str, TrackPlan]) -> Part:
    """This track's share of its gate group's B0 gate instances (judging/_b0_gate.py, counted as
    run_plan.gate_units counts them): the two starts on the group's first track, each request
    on the track that makes it."""
    unit = next(u for u in gate_units(group) if u.track == track_id)
    return Part(unit.starts, Requests(unit.requests, unit.requests), unit.scored)


def track_costs(plan: TrackPlan, candidates: Sequence[str], prices: Prices,
                *, b0_latency_paid: bool = False, b0_gate: Part | None = None
                ) -> list[CandidateCost]:
    """Per candidate; B0's gate runs once per track and a shared B0's latency instances too
    (baseline_instances: shared), so both are counted on the track's first candidate only.
    `b0_latency_paid`: another track of its baseline group (plan.baseline_groups) already
    counts the B0 latency instances these candidates are judged on. `b0_gate`: the track's
    share of B0 gate instances it shares with others (b0_gate_part), else its own."""
    shared = plan.latency.baseline_instances == "shared"
    costs = []
    none = Part(0, Requests(0, 0))
    for index, candidate in enumerate(candidates):
        alone = _parts(plan, candidate)
        gate = none if index else alone.b0_gate if b0_gate is None else b0_gate
        paid = b0_latency_paid or (shared and index > 0)
        costs.append(_priced(replace(alone, b0_gate=gate,
                                     b0_latency=none if paid else alone.b0_latency),
                             plan, prices))
    return costs


def _grouped(plans: Mapping[str, TrackPlan], candidates: Mapping[str, Sequence[str]],
             prices: Prices, share: bool) -> list[list[CandidateCost]]:
    """Per track (in `candidates`' order), its costs; with `share`, a B0 latency set counted
    once per baseline group of the tracks that have candidates, on the group's first track."""
    measured = {t: plans[t] for t in candidates if candidates[t]}
    groups = baseline_groups(measured) if share else {}
    gates = gate_groups(measured) if share else {}
    paid: set[tuple[str, ...]] = set()
    out = []
    for track_id, ids in candidates.items():
        group = groups.get(track_id, (track_id,))
        gate = gates.get(track_id, (track_id,))
        out.append(track_costs(plans[track_id], ids, prices,
                               b0_latency_paid=bool(ids) and group in paid,
                               b0_gate=b0_gate_part(track_id, {t: plans[t] for t in gate})
                               if len(gate) > 1 else None))
        if ids:
            paid.add(group)
    return out


def campaign_costs(plans: Mapping[str, TrackPlan], prices: Prices, *, share: bool = True
                   ) -> list[CandidateCost]:
    """Every track's candidates as the campaign names them; with `share` (one session runs
    them all), B0's latency instances once per baseline group (plan.baseline_groups)."""
    candidates = {t: [a.id for a in plan.candidates] for t, plan in plans.items()}
    return [cost for costs in _grouped(plans, candidates, prices, share) for cost in costs]


def shared_groups(plans: Mapping[str, TrackPlan], *, gates: bool = False
                  ) -> list[tuple[str, ...]]:
    """The baseline groups (`gates`: the gate groups) of more than one track with candidates,
    as `plan` names them."""
    measured = {t: p for t, p in plans.items() if p.candidates}
    groups = gate_groups(measured) if gates else baseline_groups(measured)
    return list(dict.fromkeys(g for g in groups.values() if len(g) > 1))


def total_seconds(costs: Sequence[CandidateCost]) -> tuple[float, float] | None:
    """(at the target ratio, upper) of all of them; None while any is unpriced."""
    target = upper = 0.0
    for cost in costs:
        host = cost.host_seconds()
        if host is None:
            return None
        target, upper = target + host[0], upper + host[1]
    return target, upper


def unpriced(costs: Sequence[CandidateCost]) -> list[str]:
    return list(dict.fromkeys(name for cost in costs for name in cost.unpriced))


def unpriced_text(names: Sequence[str]) -> str:
    """The missing prices in brief: each field once, with the duration classes (and, for
    scoring, how many gated dimensions) it lacks."""
    grouped: dict[str, dict[str, int]] = {}
    for name in names:
        parts = name.split(".")
        field_name, duration = ".".join(parts[:2]), parts[2] if len(parts) > 2 else ""
        per = grouped.setdefault(field_name, {})
        per[duration] = per.get(duration, 0) + 1
    said = []
    for field_name, per in grouped.items():
        if field_name == "scoring.seconds_per_output":
            counts = ", ".join(f"{d}: {n} gated dimension(s)" for d, n in per.items())
            said.append(f"{field_name} ({counts})")
        else:
            said.append(f"{field_name} ({', '.join(per)})")
    return "; ".join(said)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def describe(plans: Mapping[str, TrackPlan], prices: Prices) -> list[str]:
    """The protocol in one line, then a line per track and candidate, then the totals."""
    if not plans:
        return ["no tracks"]
    settings = next(iter(plans.values())).latency
    if settings.replication == "instance":
        design = (f"instance design: {settings.instances_per_arm} fresh instances per arm, "
                  "interleaved")
    else:
        design = f"request design: {settings.ordering} (every measured request a sample)"
    warm = (f"{settings.warmups}-{settings.max_warmups} warm-ups (until two agree within "
            f"{settings.steady_fraction:.0%})" if settings.steady_fraction is not None
            else f"{settings.warmups} warm-ups")
    lines = [f"protocol: {design}; per instance {warm} and {settings.repeats} measured; "
             f"caching probe {settings.caching_probe_requests} distinct per candidate",
             "quality gates first, each on its candidate's first latency instance before "
             "the warm-ups: a candidate that fails one starts no other, and a latency protocol "
             "stops once supported is out of reach (priced here as if neither happened)"]
    shared = [t for t, p in plans.items()
              if p.latency.baseline_instances == "shared" and len(p.candidates) > 1]
    if shared:
        lines.append("B0's gate and (shared) latency instances counted on each track's first "
                     "candidate: " + ", ".join(shared))
    across = shared_groups(plans)
    if across:
        lines.append("B0's latency instances shared across tracks (the same server asked the "
                     "same timed request; counted on the first): "
                     + "; ".join(" + ".join(g) for g in across))
    gated = shared_groups(plans, gates=True)
    if gated:
        lines.append("B0's gate instances shared across tracks (one pair answers both gates; "
                     "its starts counted on the first): " + "; ".join(" + ".join(g)
                                                                     for g in gated))
    costs = campaign_costs(plans, prices)
    width = max([len("candidate"), *(len(c.candidate) for c in costs)])
    lines.append(f"{'track':<13} {'candidate':<{width}} {'starts':>6} {'B0 req':>7} "
                 f"{'cand req':>8} {'scored':>6}  host time (at target / no faster than B0)")
    for cost in costs:
        host = cost.host_seconds()
        shown = ("not priced" if host is None else f"{_hours(host[0])} / {_hours(host[1])}")
        starts = cost.gate.starts + cost.latency.starts + cost.b0_gate.starts \
            + cost.b0_latency.starts
        scored = cost.gate.scored + cost.b0_gate.scored
        b0_requests = cost.b0_gate.requests + cost.b0_latency.requests
        lines.append(f"{cost.track:<13} {cost.candidate:<{width}} {starts:>6} "
                     f"{b0_requests.text():>7} {cost.candidate_requests.text():>8} "
                     f"{scored:>6}  {shown}")
    total = total_seconds(costs)
    starts = sum(c.gate.starts + c.latency.starts + c.b0_gate.starts + c.b0_latency.starts
                 for c in costs)
    if total is None:
        lines.append(f"total: {starts} engine starts; host time not priced: the campaign "
                     f"freezes no {unpriced_text(unpriced(costs))}")
    else:
        lines.append(f"total: {starts} engine starts, every request, start and score priced; "
                     f"{_hours(total[0])} at the target ratio, {_hours(total[1])} if no "
                     f"candidate is faster than B0 (scoring on {prices.scoring_device})")
    return lines


# -- the whole search and the confirmation -------------------------------------------------------

@dataclass(frozen=True)
class SearchCost:
    """The campaign's declared search priced against its budget."""

    directions: int
    screened: dict[str, int]  # track -> directions screened on it
    worst_s: float | None  # every candidate passes its gate and sits at the target
    mix_s: float | None  # at the campaign's outcome mix (None without one)
    confirmation_s: float | None  # one final configuration per track, all four tracks
    unpriced: tuple[str, ...]
    # in the worst case: engine starts, at what each costs, and outputs scored, at what each costs
    starts: int = 0
    start_s: float = 0.0
    scored: int = 0
    score_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"directions": self.directions, "screened": dict(self.screened),
                "worst_s": self.worst_s, "mix_s": self.mix_s,
                "confirmation_s": self.confirmation_s, "unpriced": list(self.unpriced),
                "worst_starts": self.starts, "worst_scored_outputs": self.scored}

    def break_even(self, ceiling_s: float) -> tuple[float | None, float | None]:
        """The longest start (scoring as priced), and the most seconds to score one output
        (starts as priced), at which the worst case still fits `ceiling_s`; None: no such."""
        if self.worst_s is None:
            return None, None
        start = score = None
        if self.starts:
            left = ceiling_s - (self.worst_s - self.starts * self.start_s)
            start = left / self.starts if left >= 0 else None
        if self.scored:
            left = ceiling_s - (self.worst_s - self.scored * self.score_s)
            score = left / self.scored if left >= 0 else None
        return start, score


def _mix_seconds(costs: Sequence[CandidateCost], plan: TrackPlan, prices: Prices,
                 mix: Any) -> float:
    """A track's directions at the outcome mix: a gate failure costs its gate (no faster than
    B0); a candidate out of reach its gate and all but one of its own latency instances (where
    the futility stop ends a candidate no faster than B0, replication.supported_reachable); one
    at the target its whole protocol. B0's part is priced whole."""
    total = 0.0
    n = plan.latency.instances_per_arm or 1
    # A gate hosted by the candidate's first latency instance costs that instance's start, and
    # a lossy one its remaining warm-ups and measured requests too: it is scored once that
    # instance has stopped.
    settings = plan.latency
    waits = plan.quality == "lossy" and hosts_gate(plan)
    ran = hosted_warmup_requests(settings, hosted_gate_warmups(plan))[1] + settings.repeats \
        if waits else 0
    hosting = Part(1 if hosts_gate(plan) else 0, Requests(ran, ran))
    for cost in costs:
        b0 = (cost.b0_gate + cost.b0_latency).seconds(plan, prices, 1.0)
        gate = (cost.gate + hosting).seconds(plan, prices, 1.0)
        latency_slow = cost.latency.seconds(plan, prices, 1.0) * (n - 1) / n
        full = (cost.gate + cost.latency).seconds(plan, prices, cost.target_ratio)
        total += b0 + mix.gate_failed * gate + mix.out_of_reach * (gate + latency_slow) \
            + mix.at_target * full
    return total


def search_cost(campaign: LoadedCampaign, plans: Mapping[str, TrackPlan], prices: Prices
                ) -> SearchCost | None:
    """The declared search (None when the campaign declares none), each track's directions
    sharing its B0 as the run does."""
    search = campaign.model.search
    if search is None:
        return None
    screened: dict[str, list[str]] = {}
    for direction in search.directions:
        for track in direction.tracks:
            screened.setdefault(track, []).append(direction.id)
    worst = mix = 0.0
    missing: list[str] = []
    starts = scored = 0
    start_s = score_s = 0.0
    for track_id, costs in zip(screened, _grouped(plans, screened, prices, True), strict=True):
        plan = plans[track_id]
        missing += unpriced(costs)
        for cost in costs:
            parts = cost.gate + cost.latency + cost.b0_gate + cost.b0_latency
            starts, scored = starts + parts.starts, scored + parts.scored
        # (one duration class is what a screening uses; the last one's prices are shown)
        start_s = prices.start_s.get(plan.duration, 0.0)
        score_s = max(score_s, prices.score_s(plan))
        total = total_seconds(costs)
        if total is not None:
            worst += total[0]
            if search.outcome_mix is not None:
                mix += _mix_seconds(costs, plans[track_id], prices, search.outcome_mix)
    confirm = [c for costs in _grouped(plans, {t: ["final"] for t in plans}, prices, True)
               for c in costs]
    missing += unpriced(confirm)
    confirmed = total_seconds(confirm)
    priced = not missing
    return SearchCost(len(search.directions), {t: len(i) for t, i in screened.items()},
                      worst if priced else None,
                      mix if priced and search.outcome_mix is not None else None,
                      confirmed[0] if confirmed is not None else None,
                      tuple(dict.fromkeys(missing)), starts, start_s, scored, score_s)


def search_lines(found: SearchCost, wall_ceiling_h: float, device_ceiling_h: float,
                 devices: int) -> list[str]:
    """The search against the ceilings, as `plan` prints it."""
    per_track = ", ".join(f"{t} {n}" for t, n in found.screened.items())
    lines = [f"search: {found.directions} candidate directions ({per_track})"]
    if found.worst_s is None:
        return [*lines, "search: not priced: the campaign freezes no "
                + unpriced_text(found.unpriced)]

    def against(label: str, seconds: float) -> str:
        wall, device = seconds / 3600, seconds * devices / 3600
        fits = wall <= wall_ceiling_h and device <= device_ceiling_h
        return (f"  {label}: {wall:.2f} wall-h, {device:.2f} device-h "
                f"({'within' if fits else 'OVER'} {wall_ceiling_h:g} wall-h / "
                f"{device_ceiling_h:g} device-h)")

    lines.append(against("worst case (every candidate passes its gate and sits at the target)",
                         found.worst_s))
    if found.mix_s is not None:
        lines.append(against("at the campaign's outcome mix", found.mix_s))
    ceiling = min(wall_ceiling_h, device_ceiling_h / max(devices, 1)) * 3600
    start, score = found.break_even(ceiling)
    if found.worst_s > ceiling:
        lines.append(
            f"  the worst case fits only if an engine start ({found.starts} of them, priced at "
            f"{found.start_s:g} s) takes at most "
            + ("- (no start time fits)" if start is None else f"{start:.0f} s")
            + (f", or if scoring one output ({found.scored} of them, priced at "
               f"{found.score_s:.0f} s) takes at most "
               + ("- (no scoring time fits)" if score is None else f"{score:.0f} s")
               if found.scored else ""))
    if found.confirmation_s is not None:
        lines.append(f"  four-track confirmation of one final configuration per track: "
                     f"{found.confirmation_s / 3600:.2f} wall-h, "
                     f"{found.confirmation_s * devices / 3600:.2f} device-h (a budget of its "
                     "own)")
    return lines
