"""The latency protocol of one track and candidate: frozen A/B runs on independent servers.

Each letter of the frozen ordering is a freshly started instance of that arm: warmups (recorded,
excluded), then the measured requests with the track's seeds, every sample written to the
evidence as it is taken. Devices are probed before, during and after each instance. Then, in the
documented order (docs/protocol.md): run not evaluable (interference, B0 request failed, drift,
incomplete cleanup) -> inconclusive; candidate defect (request failed, caching suspected) ->
failed; otherwise the ratio interval decides, its typed result carried by the latency check.
On a lossless track the timed outputs are also compared with the watched quality output
(timed_output.py). Quality gates run in their own scenarios; the per-track verdict combines them.
"""

from __future__ import annotations

import logging
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .checks import Check, Reason
from .devices import DeviceProbe, foreign_processes, probe_for
from .gates import GateResult
from .plan import TrackPlan
from .server import EngineInstance
from .stats import latency_verdict
from .timed_output import timed_output_check
from .verdicts import CheckResult
from .workload import Arms, Outcome

log = logging.getLogger(__name__)

# A repeated identical request more than this much faster than distinct ones suggests the
# engine serves answers from a cache rather than computing them (MLPerf TEST04 idea).
CACHING_MARGIN = 0.10
CACHING_SEED_OFFSET = 1_000_003


def ordering(design: str, order_seed: int, candidate: str) -> list[str]:
    """The sequence of instances: B0 is "b0"; the seed only decides the order of AB."""
    if design == "ABA":
        return ["b0", candidate, "b0"]
    if design == "ABBA":
        return ["b0", candidate, candidate, "b0"]
    first_b0 = random.Random(order_seed).random() < 0.5
    return ["b0", candidate] if first_b0 else [candidate, "b0"]


@dataclass
class InstanceRun:
    arm: str
    position: int
    measured: list[Outcome] = field(default_factory=list)
    distinct: list[Outcome] = field(default_factory=list)
    interference: list[str] = field(default_factory=list)


def _probe(probe: DeviceProbe, arms: Arms, engine: EngineInstance | None, devices: Sequence[int],
           when: str) -> list[str]:
    pids: set[int] = set()
    if engine is not None:
        engine.snapshot_tree()
        pids = engine.known_pids()
    snapshot = probe.snapshot()
    found = foreign_processes(snapshot, devices, pids, when)
    return [f"{i.when}: device {i.device} pid {i.pid} ({i.name}): {i.reason}" for i in found]


def run_instance(arms: Arms, arm_id: str, position: int, probe: DeviceProbe,
                 caching_probe: int) -> InstanceRun:
    protocol = arms.plan.latency
    devices = protocol.devices
    seeds = arms.plan.seeds
    run = InstanceRun(arm_id, position)
    run.interference += _probe(probe, arms, None, devices, f"before {arm_id}#{position}")
    engine = arms.start(arm_id)
    try:
        for w in range(protocol.warmups):
            arms.request(engine, arm_id, kind="warmup", index=position * 100 + w,
                         seed=seeds[w % len(seeds)])
        for r in range(protocol.repeats):
            run.measured.append(arms.request(engine, arm_id, kind="measured",
                                             index=position * 100 + r,
                                             seed=seeds[r % len(seeds)]))
            run.interference += _probe(probe, arms, engine, devices,
                                       f"during {arm_id}#{position}")
            if protocol.pause_s:
                time.sleep(protocol.pause_s)
        for d in range(caching_probe):
            run.distinct.append(arms.request(engine, arm_id, kind="distinct",
                                             index=position * 100 + d,
                                             seed=seeds[0] + CACHING_SEED_OFFSET + d))
    finally:
        arms.registry.stop(engine)
    run.interference += _probe(probe, arms, None, devices, f"after {arm_id}#{position}")
    return run


def _latencies(outcomes: Sequence[Outcome]) -> list[float]:
    return [o.sample.latency_s for o in outcomes if o.sample.ok and o.sample.latency_s]


def judge_latency(track_id: str, candidate: str, runs: Sequence[InstanceRun], *,
                  design: str, target: float, confidence: float, drift_tolerance: float
                  ) -> list[CheckResult]:
    checks: list[CheckResult] = []
    interference = [line for run in runs for line in run.interference]
    checks.append(CheckResult(
        track_id, candidate, Check.RESOURCE_INTERFERENCE, "fail" if interference else "pass",
        Reason.RESOURCE_INTERFERENCE if interference else None,
        "; ".join(interference) or "no foreign process on the assigned devices"))
    b0_runs = [r for r in runs if r.arm == "b0"]
    cand_runs = [r for r in runs if r.arm != "b0"]
    b0_failed = [o for r in b0_runs for o in r.measured if not o.complete]
    cand_failed = [o for r in cand_runs for o in (*r.measured, *r.distinct) if not o.complete]
    baseline = [x for r in b0_runs for x in _latencies(r.measured)]
    cand = [x for r in cand_runs for x in _latencies(r.measured)]
    data: dict[str, Any] = {"design": design, "sequence": [r.arm for r in runs],
                            "baseline_s": baseline, "candidate_s": cand}
    if b0_failed:
        # Recorded under the candidate: it is this comparison's B0 that failed.
        checks.append(CheckResult(track_id, candidate, Check.LATENCY_RATIO, "fail",
                                  Reason.BASELINE_REQUEST_FAILED, b0_failed[0].explain(), data))
        return checks
    if cand_failed:
        checks.append(CheckResult(track_id, candidate, Check.LATENCY_RATIO, "fail",
                                  Reason.CANDIDATE_REQUEST_FAILED, cand_failed[0].explain(), data))
        return checks
    if design == "ABA" and len(b0_runs) == 2:
        first, last = (statistics.median(_latencies(r.measured)) for r in b0_runs)
        drift = abs(last / first - 1)
        data["drift"] = drift
        if drift > drift_tolerance:
            checks.append(CheckResult(
                track_id, candidate, Check.LATENCY_RATIO, "fail", Reason.DRIFT,
                f"B0 moved {drift:.1%} between A and A' (tolerance {drift_tolerance:.0%})", data))
            return checks
    distinct = [x for r in cand_runs for x in _latencies(r.distinct)]
    if distinct:
        # Against the fastest distinct request: a cache makes repeats faster than every distinct
        # request, while one slow distinct request (noise; there are only a few) must not look
        # like a cache. A 2.3 s/3.0 s pair against 2.2 s repeats did, on a shared 2-core machine.
        repeated, fastest = statistics.median(cand), min(distinct)
        data["caching_probe"] = {"repeated_median_s": repeated, "distinct_fastest_s": fastest,
                                 "distinct_s": distinct}
        suspected = repeated < (1 - CACHING_MARGIN) * fastest
        checks.append(CheckResult(
            track_id, candidate, Check.CACHING_PROBE, "fail" if suspected else "pass",
            Reason.CACHING_SUSPECTED if suspected else None,
            f"repeated identical requests median {repeated:.3f} s, fastest of "
            f"{len(distinct)} distinct {fastest:.3f} s (suspected below "
            f"{1 - CACHING_MARGIN:.0%} of it)"))
    verdict = latency_verdict(baseline, cand, target, confidence,
                              single_instance=design != "ABBA")
    # The verdict is the check's own typed result (the evidence writes it as data["verdict"] and
    # data["interval"]); the check passes in the sense that the protocol ran to a decision.
    checks.append(CheckResult(
        track_id, candidate, Check.LATENCY_RATIO, "pass", None,
        f"{verdict.verdict}: ratio of medians {verdict.ratio_of_medians:.3f}, interval "
        f"[{_fmt(verdict.interval.lower)}, {_fmt(verdict.interval.upper)}] vs target {target:g}",
        data, latency=verdict))
    return checks


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def run_latency(arms: Arms, candidate: str) -> list[CheckResult]:
    """The frozen protocol for one candidate against its matched B0, recorded as it goes.

    On a lossless track whose watched quality output is in already, the timed outputs are
    compared with it here (the timed-output check; it counts for the track's verdict only).
    """
    plan: TrackPlan = arms.plan
    protocol = plan.latency
    probe = probe_for(protocol.device_kind, protocol.devices)
    sequence = ordering(protocol.ordering, protocol.order_seed, candidate)
    runs = []
    for position, arm_id in enumerate(sequence):
        caching = protocol.caching_probe_requests if arm_id == candidate else 0
        runs.append(run_instance(arms, arm_id, position, probe, caching))
    checks = judge_latency(plan.track_id, candidate, runs, design=protocol.ordering,
                           target=protocol.target_ratio, confidence=protocol.confidence,
                           drift_tolerance=protocol.drift_tolerance)
    for check in checks:
        arms.evidence.add_check(check)
    if plan.quality == "lossless":
        timed = timed_output_check(arms.outcomes, plan.track_id, candidate)
        if timed is not None:
            arms.evidence.add_check(timed)
    return checks


class LatencyProtocol:
    """The latency protocol as the perf scenario runs it (gates.Gate)."""

    name = "latency"

    def candidate(self, arms: Arms, candidate: str) -> GateResult:
        return GateResult.from_checks(run_latency(arms, candidate))
