"""Judging the latency protocol of a track's candidates, and the session's schedules that run it.

What the instances measured (judging/_latency_run.py) is decided in the documented order
(docs/protocol.md): run not evaluable (interference, B0 request failed, warm-up not steady,
drift) -> inconclusive; candidate defect (request failed, caching suspected) -> failed;
otherwise the ratio interval decides, on one value per instance (the instance design) or per
request (the labelled request design), its typed result carried by the latency check. The timed
outputs are compared with the candidate's quality output of the same seed once, at verdict time
(judging/_timed_output.py). Quality gates run in their own scenarios; the per-track verdict
combines them.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ref2va_accept.arms import Arms
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
from ref2va_accept.evidence import AnyCheck, Futility, new_check
from ref2va_accept.judging._gates import GateResult
from ref2va_accept.judging._latency_run import (
    GateHost,
    InstanceRun,
    ScheduleRun,
    latencies,
    member_label,
    quality_stop,
    run_schedule,
)
from ref2va_accept.planning import TrackPlan
from ref2va_accept.timing import (
    LatencySettings,
    interval_verdict,
    not_evaluable,
    spread,
)

log = logging.getLogger(__name__)


def _caching_check(track_id: str, candidate: str, cand_runs: Sequence[InstanceRun],
                   margin: float, data: dict[str, Any]) -> AnyCheck | None:
    # Per probed instance, its repeated identical requests against its fastest distinct request:
    # a cache makes repeats faster on every instance, while noise (a slow distinct request, load
    # that came and went) does not do so on all of them at once. On a shared 2-core machine one
    # instance's 2.3 s/3.0 s distinct pair against 2.2 s repeats looked like a cache.
    probed = [(statistics.median(latencies(r.measured)), min(latencies(r.distinct)))
              for r in cand_runs if latencies(r.distinct) and latencies(r.measured)]
    if not probed:
        return None
    ratios = [repeated / fastest for repeated, fastest in probed]
    data["caching_probe"] = {"instances": [{"repeated_median_s": rep, "distinct_fastest_s": fast}
                                           for rep, fast in probed],
                             "ratios": ratios, "margin": margin}
    suspected = all(ratio < 1 - margin for ratio in ratios)
    shown = ", ".join(f"{ratio:.2f}" for ratio in ratios)
    return new_check(
        track_id, candidate, Check.CACHING_PROBE,
        CheckStatus.FAIL if suspected else CheckStatus.PASS,
        Reason.CACHING_SUSPECTED if suspected else None,
        f"repeated identical requests vs the fastest distinct one, per instance: {shown} "
        f"(caching suspected when every instance is below {1 - margin:.2f})")


def judge_latency(track_id: str, candidate: str, runs: Sequence[InstanceRun],
                  settings: LatencySettings, futile: tuple[int, int] | None = None
                  ) -> list[AnyCheck]:
    """The latency checks of one candidate. `futile`: its protocol stopped once `supported`
    was out of reach (after that position, that many own instances not started); the values so
    far then decide `failed` if they show it, else the verdict is inconclusive
    (supported_out_of_reach)."""
    checks: list[AnyCheck] = []
    interference = [line for run in runs for line in run.interference]
    # devices.kind none: nothing was probed, so nothing is claimed (not a pass).
    checks.append(new_check(
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
        "sequence": [r.arm for r in runs], "instances": [r.record().json_dict() for r in runs],
        "warmup_rule": {"min": settings.warmups, "max": settings.max_warmups,
                        "steady_fraction": settings.steady_fraction},
        "b0_spread": spread(b0_times, settings).json_dict(),
        "candidate_spread": spread([t for t in times if t.arm != ArmRole.B0], settings).json_dict()}

    def latency_fail(reason: Reason, detail: str) -> list[AnyCheck]:
        checks.append(new_check(track_id, candidate, Check.LATENCY_RATIO, CheckStatus.FAIL,
                                reason, detail, data))
        return checks

    if b0_failed:
        # Recorded under the candidate: it is this comparison's B0 that failed.
        return latency_fail(Reason.BASELINE_REQUEST_FAILED, b0_failed[0].explain())
    reason, moved = not_evaluable(times, settings)
    if reason is LatencyDecisionReason.WARMUP_NOT_STEADY:
        first = next(r for r in runs if not r.steady)
        shown = ", ".join(f"{x:.3f}" for x in latencies(first.warmups))
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
        data["futility"] = Futility(stopped_after_position=futile[0],
                                    own_instances_not_started=futile[1]).json_dict()
        stopped = (f"; stopped after instance #{futile[0]} with {futile[1]} own instance(s) "
                   "not started: no values they could measure make it supported")
        if verdict.verdict is not Verdict.FAILED:
            verdict = verdict.model_copy(update={
                "verdict": Verdict.INCONCLUSIVE,
                "reasons": (IntervalReason.SUPPORTED_OUT_OF_REACH,)})
    data["baseline_s"], data["candidate_s"] = list(verdict.baseline), list(verdict.candidate)
    # The verdict is the check's own typed result, in its data (`interval`, with its `verdict`);
    # the check passes in the sense that the protocol ran to a decision.
    checks.append(new_check(
        track_id, candidate, Check.LATENCY_RATIO, CheckStatus.PASS, None,
        f"{verdict.verdict}: ratio of medians {verdict.ratio_of_medians:.3f}, interval "
        f"[{_fmt(verdict.interval.lower)}, {_fmt(verdict.interval.upper)}] vs target "
        f"{settings.target_ratio:g} ({verdict.unit} unit, {len(verdict.baseline)} B0 and "
        f"{len(verdict.candidate)} candidate values){stopped}",
        {**data, "verdict": verdict.verdict, "interval": verdict}))
    return checks


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


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

    def hosted_gate(self, arms: Arms, candidate: str) -> list[AnyCheck] | None:
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


def run_latency(arms: Arms, candidate: str,
                schedules: LatencySchedules | None = None) -> list[AnyCheck]:
    """The frozen protocol for one candidate against B0 in the same run, judged and recorded.
    (Its timed outputs are compared with its quality output at verdict time:
    judging/_timed_output.py.)
    """
    plan: TrackPlan = arms.plan
    schedules = schedules or LatencySchedules()
    stop = quality_stop(arms.evidence.checks, plan.track_id, candidate)
    if stop is not None:
        # No instance started for it: the row says why, and its verdict is what stopped it.
        check = new_check(plan.track_id, candidate, Check.LATENCY_RATIO, CheckStatus.OPEN,
                          None, f"not measured: stopped on {stop}", {"stopped_on": stop})
        arms.evidence.add_check(check)
        return [check]
    runs = schedules.runs(arms, candidate)
    checks = judge_latency(plan.track_id, candidate, runs, plan.latency,
                           schedules.futility(plan.track_id, candidate))
    others = list(schedules.shared_with(plan.track_id, candidate))
    tracks = schedules.tracks_of(plan.track_id, candidate)
    shared: dict[str, Any] = {}
    if others:
        shared["baseline_shared_with"] = others
    if len(tracks) > 1:
        shared["baseline_tracks"] = list(tracks)
    if shared:
        checks = [c.revised(**shared) if c.name == Check.LATENCY_RATIO else c for c in checks]
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
