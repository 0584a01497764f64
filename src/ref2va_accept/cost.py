"""What the frozen protocol costs on the host, per track and candidate, before anything runs.

Every instance start, warm-up and request is host time (on the 910C a 5 s request takes about
292 s and a 15 s one about 1,703 s), so the choice of instances per arm, warm-ups and measured
requests is made with this in view. `ref2va-accept verify` prints it. The counts come from the
same code the run uses: the latency protocol's instance sequence (replication.sequence), its
caching probe, and the quality gates' request counts (run_plan.py, which a test holds to the
gates). Warm-ups are a range when the steady-state rule may ask for more than the minimum.

Host time is priced with the campaign's frozen preflight medians (`protocol.expected_request_s`,
B0's complete-request latency per duration class) when given: B0's requests at that median, the
candidate's at the target ratio of it (a candidate that is supported is at most that fast) and,
as the upper bound, at the median itself (a candidate no faster than B0). Engine start-up and
scoring are not included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from .campaign import DurationClass
from .plan import TrackPlan
from .replication import BASELINE, sequence
from .run_plan import (
    lossless_baseline_requests,
    lossless_candidate_requests,
    lossy_baseline_requests,
    lossy_candidate_requests,
)


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
class CandidateCost:
    track: str
    candidate: str
    starts: int  # latency-protocol instance starts, B0's and the candidate's
    b0: Requests  # B0's requests in this candidate's latency protocol
    candidate_requests: Requests  # the candidate's: latency protocol and its quality gate
    b0_quality: int  # the track's B0 quality-gate requests (made once per track, shared)
    expected_s: float | None  # B0's frozen preflight median for this duration, if given
    target_ratio: float

    def host_seconds(self) -> tuple[float, float] | None:
        """(at the target ratio, upper bound) for the most requests; None without a median."""
        if self.expected_s is None:
            return None
        b0 = self.b0.most * self.expected_s
        cand = self.candidate_requests.most * self.expected_s
        return b0 + cand * self.target_ratio, b0 + cand

    def to_dict(self) -> dict[str, Any]:
        host = self.host_seconds()
        return {"track": self.track, "candidate": self.candidate, "instance_starts": self.starts,
                "b0_requests": [self.b0.least, self.b0.most],
                "candidate_requests": [self.candidate_requests.least,
                                       self.candidate_requests.most],
                "b0_quality_requests_per_track": self.b0_quality,
                "expected_request_s": self.expected_s,
                "host_s_at_target": None if host is None else host[0],
                "host_s_upper": None if host is None else host[1]}


def _quality_requests(plan: TrackPlan) -> tuple[int, int]:
    if plan.quality == "lossless":
        return lossless_baseline_requests(), lossless_candidate_requests()
    return lossy_baseline_requests(plan.seeds), lossy_candidate_requests(plan.seeds)


def candidate_cost(plan: TrackPlan, candidate: str,
                   expected: Mapping[DurationClass, float] | None) -> CandidateCost:
    settings = plan.latency
    order = sequence(settings, candidate)
    per_instance = Requests(settings.warmups + settings.repeats,
                            settings.max_warmups + settings.repeats)
    b0, cand = Requests(0, 0), Requests(0, 0)
    for arm in order:
        if arm == BASELINE:
            b0 = b0 + per_instance
        else:
            cand = cand + per_instance
    probe = settings.caching_probe_requests
    b0_quality, cand_quality = _quality_requests(plan)
    cand = cand + Requests(probe + cand_quality, probe + cand_quality)
    return CandidateCost(plan.track_id, candidate, len(order), b0, cand, b0_quality,
                         None if expected is None else expected.get(plan.duration),
                         settings.target_ratio)


def campaign_costs(plans: Mapping[str, TrackPlan], expected: Mapping[DurationClass, float] | None
                   ) -> list[CandidateCost]:
    """Per track and candidate; a shared B0 (baseline_instances: shared) runs once per track,
    so its instances and requests are counted on the track's first candidate only."""
    costs = []
    for plan in plans.values():
        shared = plan.latency.baseline_instances == "shared"
        for index, arm in enumerate(plan.candidates):
            cost = candidate_cost(plan, arm.id, expected)
            if shared and index:
                # A shared B0 is the instance design (the schema says so): N B0 instances.
                b0_starts = plan.latency.instances_per_arm or 0
                cost = replace(cost, starts=cost.starts - b0_starts, b0=Requests(0, 0))
            costs.append(cost)
    return costs


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def describe(plans: Mapping[str, TrackPlan], expected: Mapping[DurationClass, float] | None
             ) -> list[str]:
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
             f"caching probe {settings.caching_probe_requests} distinct per candidate"]
    shared = [t for t, p in plans.items()
              if p.latency.baseline_instances == "shared" and len(p.candidates) > 1]
    if shared:
        lines.append("B0's instances shared by a track's candidates (counted on its first): "
                     + ", ".join(shared))
    costs = campaign_costs(plans, expected)
    width = max([len("candidate"), *(len(c.candidate) for c in costs)])
    lines.append(f"{'track':<13} {'candidate':<{width}} {'starts':>6} {'B0 req':>7} "
                 f"{'cand req':>8}  host time (at target / no faster than B0)")
    total_starts, total = 0, [0.0, 0.0]
    b0_quality: dict[str, int] = {}
    for cost in costs:
        host = cost.host_seconds()
        shown = ("no preflight median frozen" if host is None
                 else f"{_hours(host[0])} / {_hours(host[1])}")
        lines.append(f"{cost.track:<13} {cost.candidate:<{width}} {cost.starts:>6} "
                     f"{cost.b0.text():>7} {cost.candidate_requests.text():>8}  {shown}")
        total_starts += cost.starts
        if host is not None:
            total = [total[0] + host[0], total[1] + host[1]]
        b0_quality[cost.track] = cost.b0_quality
    medians: Mapping[DurationClass, float] = expected or {}
    quality_s = sum(n * medians.get(plans[t].duration, 0.0) for t, n in b0_quality.items())
    lines.append(
        "B0 quality-gate requests, once per track: "
        + ", ".join(f"{t} {n}" for t, n in b0_quality.items())
        + (f" ({_hours(quality_s)})" if expected else ""))
    lines.append(f"total: {total_starts} latency-protocol instance starts"
                 + (f"; {_hours(total[0] + quality_s)} at the target ratio, "
                    f"{_hours(total[1] + quality_s)} if no candidate is faster than B0 "
                    "(engine starts and scoring not included)" if expected else
                    "; no preflight medians frozen (protocol.expected_request_s), so no host "
                    "time"))
    return lines
