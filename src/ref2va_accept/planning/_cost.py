"""What the frozen protocol costs on the host, per track and candidate, before anything runs.

Every engine start, warm-up, request and score is host time (on the 910C a 5 s request takes
about 292 s and a 15 s one about 1,703 s; scoring one 15 s output on every model-based VBench
dimension took 1 h 50 min of two CPU cores), so the choice of instances per arm, warm-ups,
measured requests and gated dimensions is made with this in view. `ref2va-accept plan` and
`verify` print it; the budget check refuses a run that would pass a ceiling. The counts come from
the same code the run uses: the latency protocol's instance order (timing.candidate_schedule), its
caching probe, and the quality gates' request counts (planning/_request_plan.py, which a test holds
to the gates). Warm-ups are a range when the steady-state rule may ask for more than the minimum.

Prices are the campaign's frozen figures (planning/_prices.py, `Prices.of`): B0's
complete-request latency, an engine start and an engine stop per duration class, and the seconds
one output costs per scored dimension. B0's requests are priced at the median; the candidate's at
the target ratio of it (a supported candidate is at most that fast) and, as the upper bound, at
the median itself (a candidate no faster than B0). Every start is followed by a stop, priced at
`protocol.expected_stop_s` or, where the campaign has none, at its bound. What a campaign does
not price is named, never left out silently: a total is only given when every figure it needs is
frozen. Scoring is wall time, and logical-device time only where it occupies an accelerator: on
the CPU it runs after the instance has stopped, holding no device (`device_seconds`).

The campaign's `search` is priced as a whole in planning/_search.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import ConfigDict, Field, model_serializer

from ref2va_accept.core import ArmRole
from ref2va_accept.evidence import Number, Record
from ref2va_accept.planning._prices import Prices, unpriced_text
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
from ref2va_accept.timing import candidate_schedule


class Requests(Record):
    """A count of requests, least and most (warm-ups may run to their bound), written as
    [least, most]."""

    model_config = ConfigDict(frozen=True)

    least: int
    most: int

    @classmethod
    def exactly(cls, count: int) -> Requests:
        return cls(least=count, most=count)

    def __add__(self, other: Requests) -> Requests:
        return Requests(least=self.least + other.least, most=self.most + other.most)

    def __mul__(self, times: int) -> Requests:
        return Requests(least=self.least * times, most=self.most * times)

    def text(self) -> str:
        return str(self.least) if self.least == self.most else f"{self.least}-{self.most}"

    @model_serializer
    def _pair(self) -> list[int]:
        return [self.least, self.most]


NO_REQUESTS = Requests(least=0, most=0)


class Part(Record):
    """What one arm's share of a track asks of the host: starts, requests and scored outputs
    (plan --json and verify --json write it, its warm-ups left out)."""

    model_config = ConfigDict(frozen=True)

    starts: int
    requests: Requests  # every request, warm-ups included
    scored_outputs: int
    warmups: Requests = Field(default=NO_REQUESTS, exclude=True)  # of the requests, the warm-ups

    def __add__(self, other: Part) -> Part:
        return Part(starts=self.starts + other.starts, requests=self.requests + other.requests,
                    scored_outputs=self.scored_outputs + other.scored_outputs,
                    warmups=self.warmups + other.warmups)

    def __mul__(self, times: int) -> Part:
        """`times` of it (0: none)."""
        return Part(starts=self.starts * times, requests=self.requests * times,
                    scored_outputs=self.scored_outputs * times, warmups=self.warmups * times)

    def seconds(self, plan: TrackPlan, prices: Prices, speed: float, *, most: bool = True
                ) -> float:
        """Host seconds with requests at `speed` times B0's median (0 for what is unpriced); a
        demonstrated cheap warm-up (protocol.warmup_steps) at its share of the track's steps."""
        count = self.requests.most if most else self.requests.least
        warm = self.warmups.most if most else self.warmups.least
        steps = plan.latency.warmup_steps
        share = 1.0 if steps is None else min(1.0, steps / plan.shape.num_inference_steps)
        median = prices.request_s.get(plan.duration, 0.0)
        return (self.starts * (prices.start_s.get(plan.duration, 0.0) + prices.stop(plan.duration))
                + ((count - warm) + warm * share) * median * speed
                + self.scoring_seconds(plan, prices))

    def scoring_seconds(self, plan: TrackPlan, prices: Prices) -> float:
        """Of `seconds`, the scoring: wall time, and device time only on an accelerator."""
        return self.scored_outputs * prices.score_s(plan)


NO_PART = Part(starts=0, requests=NO_REQUESTS, scored_outputs=0)


class CandidateCost(Record):
    """One candidate of one track: its gate and latency protocol, and B0's share it needs (B0's
    whole part on the first candidate of a track with a shared B0, none on the others); its
    counts and seconds computed when `_cost` builds it (plan --json, verify --json)."""

    model_config = ConfigDict(frozen=True)

    track: str
    candidate: str
    instance_starts: int  # latency-protocol instance starts, B0's and the candidate's
    gate: Part  # the candidate's quality gate
    latency: Part  # the candidate's latency instances and its caching probe
    b0_gate: Part  # B0's quality gate (once per track: on its first candidate)
    b0_latency: Part  # B0's latency instances (shared: on the first candidate only)
    b0_requests: Requests  # B0's latency requests
    candidate_requests: Requests  # the candidate's, latency and gate
    # Host seconds at the target ratio and no faster than B0; None while a price is missing.
    host_s_at_target: Number | None
    host_s_upper: Number | None
    scoring_s: Number  # of those seconds (the same in both), scoring's
    unpriced: tuple[str, ...]

    def host_seconds(self) -> tuple[float, float] | None:
        """(at the target ratio, no faster than B0); None while a price is missing."""
        if self.host_s_at_target is None or self.host_s_upper is None:
            return None
        return self.host_s_at_target, self.host_s_upper


def _gate_parts(plan: TrackPlan) -> tuple[Part, Part]:
    """(B0's, a candidate's) quality gate. Hosted by the candidate's first latency instance
    (run_plan.hosts_gate: a session measures and judges it), the candidate's gate starts no
    instance (that start is the latency part's) and sends hosted_gate_requests."""
    hosted = hosts_gate(plan)
    if plan.quality == "lossless":
        own = hosted_gate_requests(plan) if hosted else lossless_candidate_requests()
        return (Part(starts=lossless_baseline_starts(),
                     requests=Requests.exactly(lossless_baseline_requests()), scored_outputs=0),
                Part(starts=0 if hosted else lossless_candidate_starts(),
                     requests=Requests.exactly(own), scored_outputs=0))
    # Every B0 output priced as scored, though one that repeats the first instance's bytes is
    # scored once on the CPU (judging/_lossy.py): which will is only known once they are made.
    b0, cand = lossy_baseline_requests(plan.seeds), lossy_candidate_requests(plan.seeds)
    return (Part(starts=lossy_baseline_starts(), requests=Requests.exactly(b0), scored_outputs=b0),
            Part(starts=0 if hosted else lossy_candidate_starts(), requests=Requests.exactly(cand),
                 scored_outputs=cand))


def _latency_parts(plan: TrackPlan, candidate: str) -> tuple[Part, Part]:
    """(B0's, the candidate's) latency instances, from the frozen sequence; the first of the
    candidate's hosts its gate where run_plan.hosts_gate."""
    settings = plan.latency
    warm = Requests(least=settings.warmups, most=settings.max_warmups)
    measured = Requests.exactly(settings.repeats)
    instance = Part(starts=1, requests=warm + measured, scored_outputs=0, warmups=warm)
    # The hosting instance does not send again the warm-ups its gate's requests were.
    least, most = hosted_warmup_requests(settings, hosted_gate_warmups(plan)) \
        if hosts_gate(plan) else (settings.warmups, settings.max_warmups)
    hosted = Requests(least=least, most=most)
    hosting = Part(starts=1, requests=hosted + measured, scored_outputs=0, warmups=hosted)
    schedule = candidate_schedule(settings, candidate)
    b0 = schedule.count(ArmRole.B0)
    own = len(schedule) - b0  # the first of them hosts the gate
    probe = Part(starts=0, requests=Requests.exactly(settings.caching_probe_requests),
                 scored_outputs=0)
    return instance * b0, (hosting + instance * (own - 1) if own else NO_PART) + probe


def _cost(plan: TrackPlan, candidate: str, prices: Prices, *, gate: Part, latency: Part,
          b0_gate: Part, b0_latency: Part) -> CandidateCost:
    """One candidate of `plan` with these parts, priced (none of its seconds while a price it
    needs is missing)."""
    unpriced = tuple(prices.unpriced(plan))
    at = upper = None
    scoring = 0.0
    if not unpriced:
        b0, own = b0_gate + b0_latency, gate + latency
        at = b0.seconds(plan, prices, 1.0) + own.seconds(plan, prices, plan.latency.target_ratio)
        upper = b0.seconds(plan, prices, 1.0) + own.seconds(plan, prices, 1.0)
        scoring = (b0 + own).scoring_seconds(plan, prices)
    return CandidateCost(
        track=plan.track_id, candidate=candidate,
        instance_starts=latency.starts + b0_latency.starts, gate=gate, latency=latency,
        b0_gate=b0_gate, b0_latency=b0_latency, b0_requests=b0_latency.requests,
        candidate_requests=latency.requests + gate.requests, host_s_at_target=at,
        host_s_upper=upper, scoring_s=scoring, unpriced=unpriced)


def candidate_cost(plan: TrackPlan, candidate: str, prices: Prices) -> CandidateCost:
    """One candidate with B0's whole part (a track of one candidate)."""
    b0_gate, gate = _gate_parts(plan)
    b0_latency, latency = _latency_parts(plan, candidate)
    return _cost(plan, candidate, prices, gate=gate, latency=latency, b0_gate=b0_gate,
                 b0_latency=b0_latency)


def b0_gate_part(track_id: str, group: Mapping[str, TrackPlan]) -> Part:
    """This track's share of its gate group's B0 gate instances (judging/_b0_gate.py, counted as
    run_plan.gate_units counts them): the two starts on the group's first track, each request
    on the track that makes it."""
    unit = next(u for u in gate_units(group) if u.track == track_id)
    return Part(starts=unit.starts, requests=Requests.exactly(unit.requests),
                scored_outputs=unit.scored)


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
    for index, candidate in enumerate(candidates):
        own_b0_gate, gate = _gate_parts(plan)
        b0_latency, latency = _latency_parts(plan, candidate)
        paid = b0_latency_paid or (shared and index > 0)
        costs.append(_cost(plan, candidate, prices, gate=gate, latency=latency,
                           b0_gate=NO_PART if index else own_b0_gate if b0_gate is None
                           else b0_gate, b0_latency=NO_PART if paid else b0_latency))
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


def device_seconds(costs: Sequence[CandidateCost], prices: Prices, devices: int
                   ) -> tuple[float, float] | None:
    """Logical-device seconds (at the target ratio, upper): every instance's time on the
    campaign's devices, scoring's on the devices it occupies (none on the CPU: it runs once the
    instance has stopped); None while any is unpriced."""
    total = total_seconds(costs)
    if total is None:
        return None
    scoring = sum(c.scoring_s for c in costs)
    return tuple(  # type: ignore[return-value]
        (t - scoring) * devices + scoring * prices.scoring_devices for t in total)


def unpriced(costs: Sequence[CandidateCost]) -> list[str]:
    return list(dict.fromkeys(name for cost in costs for name in cost.unpriced))


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def cost_lines(plans: Mapping[str, TrackPlan], prices: Prices) -> list[str]:
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
        scored = cost.gate.scored_outputs + cost.b0_gate.scored_outputs
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
        lines.append(f"total: {starts} engine starts, every request, start, stop and score "
                     f"priced; {_hours(total[0])} at the target ratio, {_hours(total[1])} if no "
                     f"candidate is faster than B0 (scoring on {prices.scoring_device})")
    return lines
