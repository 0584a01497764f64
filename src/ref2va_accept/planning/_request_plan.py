"""The plan of a campaign run: how many requests, engine starts, dumps and scored outputs each
collected scenario sends. No I/O; where the run stands in it is planning/_run_progress.py's.

- The plan is made once after collection, from the collected scenarios and the tracks' frozen
  plans (planning/_track_plan.py): how many requests of which duration class each scenario sends.
  The counts come from the same protocol settings and seeds that the scenarios read (`lossless`,
  `lossy`, `latency`);
  tests/unit/test_progress.py runs those modules against a counting stand-in and checks that
  they send exactly what is planned, so the plan cannot drift from them unnoticed.
- A B0 whose instances serve several tracks (a shared latency B0, a gate group's B0 gate) is one
  unit of the plan for them all, and a candidate's quality gate hosted on its first latency
  instance sends its requests there, some of them as that instance's warm-ups. `run_schedule`
  and `GateHost` below are judging/_latency_run.py's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ref2va_accept.campaign import DurationClass, duration_class
from ref2va_accept.core import ArmRole
from ref2va_accept.planning._track_plan import TrackPlan, baseline_groups, gate_groups, needs
from ref2va_accept.timing import LatencySettings, candidate_schedule

log = logging.getLogger(__name__)

_B0_LATENCY = "latency-b0/"  # the key of a shared B0's latency instances, then its tracks
_GATE_BASELINES = ("lossless-baseline/", "lossy-baseline/")  # a track's B0 gate alone
_LATENCY = "latency/"  # a candidate's own part of a shared schedule: then track/candidate
_HOSTED = "hosted-gate/"  # a candidate's gate on its first latency instance: then the same
_PERF = ("test_latency.py", "test_latency_against_matched_b0")
_CANDIDATE_GATES = {("test_lossless.py", "test_candidate_is_bit_exact"),
                    ("test_lossy.py", "test_candidate_within_the_lossy_gate")}


# -- how many requests each scenario sends ------------------------------------------------------
# Each count names the code it mirrors; test_progress.py runs that code and compares.
def lossless_baseline_requests() -> int:
    """lossless.run_baseline: watched + unobserved on one B0 instance, watched on a second."""
    return 3


def lossless_baseline_starts() -> int:
    """lossless.run_baseline: two independent B0 instances."""
    return 2


def lossless_candidate_starts() -> int:
    """lossless.run_candidate: one candidate instance."""
    return 1


def lossless_candidate_requests() -> int:
    """lossless.run_candidate: watched then unobserved on one candidate instance."""
    return 2


def lossless_baseline_dumps() -> int:
    """lossless.run_baseline: its two watched requests ask for the comparison points."""
    return 2


def lossless_candidate_dumps() -> int:
    """lossless.run_candidate: its watched request asks for the comparison points."""
    return 1


def lossy_baseline_requests(seeds: Sequence[int]) -> int:
    """lossy.run_baseline: the track's seeds on two independent B0 instances."""
    return 2 * len(seeds)


def lossy_candidate_requests(seeds: Sequence[int]) -> int:
    """lossy.run_candidate: the track's seeds on one candidate instance."""
    return len(seeds)


def lossy_baseline_starts() -> int:
    """lossy.run_baseline: two independent B0 instances (every output of them priced as
    scored: the most, since on the CPU a second output that is the first's bytes is scored once)."""
    return 2


def lossy_candidate_starts() -> int:
    """lossy.run_candidate: one candidate instance (every output of it is scored)."""
    return 1


def latency_requests(protocol: LatencySettings, candidate: str) -> int:
    """run_schedule for one candidate: per instance of its pairs (B0's and its own), the
    least warm-ups (more only while the steady-state rule is not met) and the measured requests;
    plus the caching probe's distinct requests, spread over the candidate's instances."""
    b0, own = latency_arm_requests(protocol, candidate)
    return b0 + own


def latency_arm_requests(protocol: LatencySettings, candidate: str) -> tuple[int, int]:
    """(B0's, the candidate's) requests of latency_requests, apart: a shared B0 sends its part
    once per track."""
    order = candidate_schedule(protocol, candidate)
    per_instance = protocol.warmups + protocol.repeats
    b0 = sum(per_instance for arm in order if arm == ArmRole.B0)
    return b0, (len(order) * per_instance - b0) + protocol.caching_probe_requests


def latency_arm_starts(protocol: LatencySettings, candidate: str) -> tuple[int, int]:
    """(B0's, the candidate's) fresh instances of run_schedule for one candidate."""
    order = candidate_schedule(protocol, candidate)
    b0 = sum(1 for arm in order if arm == ArmRole.B0)
    return b0, len(order) - b0


def hosts_gate(plan: TrackPlan) -> bool:
    """Whether a candidate of this track measured and judged in one session has its quality
    gate on its first latency instance (run_schedule): the instance design with a
    shared B0, the design both shipped campaigns freeze."""
    return plan.latency.replication == "instance" and plan.latency.baseline_instances == "shared"


def hosted_gate_warmups(plan: TrackPlan) -> int:
    """How many of a hosted gate's requests are its instance's first warm-ups (GateHost
    .warmups): a lossy gate's, when they are the very requests those warm-ups would send (full
    denoising steps, and the gate's seeds the warm-ups' seeds in their order), so the hosting
    instance has the same history as the candidate's others and sends none of them twice. A
    lossless gate's watched request dumps the comparison points, which perturbs its timing:
    it is not a warm-up."""
    settings = plan.latency
    if plan.quality != "lossy" or settings.warmup_steps is not None or not plan.seeds:
        return 0
    return len(plan.seeds)


def hosted_gate_requests(plan: TrackPlan) -> int:
    """lossless.HostedGate / lossy.HostedGate: the watched request (its unobserved output is
    the instance's first measured one) or B0's seeds, on the candidate's first latency
    instance; no start of its own."""
    return 1 if plan.quality == "lossless" else len(plan.seeds)


def hosted_warmup_requests(settings: LatencySettings, credited: int) -> tuple[int, int]:
    """(least, most) warm-ups the hosting instance still sends after `credited` of them came
    from its gate (replication.warmup_done decides, as for any instance)."""
    return max(0, settings.warmups - credited), max(0, settings.max_warmups - credited)


@dataclass(frozen=True)
class WorkUnit:
    """Requests one scenario sends; `key` is shared by scenarios that share them (B0's runs)."""

    key: str
    track: str
    requests: int
    # dumps: of which ask the engine to dump the comparison points (planning/_disk.py sizes them)
    dumps: int = 0
    starts: int = 0  # engine instances it starts
    scored: int = 0  # outputs it scores on every gated dimension (lossy gates)
    # Localization passes it may trigger (a lossless candidate's gate: one, when it is not
    # bit-exact); contingent, so never in the request count, but sized by planning/_disk.py.
    localize: int = 0
    # A latency schedule's requests, counted as scheduled: every instance with its least
    # warm-ups. A run decided early, or not run once its candidate failed a gate, sends fewer;
    # an instance that has not settled sends more warm-ups (up to max_warmups).
    as_scheduled: bool = False

    @property
    def duration(self) -> DurationClass:
        return duration_class(self.track)


@dataclass(frozen=True)
class ScenarioItem:
    """What the plan needs of one collected test."""

    nodeid: str
    file: str  # the test file's name, e.g. test_lossless.py
    function: str
    track: str | None
    candidate: str | None


WorkUnitsFor = Callable[[TrackPlan, str | None, str], tuple[WorkUnit, ...]]


def _one_request_one_start(plan: TrackPlan, candidate: str | None, nodeid: str
                           ) -> tuple[WorkUnit, ...]:
    return (WorkUnit(nodeid, plan.track_id, 1, starts=1),)


def _two_starts_no_request(plan: TrackPlan, candidate: str | None, nodeid: str
                           ) -> tuple[WorkUnit, ...]:
    # Two instances, one after the other, and no timed request.
    return (WorkUnit(nodeid, plan.track_id, 0, starts=2),)


def _one_start_no_request(plan: TrackPlan, candidate: str | None, nodeid: str
                          ) -> tuple[WorkUnit, ...]:
    return (WorkUnit(nodeid, plan.track_id, 0, starts=1),)


def _lossless_baseline(plan: TrackPlan, candidate: str | None, nodeid: str
                       ) -> tuple[WorkUnit, ...]:
    # Shared through the session's Baselines: made by whichever of the track's items runs first.
    track = plan.track_id
    return (WorkUnit(f"lossless-baseline/{track}", track, lossless_baseline_requests(),
                 lossless_baseline_dumps(), lossless_baseline_starts()),)


def _lossless_candidate(plan: TrackPlan, candidate: str | None, nodeid: str
                        ) -> tuple[WorkUnit, ...]:
    return (*_lossless_baseline(plan, candidate, nodeid),
            WorkUnit(nodeid, plan.track_id, lossless_candidate_requests(),
                 lossless_candidate_dumps(), lossless_candidate_starts(), localize=1))


def _lossy_baseline(plan: TrackPlan, candidate: str | None, nodeid: str) -> tuple[WorkUnit, ...]:
    track = plan.track_id
    requests = lossy_baseline_requests(plan.seeds)
    return (WorkUnit(f"lossy-baseline/{track}", track, requests, starts=lossy_baseline_starts(),
                 scored=requests),)


def _lossy_candidate(plan: TrackPlan, candidate: str | None, nodeid: str) -> tuple[WorkUnit, ...]:
    return (*_lossy_baseline(plan, candidate, nodeid),
            WorkUnit(nodeid, plan.track_id, lossy_candidate_requests(plan.seeds),
                 starts=lossy_candidate_starts(),
                 scored=lossy_candidate_requests(plan.seeds)))


def _latency(plan: TrackPlan, candidate: str | None, nodeid: str) -> tuple[WorkUnit, ...]:
    assert candidate is not None  # parametrized per candidate
    b0_starts, own_starts = latency_arm_starts(plan.latency, candidate)
    if plan.latency.baseline_instances != "shared":
        return (WorkUnit(nodeid, plan.track_id, latency_requests(plan.latency, candidate),
                     starts=b0_starts + own_starts, as_scheduled=True),)
    # Shared: B0's instances run once per track, in whichever candidate's scenario runs first;
    # so does every candidate's part (the first scenario runs the whole schedule).
    b0, own = latency_arm_requests(plan.latency, candidate)
    return (WorkUnit(f"{_B0_LATENCY}{plan.track_id}", plan.track_id, b0, starts=b0_starts,
                     as_scheduled=True),
            WorkUnit(f"{_LATENCY}{plan.track_id}/{candidate}", plan.track_id, own,
                 starts=own_starts, as_scheduled=True))


def _profile(plan: TrackPlan, candidate: str | None, nodeid: str) -> tuple[WorkUnit, ...]:
    # The protocol's warm-ups, then the one profiled request (arms/_profiling.py).
    return (WorkUnit(nodeid, plan.track_id, plan.latency.warmups + 1, starts=1),)


def _warmup_demonstration(plan: TrackPlan, candidate: str | None, nodeid: str
                          ) -> tuple[WorkUnit, ...]:
    # warmup_demo.demonstrate: pairs of B0 instances, each its warm-ups and one measured.
    return (WorkUnit(nodeid, plan.track_id,
                 DEFAULT_PAIRS * requests_per_pair(plan.latency.warmups),
                 starts=DEFAULT_PAIRS * 2),)


# The warm-up demonstration's design (warmup_demo.demonstrate runs it; counted here).
DEFAULT_PAIRS = 2


def requests_per_pair(warmups: int) -> int:
    """What the warm-up demonstration asks of one pair: two instances, the least warm-ups and one
    measured request each."""
    return 2 * (warmups + 1)


def _sends_nothing(plan: TrackPlan, candidate: str | None, nodeid: str
                   ) -> tuple[WorkUnit, ...]:
    return ()


# Every campaign scenario of tests/, by file and function. A scenario missing here is planned
# with no request (and logged); test_progress.py fails if one of the suite's is missing.
SCENARIOS: Mapping[tuple[str, str], WorkUnitsFor] = {
    ("test_b0_output.py", "test_b0_returns_complete_mp4"): _one_request_one_start,
    # Its other requests are raw HTTP (bad input, the async job): short, not timed.
    ("test_lifecycle.py", "test_cancelled_async_job_leaves_server_able_to_serve"):
        _one_request_one_start,
    ("test_lifecycle.py", "test_bad_request_gets_400_and_server_stays_healthy"):
        _one_start_no_request,
    ("test_lifecycle.py", "test_stop_leaves_nothing_and_restart_works"): _two_starts_no_request,
    ("test_lossless.py", "test_baseline_reproduces_itself"): _lossless_baseline,
    ("test_lossless.py", "test_candidate_is_bit_exact"): _lossless_candidate,
    ("test_lossy.py", "test_baseline_variability_leaves_room_to_decide"): _lossy_baseline,
    ("test_lossy.py", "test_candidate_within_the_lossy_gate"): _lossy_candidate,
    ("test_latency.py", "test_latency_against_matched_b0"): _latency,
    ("test_track_verdicts.py", "test_track_verdict"): _sends_nothing,
    ("test_profile.py", "test_profile_baseline"): _profile,
    ("test_profile.py", "test_profile_candidate"): _profile,
    ("test_warmup.py", "test_cheap_warmup_is_demonstrated"): _warmup_demonstration,
}


@dataclass(frozen=True)
class Plan:
    """Per collected campaign scenario, the requests it will send, in collection order."""

    items: Mapping[str, tuple[WorkUnit, ...]]
    unknown: tuple[str, ...] = ()

    def units(self) -> dict[str, WorkUnit]:
        return {u.key: u for units in self.items.values() for u in units}

    @property
    def total(self) -> int:
        return sum(u.requests for u in self.units().values())

    @property
    def as_scheduled(self) -> bool:
        """Whether some of its counts are a latency schedule's (WorkUnit.as_scheduled): then
        neither the total nor a remaining time is a bound."""
        return any(u.as_scheduled for u in self.units().values())

    def per_duration(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for unit in self.units().values():
            counts[unit.duration] = counts.get(unit.duration, 0) + unit.requests
        return counts


def plan_run(items: Iterable[ScenarioItem], plans: Mapping[str, TrackPlan]) -> Plan:
    """The run's plan from its collected items and each track's frozen plan."""
    planned: dict[str, tuple[WorkUnit, ...]] = {}
    unknown: list[str] = []
    for item in items:
        if item.track is None:
            continue  # not a campaign scenario: sends nothing through Arms
        units_for = SCENARIOS.get((item.file, item.function))
        if units_for is None:
            unknown.append(item.nodeid)
            log.warning("live progress: no request count known for %s; planned as none",
                        item.nodeid)
            units_for = _sends_nothing
        planned[item.nodeid] = units_for(plans[item.track], item.candidate, item.nodeid)
    # A B0 whose latency instances serve several tracks (plan.baseline_groups, as the session's
    # latency schedules run it) is one unit for them all.
    groups = baseline_groups(plans)
    for nodeid, units in planned.items():
        planned[nodeid] = tuple(
            replace(u, key=f"{_B0_LATENCY}{'+'.join(groups.get(u.track, (u.track,)))}")
            if u.key.startswith(_B0_LATENCY) else u for u in units)
    # B0's gate instances serve every quality track of their gate group that this run has
    # (plan.gate_groups, as b0_gate.GateInstances runs them): one set of units for the group.
    gated = [u.track for units in planned.values() for u in units
             if u.key.startswith(_GATE_BASELINES)]
    gate = gate_groups(plans)
    for nodeid, units in planned.items():
        regrouped: list[WorkUnit] = []
        for u in units:
            if u.key.startswith(_GATE_BASELINES):
                group = tuple(t for t in gate.get(u.track, (u.track,)) if t in gated)
                regrouped += gate_units({t: plans[t] for t in group})
            else:
                regrouped.append(u)
        planned[nodeid] = tuple(regrouped)
    _host_gates(list(items), plans, planned, groups)
    return Plan(planned, tuple(unknown))


def _host_gates(items: Sequence[ScenarioItem], plans: Mapping[str, TrackPlan],
                planned: dict[str, tuple[WorkUnit, ...]], groups: Mapping[str, tuple[str, ...]]
                ) -> None:
    """A candidate whose quality and perf scenarios are both collected has its gate on its
    first latency instance (hosts_gate; as plugin/_selection.py sets it): its quality scenario
    starts no instance of its own, sends hosted_gate_requests, and runs the whole latency
    schedule its candidates share (so it carries that schedule's units)."""
    perf = [i for i in items if (i.file, i.function) == _PERF and i.candidate is not None
            and i.track is not None]
    measured = {(i.track, i.candidate) for i in perf}
    perf_tracks = {i.track for i in perf}
    hosted: dict[str, WorkUnit] = {}  # nodeid of a hosted gate scenario -> its gate's requests
    for item in items:
        if (item.file, item.function) not in _CANDIDATE_GATES or item.track is None:
            continue
        plan = plans[item.track]
        if (item.track, item.candidate) in measured and hosts_gate(plan):
            lossy = plan.quality == "lossy"
            hosted[item.nodeid] = WorkUnit(f"{_HOSTED}{item.track}/{item.candidate}", item.track,
                                       hosted_gate_requests(plan), dumps=0 if lossy else 1,
                                       scored=hosted_gate_requests(plan) if lossy else 0,
                                       localize=0 if lossy else 1)
    by_id = {i.nodeid: i for i in items}
    # The gate's requests that are its instance's warm-ups are not sent again there (once per
    # candidate: its latency unit is one, however many scenarios carry it).
    for track, candidate in {(u.track, by_id[n].candidate) for n, u in hosted.items()}:
        plan = plans[track]
        credited = hosted_gate_warmups(plan)
        saved = plan.latency.warmups - hosted_warmup_requests(plan.latency, credited)[0]
        key = f"{_LATENCY}{track}/{candidate}"
        for n, units in planned.items():
            planned[n] = tuple(replace(u, requests=u.requests - saved) if u.key == key else u
                               for u in units)
    for nodeid, own in hosted.items():
        track = own.track
        tracks = {t for t in groups.get(track, (track,)) if t == track or t in perf_tracks}
        # Whichever of them runs first runs the schedule, every hosted gate in it included.
        schedule = {u.key: u for i in perf if i.track in tracks for u in planned[i.nodeid]}
        gates = {u.key: u for n, u in hosted.items() if by_id[n].track in tracks}
        planned[nodeid] = (*(u for u in planned[nodeid] if u.key != nodeid),
                           *gates.values(), *schedule.values())


def gate_units(plans: Mapping[str, TrackPlan]) -> tuple[WorkUnit, ...]:
    """B0's gate instances of one gate group (b0_gate.run_gate_instances), a unit per track:
    the two starts on the first track's, each request on the track that makes it, each lossy
    track's scored outputs (all its seeds, on both instances) on its own. A track alone gets
    lossless_/lossy_baseline_* (test_progress.py checks both against the code)."""
    need = needs(plans)
    tracks = list(plans)
    key = f"b0-gate/{'+'.join(tracks)}/"
    made = {t: sum(1 for plain in need.plain for _, maker, *_ in plain if maker == t)
            for t in tracks}
    units = []
    for n, track in enumerate(tracks):
        watched = 2 if track in need.watched else 0
        scored = 2 * len(plans[track].seeds) if plans[track].quality == "lossy" else 0
        units.append(WorkUnit(key + track, track, watched + made[track], dumps=watched,
                          starts=0 if n else 2, scored=scored))
    return tuple(units)
