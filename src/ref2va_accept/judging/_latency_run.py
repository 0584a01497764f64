"""Running the latency protocol of a track's candidates: frozen runs on fresh, independent servers.

Each entry of the track's frozen schedule (replication.latency_schedule: B0's instances per
candidate, or shared by all the track's candidates) is a freshly started instance of that arm:
warm-ups until the steady-state rule holds (recorded, excluded), then the measured requests with
the track's seeds, and on candidate instances the caching probe's distinct requests, each right
after a measured one. Every sample goes to the evidence as it is taken; devices are probed
before, during and after each instance. A failed request or a warm-up that never became steady
decides that arm: its remaining instances are not started (nor anything, once B0 or every
candidate is decided), and the host's time is not spent on instances that change no verdict.
So do `supported` out of reach (futility) and a candidate's quality gate hosted by its first
instance (GateHost) that stops it; what the run recorded before the protocol (quality_stop) keeps
a candidate's from starting at all.

What the instances measured is judged in judging/_latency.py.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ref2va_accept.arms import Arms, Outcome
from ref2va_accept.campaign import TRACK_IDS
from ref2va_accept.core import ArmRole, Check, CheckStatus, Unit
from ref2va_accept.engines import DeviceProbe, EngineInstance, foreign_processes, probe_for
from ref2va_accept.evidence import AnyCheck, LatencyInstance
from ref2va_accept.planning import TrackPlan
from ref2va_accept.timing import (
    InstanceTimes,
    LatencySettings,
    arm_values,
    is_steady,
    latency_schedule,
    supported_reachable,
    warmup_done,
)

CACHING_SEED_OFFSET = 1_000_003


class GateHost(Protocol):
    """A candidate's quality gate run on its first latency instance (docs/protocol.md): its
    gate requests before the instance's warm-ups, judged there (a failure ends the instance
    and the candidate's protocol), and what the gate takes from the measured requests after
    them. Each records its checks in the evidence and returns them."""

    def before(self, arms: Arms, engine: EngineInstance) -> list[AnyCheck]: ...

    def warmups(self, arms: Arms) -> list[Outcome]:
        """Those of the gate's requests that are the instance's first warm-ups (the very
        requests they would send, and nothing judged in between: run_plan.hosted_gate_warmups);
        the instance does not send them again."""

    def after(self, arms: Arms, engine: EngineInstance, run: InstanceRun) -> list[AnyCheck]:
        ...

    def settle(self, arms: Arms, run: InstanceRun) -> list[AnyCheck]:
        """What the gate judges once the instance is stopped (scoring on a device the engine
        may hold); its failure ends the candidate's protocol there."""


@dataclass
class InstanceRun:
    arm: str
    position: int
    measured: list[Outcome] = field(default_factory=list)
    distinct: list[Outcome] = field(default_factory=list)
    interference: list[str] = field(default_factory=list)
    warmups: list[Outcome] = field(default_factory=list)
    steady: bool = True
    # The candidate's quality gate, when this instance hosted it (GateHost): its checks, and
    # why the instance measured nothing after it (the gate stopped it).
    gate: list[AnyCheck] = field(default_factory=list)
    stopped_on: str | None = None
    warmups_from_gate: int = 0  # the first of `warmups` are the gate's own requests

    def failed(self) -> list[Outcome]:
        return [o for o in (*self.warmups, *self.measured, *self.distinct) if not o.complete]

    def times(self) -> InstanceTimes:
        return InstanceTimes(self.arm, tuple(latencies(self.warmups)),
                             tuple(latencies(self.measured)), self.steady)

    def record(self) -> LatencyInstance:
        """The instance as the latency check's data records it; the gate it hosted, and the
        warm-ups that gate's requests gave, only where there were some."""
        measured = latencies(self.measured)
        more: dict[str, Any] = {}
        if self.gate:
            more["hosted_gate"] = sorted({c.name.value for c in self.gate})
        if self.warmups_from_gate:
            more["warmups_from_gate"] = self.warmups_from_gate
        return LatencyInstance(
            arm=self.arm, position=self.position, warmups_s=latencies(self.warmups),
            steady=self.steady, measured_s=measured, distinct_s=latencies(self.distinct),
            value_s=statistics.median(measured) if measured else None, **more)


def _probe(probe: DeviceProbe, arms: Arms, engine: EngineInstance | None, devices: Sequence[int],
           when: str) -> list[str]:
    pids: set[int] = set()
    if engine is not None:
        engine.snapshot_tree()
        pids = engine.known_pids()
    snapshot = probe.snapshot()
    found = foreign_processes(snapshot, devices, pids, when)
    return [f"{i.when}: device {i.device} pid {i.pid} ({i.name}): {i.reason}" for i in found]


def _warm_up(arms: Arms, engine: EngineInstance, run: InstanceRun) -> bool:
    """Warm-ups until the frozen rule says done; False if one failed."""
    protocol, seeds = arms.plan.latency, arms.plan.seeds
    while not warmup_done(latencies(run.warmups), protocol):
        w = len(run.warmups)
        outcome = arms.request(engine, run.arm, kind="warmup", index=run.position * 100 + w,
                               seed=seeds[w % len(seeds)], steps=protocol.warmup_steps)
        run.warmups.append(outcome)
        if not outcome.complete:
            return False
    run.steady = is_steady(latencies(run.warmups), protocol.steady_fraction)
    return True


def run_instance(arms: Arms, arm_id: str, position: int, probe: DeviceProbe,
                 distinct_indexes: Sequence[int] = (), host: GateHost | None = None
                 ) -> InstanceRun:
    """One fresh instance: warm-ups, the measured requests, and after measured request i the
    caching probe's distinct request distinct_indexes[i] (any left over at the end). With
    `host`, the candidate's quality gate first: a gate that stops it (quality_stop) leaves the
    instance unmeasured, and what the gate takes from the measured requests is judged last."""
    protocol = arms.plan.latency
    devices = protocol.devices
    seeds = arms.plan.seeds
    run = InstanceRun(arm_id, position)
    run.interference += _probe(probe, arms, None, devices, f"before {arm_id}#{position}")
    engine = arms.start(arm_id)
    pending = list(distinct_indexes)

    def distinct() -> bool:
        d = pending.pop(0)
        outcome = arms.request(engine, arm_id, kind="distinct", index=position * 100 + d,
                               seed=seeds[0] + CACHING_SEED_OFFSET + d)
        run.distinct.append(outcome)
        return outcome.complete

    try:
        if host is not None:
            run.gate = host.before(arms, engine)
            run.stopped_on = quality_stop(run.gate, arms.plan.track_id, arm_id)
            run.warmups = list(host.warmups(arms))
            run.warmups_from_gate = len(run.warmups)
        # A gate request that failed as a warm-up fails the instance as any warm-up would.
        if run.stopped_on is None and not run.failed() and _warm_up(arms, engine, run) \
                and run.steady:
            for r in range(protocol.repeats):
                outcome = arms.request(engine, arm_id, kind="measured",
                                       index=position * 100 + r, seed=seeds[r % len(seeds)])
                run.measured.append(outcome)
                run.interference += _probe(probe, arms, engine, devices,
                                           f"during {arm_id}#{position}")
                if not outcome.complete or (pending and not distinct()):
                    break
                if protocol.pause_s:
                    time.sleep(protocol.pause_s)
            while pending and not run.failed():
                distinct()
        if host is not None:
            run.gate += host.after(arms, engine, run)
            run.stopped_on = run.stopped_on or quality_stop(run.gate, arms.plan.track_id,
                                                            arm_id)
    finally:
        arms.registry.stop(engine)
    run.interference += _probe(probe, arms, None, devices, f"after {arm_id}#{position}")
    if host is not None:
        run.gate += host.settle(arms, run)
        run.stopped_on = run.stopped_on or quality_stop(run.gate, arms.plan.track_id, arm_id)
    return run


def latencies(outcomes: Sequence[Outcome]) -> list[float]:
    """The latencies (s) of the requests that succeeded, in their order; failed ones have none."""
    return [o.sample.latency_s for o in outcomes if o.sample.ok and o.sample.latency_s]


def distinct_plan(settings: LatencySettings, order: Sequence[str], candidates: Sequence[str]
                  ) -> list[list[int]]:
    """The caching probe's distinct requests per instance of `order`: each candidate's spread
    round-robin over its own instances, none on B0's."""
    if isinstance(candidates, str):  # a str is a Sequence[str] too: its letters are no arms
        raise TypeError(f"candidates must be a sequence of ids, got the string {candidates!r}")
    plan: list[list[int]] = [[] for _ in order]
    for candidate in candidates:
        positions = [p for p, arm in enumerate(order) if arm == candidate]
        for d in range(settings.caching_probe_requests if positions else 0):
            plan[positions[d % len(positions)]].append(d)
    return plan


GROUP_SEPARATOR = ":"  # "<track>:<candidate>" in a schedule shared by several tracks


def member_label(track_id: str, candidate: str) -> str:
    """A candidate's arm in a schedule whose B0 serves several tracks (track ids hold no ':')."""
    return f"{track_id}{GROUP_SEPARATOR}{candidate}"


def _plain(label: str) -> str:
    """The arm id of a schedule label: a candidate id itself may hold ':', a track id never."""
    track, sep, candidate = label.partition(GROUP_SEPARATOR)
    return candidate if sep and track in TRACK_IDS else label


@dataclass
class ScheduleRun:
    """What a track's latency schedule gave: every instance run, and per arm the error that
    stopped one of its instances from running at all (an engine that did not start)."""

    runs: list[InstanceRun]
    errors: dict[str, Exception]
    # candidate -> (the position after which `supported` was out of reach, its own instances
    # then not started)
    futile: dict[str, tuple[int, int]] = field(default_factory=dict)
    # candidate -> the checks of the quality gate its first instance hosted (GateHost)
    gates: dict[str, list[AnyCheck]] = field(default_factory=dict)

    def for_candidate(self, candidate: str) -> list[InstanceRun]:
        """The instances one candidate (its label in a schedule shared by several tracks) is
        judged on: B0's (its own or the shared ones) and its own, under their plain arm ids;
        the error that stopped B0's or its own instance, raised for its scenario."""
        for arm in (ArmRole.B0, candidate):
            if arm in self.errors:
                raise self.errors[arm]
        return [r if r.arm == _plain(r.arm) else replace(r, arm=_plain(r.arm))
                for r in self.runs if r.arm in (ArmRole.B0, candidate)]


def run_schedule(arms: Arms, candidates: Sequence[str],
                 members: Mapping[str, Arms] | None = None,
                 hosts: Mapping[str, GateHost] | None = None) -> ScheduleRun:
    """Every latency instance of the track for `candidates`, in the frozen order, recorded as
    it goes (replication.latency_schedule: B0 per candidate, or shared by all of them).

    `members`: a schedule whose B0 serves the candidates of several tracks (plan.baseline_groups):
    the candidates are labels `<track>:<candidate>`, each run through its own track's Arms (B0
    through `arms`), and the order is drawn for the tracks together.

    An instance that failed a request or whose warm-up never became steady decides its arm
    (docs/protocol.md): that arm's remaining instances are not started, and when B0 is decided,
    or every candidate is, nothing more is; the host's time is not spent on instances that would
    not change a verdict. Each skip is a note in the evidence. An instance whose engine did not
    start (recorded by Arms.start) decides its arm too: the error is kept and raised in that
    candidate's scenario (every candidate's, for B0), never in another candidate's.

    `hosts`: per candidate label, its quality gate, run on the candidate's first instance
    before its warm-ups (GateHost); a gate that fails (or stays open) decides the candidate
    there, so its other instances are not started.
    """
    plan: TrackPlan = arms.plan
    protocol = plan.latency
    probe = probe_for(protocol.device_kind, protocol.devices)
    tracks = plan.track_id if members is None else "+".join(
        dict.fromkeys([plan.track_id, *(m.plan.track_id for m in members.values())]))
    order = latency_schedule(protocol, tracks, candidates)
    distinct = distinct_plan(protocol, order, candidates)
    runs: list[InstanceRun] = []
    errors: dict[str, Exception] = {}
    futile: dict[str, int] = {}  # candidate -> the position after which supported was out of reach
    decided: dict[str, str] = {}  # arm -> the instance that decided it, in the order decided
    skipped: dict[str, int] = {}  # decided arm -> instances not started because of it
    gates: dict[str, list[AnyCheck]] = {}
    stopped: dict[str, str] = {}  # candidate -> the quality check its hosted gate stopped on
    hosts = hosts or {}
    for position, arm_id in enumerate(order):
        open_candidates = [c for c in candidates if c not in decided]
        if arm_id in decided or ArmRole.B0 in decided or not open_candidates:
            cause = (arm_id if arm_id in decided else ArmRole.B0 if ArmRole.B0 in decided
                     else list(decided)[-1])
            skipped[cause] = skipped.get(cause, 0) + 1
            continue
        runner = arms if members is None or arm_id == ArmRole.B0 else members[arm_id]
        host = hosts.get(arm_id) if arm_id not in gates else None
        try:
            run = run_instance(runner, _plain(arm_id), position, probe, distinct[position],
                               host)
        except Exception as exc:  # kept for its own scenario and raised there
            errors[arm_id] = exc
            decided[arm_id] = f"{arm_id}#{position}"
            continue
        if host is not None:
            gates[arm_id] = run.gate
        run.arm = arm_id  # its label in this schedule
        runs.append(run)
        if run.stopped_on is not None:
            decided[arm_id] = f"{arm_id}#{position}"
            stopped[arm_id] = run.stopped_on
            continue
        if run.failed() or not run.steady:
            decided[arm_id] = f"{arm_id}#{position}"
            continue
        for candidate in [c for c in candidates if c not in decided]:
            if _out_of_reach(protocol, runs, order[position + 1:], candidate):
                decided[candidate] = f"{arm_id}#{position}"
                futile[candidate] = position
    for arm_id, left in skipped.items():
        who = ", ".join(candidates) if arm_id == ArmRole.B0 else arm_id
        why = (" (supported out of reach)" if arm_id in futile
               else f" (its gate there stopped on {stopped[arm_id]})" if arm_id in stopped
               else "")
        arms.evidence.note(f"{tracks} {who}: latency protocol ended after "
                           f"{decided[arm_id]}{why}; {left} instance(s) not started")
    return ScheduleRun(runs, errors, {c: (p, sum(1 for a in order[p + 1:] if a == c))
                                      for c, p in futile.items()}, gates)


def _out_of_reach(settings: LatencySettings, runs: Sequence[InstanceRun], rest: Sequence[str],
                  candidate: str) -> bool:
    """No values the candidate's and B0's instances still to come could measure make the
    candidate supported (replication.supported_reachable): its protocol can stop here."""
    mine = [r.times() for r in runs if r.arm in (ArmRole.B0, candidate)]
    baseline, values = arm_values(mine, settings)
    if not baseline or not values:
        return False
    per = settings.repeats if settings.replication == Unit.REQUEST else 1
    return not supported_reachable(settings, baseline, values,
                                   per * sum(1 for a in rest if a == ArmRole.B0),
                                   per * sum(1 for a in rest if a == candidate))


# Checks of the latency protocol and of its timed requests (those judged at verdict time): what
# they find never stops it before it runs.
_LATENCY_OWN = frozenset({Check.LATENCY_RATIO, Check.CACHING_PROBE, Check.RESOURCE_INTERFERENCE,
                          Check.TIMED_OUTPUT, Check.TIMED_OUTPUT_FIDELITY})
_GATES = frozenset({Check.LOSSLESS_GATE, Check.LOSSY_GATE})


def quality_stop(checks: Sequence[AnyCheck], track_id: str, candidate: str) -> str | None:
    """Why the candidate's latency protocol must not start, from what this run recorded before
    it (docs/protocol.md, cheapest decisive check first): a failed check of B0 or the candidate
    (a quality gate, a request, an engine start, interference, cleanup), or the candidate's
    quality gate left open (it cannot be supported whatever its latency); None otherwise."""
    for check in checks:
        if check.track != track_id or check.arm not in (ArmRole.B0, candidate):
            continue
        if check.name in _LATENCY_OWN:
            continue
        who = "B0's " if check.arm == ArmRole.B0 else ""
        if check.status is CheckStatus.FAIL:
            return f"{who}{check.name.value} ({check.reason.value if check.reason else 'fail'})"
        if check.status is CheckStatus.OPEN and check.arm == candidate and check.name in _GATES:
            return f"{check.name.value} (open)"
    return None
