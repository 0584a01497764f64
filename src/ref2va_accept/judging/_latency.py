"""The latency protocol of a track's candidates: frozen runs on fresh, independent servers.

Each entry of the track's frozen schedule (replication.schedule: B0's instances per candidate,
or shared by all the track's candidates) is a freshly started instance of that arm: warm-ups
until the steady-state rule holds (recorded, excluded), then the measured requests with the
track's seeds, and on candidate instances the caching probe's distinct requests, each right
after a measured one. Every sample goes to the evidence as it is taken; devices are probed
before, during and after each instance. A failed request or a warm-up that never became steady
decides that arm: its remaining instances are not started (nor anything, once B0 or every
candidate is decided), and the host's time is not spent on instances that change no verdict.

Then, in the documented order (docs/protocol.md): run not evaluable (interference, B0 request
failed, warm-up not steady, drift) -> inconclusive; candidate defect (request failed, caching
suspected) -> failed; otherwise the ratio interval decides, on one value per instance (the
instance design) or per request (the labelled request design), its typed result carried by the
latency check. The timed outputs are compared with the candidate's quality output of the same
seed once, at verdict time (judging/_timed_output.py). Quality gates run in their own scenarios; the
per-track verdict combines them.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ref2va_accept.arms import Arms, Outcome
from ref2va_accept.campaign import TRACK_IDS
from ref2va_accept.core import (
    ArmRole,
    Check,
    CheckStatus,
    IntervalReason,
    LatencyDecisionReason,
    Reason,
    Unit,
    Verdict,
)
from ref2va_accept.engines import DeviceProbe, EngineInstance, foreign_processes, probe_for
from ref2va_accept.evidence import CheckResult
from ref2va_accept.judging._gates import GateResult
from ref2va_accept.planning import TrackPlan
from ref2va_accept.timing import (
    InstanceTimes,
    LatencySettings,
    arm_values,
    interval_verdict,
    is_steady,
    not_evaluable,
    schedule,
    spread,
    supported_reachable,
    warmup_done,
)

log = logging.getLogger(__name__)

CACHING_SEED_OFFSET = 1_000_003


class GateHost(Protocol):
    """A candidate's quality gate run on its first latency instance (docs/protocol.md): its
    gate requests before the instance's warm-ups, judged there (a failure ends the instance
    and the candidate's protocol), and what the gate takes from the measured requests after
    them. Each records its checks in the evidence and returns them."""

    def before(self, arms: Arms, engine: EngineInstance) -> list[CheckResult]: ...

    def warmups(self, arms: Arms) -> list[Outcome]:
        """Those of the gate's requests that are the instance's first warm-ups (the very
        requests they would send, and nothing judged in between: run_plan.hosted_gate_warmups);
        the instance does not send them again."""

    def after(self, arms: Arms, engine: EngineInstance, run: InstanceRun) -> list[CheckResult]:
        ...

    def settle(self, arms: Arms, run: InstanceRun) -> list[CheckResult]:
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
    gate: list[CheckResult] = field(default_factory=list)
    stopped_on: str | None = None
    warmups_from_gate: int = 0  # the first of `warmups` are the gate's own requests

    def failed(self) -> list[Outcome]:
        return [o for o in (*self.warmups, *self.measured, *self.distinct) if not o.complete]

    def times(self) -> InstanceTimes:
        return InstanceTimes(self.arm, tuple(_latencies(self.warmups)),
                             tuple(_latencies(self.measured)), self.steady)

    def to_dict(self) -> dict[str, Any]:
        measured = _latencies(self.measured)
        found = {"arm": self.arm, "position": self.position,
                 "warmups_s": _latencies(self.warmups), "steady": self.steady,
                 "measured_s": measured, "distinct_s": _latencies(self.distinct),
                 "value_s": statistics.median(measured) if measured else None}
        if self.gate:
            found["hosted_gate"] = sorted({c.name.value for c in self.gate})
        if self.warmups_from_gate:
            found["warmups_from_gate"] = self.warmups_from_gate
        return found


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
    while not warmup_done(_latencies(run.warmups), protocol):
        w = len(run.warmups)
        outcome = arms.request(engine, run.arm, kind="warmup", index=run.position * 100 + w,
                               seed=seeds[w % len(seeds)], steps=protocol.warmup_steps)
        run.warmups.append(outcome)
        if not outcome.complete:
            return False
    run.steady = is_steady(_latencies(run.warmups), protocol.steady_fraction)
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


def _latencies(outcomes: Sequence[Outcome]) -> list[float]:
    return [o.sample.latency_s for o in outcomes if o.sample.ok and o.sample.latency_s]


def _caching_check(track_id: str, candidate: str, cand_runs: Sequence[InstanceRun],
                   margin: float, data: dict[str, Any]) -> CheckResult | None:
    # Per probed instance, its repeated identical requests against its fastest distinct request:
    # a cache makes repeats faster on every instance, while noise (a slow distinct request, load
    # that came and went) does not do so on all of them at once. On a shared 2-core machine one
    # instance's 2.3 s/3.0 s distinct pair against 2.2 s repeats looked like a cache.
    probed = [(statistics.median(_latencies(r.measured)), min(_latencies(r.distinct)))
              for r in cand_runs if _latencies(r.distinct) and _latencies(r.measured)]
    if not probed:
        return None
    ratios = [repeated / fastest for repeated, fastest in probed]
    data["caching_probe"] = {"instances": [{"repeated_median_s": rep, "distinct_fastest_s": fast}
                                           for rep, fast in probed],
                             "ratios": ratios, "margin": margin}
    suspected = all(ratio < 1 - margin for ratio in ratios)
    shown = ", ".join(f"{ratio:.2f}" for ratio in ratios)
    return CheckResult(
        track_id, candidate, Check.CACHING_PROBE,
        CheckStatus.FAIL if suspected else CheckStatus.PASS,
        Reason.CACHING_SUSPECTED if suspected else None,
        f"repeated identical requests vs the fastest distinct one, per instance: {shown} "
        f"(caching suspected when every instance is below {1 - margin:.2f})")


def judge_latency(track_id: str, candidate: str, runs: Sequence[InstanceRun],
                  settings: LatencySettings, futile: tuple[int, int] | None = None
                  ) -> list[CheckResult]:
    """The latency checks of one candidate. `futile`: its protocol stopped once `supported`
    was out of reach (after that position, that many own instances not started); the values so
    far then decide `failed` if they show it, else the verdict is inconclusive
    (supported_out_of_reach)."""
    checks: list[CheckResult] = []
    interference = [line for run in runs for line in run.interference]
    # devices.kind none: nothing was probed, so nothing is claimed (not a pass).
    checks.append(CheckResult(
        track_id, candidate, Check.RESOURCE_INTERFERENCE,
        CheckStatus.FAIL if interference else CheckStatus.NOT_APPLICABLE
        if settings.device_kind == "none" else CheckStatus.PASS,
        Reason.RESOURCE_INTERFERENCE if interference else None,
        "; ".join(interference) or (
            "not applicable: devices.kind is none, no device was probed"
            if settings.device_kind == "none" else "no foreign process on the assigned devices"),
        {"device_kind": settings.device_kind, "devices": list(settings.devices)}))
    b0_runs = [r for r in runs if r.arm == ArmRole.B0]
    cand_runs = [r for r in runs if r.arm != ArmRole.B0]
    b0_failed = [o for r in b0_runs for o in r.failed()]
    cand_failed = [o for r in cand_runs for o in r.failed()]
    times = [r.times() for r in runs]
    b0_times = [t for t in times if t.arm == ArmRole.B0]
    data: dict[str, Any] = {
        "unit": settings.replication, "design": settings.ordering,
        "instances_per_arm": settings.instances_per_arm,
        "baseline_instances": settings.baseline_instances,
        "order_seed": settings.order_seed, "order_drawn": settings.order_drawn,
        "decision_rule": settings.decision_rule,
        "sequence": [r.arm for r in runs], "instances": [r.to_dict() for r in runs],
        "warmup_rule": {"min": settings.warmups, "max": settings.max_warmups,
                        "steady_fraction": settings.steady_fraction},
        "b0_spread": spread(b0_times, settings).to_dict(),
        "candidate_spread": spread([t for t in times if t.arm != ArmRole.B0], settings).to_dict()}

    def latency_fail(reason: Reason, detail: str) -> list[CheckResult]:
        checks.append(CheckResult(track_id, candidate, Check.LATENCY_RATIO, CheckStatus.FAIL,
                                  reason, detail, data))
        return checks

    if b0_failed:
        # Recorded under the candidate: it is this comparison's B0 that failed.
        return latency_fail(Reason.BASELINE_REQUEST_FAILED, b0_failed[0].explain())
    reason, moved = not_evaluable(times, settings)
    if reason is LatencyDecisionReason.WARMUP_NOT_STEADY:
        first = next(r for r in runs if not r.steady)
        shown = ", ".join(f"{x:.3f}" for x in _latencies(first.warmups))
        return latency_fail(
            Reason.WARMUP_NOT_STEADY,
            f"{first.arm}#{first.position}: {len(first.warmups)} warm-ups ({shown} s) never had "
            f"two in a row within {settings.steady_fraction:.0%} of each other")
    data["drift"] = moved
    if reason is LatencyDecisionReason.DRIFT:
        what = ("its first and last instance" if settings.replication == Unit.INSTANCE
                else "A and A'")
        return latency_fail(Reason.DRIFT, f"B0 moved {moved:.1%} between {what} (tolerance "
                                          f"{settings.drift_tolerance:.0%})")
    if cand_failed:
        return latency_fail(Reason.CANDIDATE_REQUEST_FAILED, cand_failed[0].explain())
    caching = _caching_check(track_id, candidate, cand_runs, settings.caching_margin, data)
    if caching is not None:
        checks.append(caching)
    verdict = interval_verdict(times, settings)
    stopped = ""
    if futile is not None:
        data["futility"] = {"stopped_after_position": futile[0],
                            "own_instances_not_started": futile[1]}
        stopped = (f"; stopped after instance #{futile[0]} with {futile[1]} own instance(s) "
                   "not started: no values they could measure make it supported")
        if verdict.verdict is not Verdict.FAILED:
            verdict = replace(verdict, verdict=Verdict.INCONCLUSIVE,
                              reasons=(IntervalReason.SUPPORTED_OUT_OF_REACH,))
    data["baseline_s"], data["candidate_s"] = list(verdict.baseline), list(verdict.candidate)
    # The verdict is the check's own typed result (the evidence writes it as data["verdict"] and
    # data["interval"]); the check passes in the sense that the protocol ran to a decision.
    checks.append(CheckResult(
        track_id, candidate, Check.LATENCY_RATIO, CheckStatus.PASS, None,
        f"{verdict.verdict}: ratio of medians {verdict.ratio_of_medians:.3f}, interval "
        f"[{_fmt(verdict.interval.lower)}, {_fmt(verdict.interval.upper)}] vs target "
        f"{settings.target_ratio:g} ({verdict.unit} unit, {len(verdict.baseline)} B0 and "
        f"{len(verdict.candidate)} candidate values){stopped}",
        data, latency=verdict))
    return checks


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


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
    gates: dict[str, list[CheckResult]] = field(default_factory=dict)

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
    it goes (replication.schedule: B0 per candidate, or shared by all of them).

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
    order = schedule(protocol, tracks, candidates)
    distinct = distinct_plan(protocol, order, candidates)
    runs: list[InstanceRun] = []
    errors: dict[str, Exception] = {}
    futile: dict[str, int] = {}  # candidate -> the position after which supported was out of reach
    decided: dict[str, str] = {}  # arm -> the instance that decided it, in the order decided
    skipped: dict[str, int] = {}  # decided arm -> instances not started because of it
    gates: dict[str, list[CheckResult]] = {}
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


class LatencySchedules:
    """The session's latency schedules: which candidates each track's schedule covers (the
    collected perf scenarios, set by the plugin) and, once run, their instances.

    With a shared B0 the first candidate's scenario runs the whole track's schedule, interleaved
    as frozen, and each candidate is then judged on its part; with B0 per candidate each
    candidate's scenario runs its own pairs. Tracks whose B0 is the same server asked the same
    timed request (plan.baseline_groups, set by the plugin with `share`) run one schedule for
    all their covered candidates: one set of B0 instances serves them all.
    """

    def __init__(self) -> None:
        self._covered: dict[str, tuple[str, ...]] = {}
        self._ran: dict[tuple[tuple[str, ...], tuple[str, ...]], ScheduleRun] = {}
        # (track, candidate) -> (the key of the schedule that judged it, its label there)
        self._schedule_of: dict[tuple[str, str],
                                tuple[tuple[tuple[str, ...], tuple[str, ...]], str]] = {}
        self._members: dict[tuple[str, ...], list[tuple[str, str]]] = {}
        self._groups: Mapping[str, tuple[str, ...]] = {}
        self._plans: Mapping[str, TrackPlan] = {}
        # (track, candidate) whose quality gate its first latency instance hosts, and how
        # each one's GateHost is made (set by the plugin with `host`)
        self._hosted: frozenset[tuple[str, str]] = frozenset()
        self._make_host: Callable[[TrackPlan, str], GateHost] | None = None
        self._prepare: Callable[[Arms], None] | None = None

    def cover(self, track_id: str, candidates: Sequence[str]) -> None:
        self._covered[track_id] = tuple(dict.fromkeys(candidates))

    def covered(self, track_id: str) -> tuple[str, ...]:
        return self._covered.get(track_id, ())

    def share(self, groups: Mapping[str, tuple[str, ...]], plans: Mapping[str, TrackPlan]
              ) -> None:
        """Which tracks' B0 latency instances may serve each other's candidates."""
        self._groups, self._plans = groups, plans

    def host(self, pairs: Iterable[tuple[str, str]],
             make: Callable[[TrackPlan, str], GateHost],
             prepare: Callable[[Arms], None]) -> None:
        """These (track, candidate) pairs have their quality gate run on their first latency
        instance (their quality and perf scenarios are both in the session, on a track with a
        shared B0); `make` builds each one's GateHost, and `prepare` makes B0's gate of a
        track (its checks recorded) before the schedule chooses whom it measures."""
        self._hosted = frozenset(pairs)
        self._make_host, self._prepare = make, prepare

    def hosts_gate(self, track_id: str, candidate: str) -> bool:
        return (track_id, candidate) in self._hosted and self._make_host is not None

    def group(self, track_id: str) -> tuple[str, ...]:
        """The tracks whose covered candidates this track's schedule runs with (itself
        included): its baseline group, restricted to the tracks this session measures."""
        tracks = tuple(t for t in self._groups.get(track_id, (track_id,))
                       if t == track_id or self.covered(t))
        return tracks if len(tracks) > 1 else (track_id,)

    def shared_with(self, track_id: str, candidate: str) -> tuple[str, ...]:
        """The other candidates whose schedule shared B0's instances with this one (labelled
        `<track>:<candidate>` when they came from several tracks)."""
        found = self._schedule_of.get((track_id, candidate))
        if found is None:
            return ()
        (_, labels), label = found
        return tuple(c for c in labels if c != label)

    def runs(self, arms: Arms, candidate: str) -> list[InstanceRun]:
        key, label, _ = self._ensure(arms, candidate)
        return self._ran[key].for_candidate(label)

    def hosted_gate(self, arms: Arms, candidate: str) -> list[CheckResult] | None:
        """The checks of the candidate's quality gate as its first latency instance hosted it
        (running the schedule if it has not run); None when it hosts none, or when the schedule
        never started that instance (B0 decided first): its gate then runs on an instance of
        its own. The error of an engine that did not start is raised, as for its perf
        scenario."""
        track_id = arms.plan.track_id
        if not self.hosts_gate(track_id, candidate):
            return None
        key, label, member = self._ensure(arms, candidate, members_only=True)
        if not member:
            return None  # a quality check stopped it before the schedule: no instance of it
        ran = self._ran[key]
        if label in ran.errors:
            raise ran.errors[label]
        return ran.gates.get(label)

    def _ensure(self, arms: Arms, candidate: str, *, members_only: bool = False
                ) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], str, bool]:
        """The schedule that judges the candidate, run once: (its key, the candidate's label,
        whether it is one of the shared schedule's members). `members_only`: a candidate that
        is not one runs nothing here."""
        track_id = arms.plan.track_id
        shared = arms.plan.latency.baseline_instances == "shared"
        tracks = self.group(track_id) if shared else (track_id,)

        def runner(t: str) -> Arms:
            return arms if t == track_id else arms.for_track(self._plans[t])
        # Candidates a quality check already stopped take no place in the shared schedule. Taken
        # once, when the schedule first runs: what its own instances record later (an engine
        # that did not start) must not make the next candidate's scenario run a second one.
        # B0's gates of the tracks whose candidates host theirs are made first, so that a B0
        # that fails one stops them here.
        if tracks not in self._members:
            hosting = {t for t in tracks for c in self.covered(t) if self.hosts_gate(t, c)}
            for t in hosting:
                assert self._prepare is not None
                self._prepare(runner(t))
            checks = arms.evidence.checks
            self._members[tracks] = [(t, c) for t in tracks for c in self.covered(t)
                                     if quality_stop(checks, t, c) is None]
        members = self._members[tracks]
        member = (track_id, candidate) in members
        if not shared or not member:
            members = [(track_id, candidate)]
        several = len({t for t, _ in members}) > 1
        labels = tuple(member_label(t, c) if several else c for t, c in members)
        key = (tracks if several else (track_id,), labels)
        label = member_label(track_id, candidate) if several else candidate
        if members_only and not member:
            return key, label, member
        self._schedule_of[(track_id, candidate)] = (key, label)
        if key not in self._ran:
            by_label = dict(zip(labels, members, strict=True))
            runners = {t: runner(t) for t in key[0]}
            hosts = {lab: self._make_host(runners[t].plan, c) for lab, (t, c) in by_label.items()
                     if self._make_host is not None and self.hosts_gate(t, c)}
            self._ran[key] = run_schedule(
                arms, labels, {lab: runners[t] for lab, (t, _) in by_label.items()}
                if several else None, hosts)
        return key, label, member

    def futility(self, track_id: str, candidate: str) -> tuple[int, int] | None:
        """Where the candidate's protocol stopped with `supported` out of reach, if it did."""
        found = self._schedule_of.get((track_id, candidate))
        if found is None:
            return None
        key, label = found
        ran = self._ran.get(key)
        return None if ran is None else ran.futile.get(label)

    def tracks_of(self, track_id: str, candidate: str) -> tuple[str, ...]:
        """The tracks whose candidates the schedule that judged this one ran (one, unless B0
        was shared across tracks)."""
        found = self._schedule_of.get((track_id, candidate))
        return (track_id,) if found is None else found[0][0]


# Checks of the latency protocol and of its timed requests (those judged at verdict time): what
# they find never stops it before it runs.
_LATENCY_OWN = frozenset({Check.LATENCY_RATIO, Check.CACHING_PROBE, Check.RESOURCE_INTERFERENCE,
                          Check.TIMED_OUTPUT, Check.TIMED_OUTPUT_FIDELITY})
_GATES = frozenset({Check.LOSSLESS_GATE, Check.LOSSY_GATE})


def quality_stop(checks: Sequence[CheckResult], track_id: str, candidate: str) -> str | None:
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


def run_latency(arms: Arms, candidate: str,
                schedules: LatencySchedules | None = None) -> list[CheckResult]:
    """The frozen protocol for one candidate against B0 in the same run, judged and recorded.
    (Its timed outputs are compared with its quality output at verdict time:
    judging/_timed_output.py.)
    """
    plan: TrackPlan = arms.plan
    schedules = schedules or LatencySchedules()
    stop = quality_stop(arms.evidence.checks, plan.track_id, candidate)
    if stop is not None:
        # No instance started for it: the row says why, and its verdict is what stopped it.
        check = CheckResult(plan.track_id, candidate, Check.LATENCY_RATIO, CheckStatus.OPEN,
                            None, f"not measured: stopped on {stop}", {"stopped_on": stop})
        arms.evidence.add_check(check)
        return [check]
    runs = schedules.runs(arms, candidate)
    checks = judge_latency(plan.track_id, candidate, runs, plan.latency,
                           schedules.futility(plan.track_id, candidate))
    others = list(schedules.shared_with(plan.track_id, candidate))
    tracks = schedules.tracks_of(plan.track_id, candidate)
    for check in checks:
        if check.name == Check.LATENCY_RATIO and others:
            check.data["baseline_shared_with"] = others
        if check.name == Check.LATENCY_RATIO and len(tracks) > 1:
            check.data["baseline_tracks"] = list(tracks)
    for check in checks:
        arms.evidence.add_check(check)
    return checks


class LatencyProtocol:
    """The latency protocol as the perf scenario runs it (gates.Gate); `schedules` is the
    session's (a protocol made alone keeps its own)."""

    name = "latency"

    def __init__(self, schedules: LatencySchedules | None = None) -> None:
        self.schedules = schedules if schedules is not None else LatencySchedules()

    def candidate(self, arms: Arms, candidate: str) -> GateResult:
        return GateResult.from_checks(run_latency(arms, candidate, self.schedules))
