"""Stand-ins for the latency tests: synthetic instance runs for the judgement (latency_run, on
the INSTANCE design's settings), a RunState on a fixture campaign (run_state), and arm runners
for the protocol with no engine behind them (ScriptedArms: each arm's requests take a fixed time;
ChosenLatencyArms: each request answers a latency the test chooses), with the engine handle
they start."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ref2va_accept.arms import Outcome, OutcomeLog
from ref2va_accept.campaign import load_campaign
from ref2va_accept.core import ArmRole, EngineStartError
from ref2va_accept.evidence import AnyCheck
from ref2va_accept.judging import InstanceRun
from ref2va_accept.planning import TrackPlan, plan_campaign
from ref2va_accept.timing import LatencySettings
from tests.unit.timed_samples import timed_sample

ROOT = Path(__file__).resolve().parents[2]
TRACK = "5s-lossless"

# -- instance runs for the judgement -------------------------------------------------------------

INSTANCE = LatencySettings(
    replication="instance", instances_per_arm=3, baseline_instances="per_candidate", warmups=2,
    max_warmups=4, steady_fraction=0.05,
    repeats=1, ordering="interleaved", order_seed=7, pause_s=0, drift_tolerance=0.10,
    target_ratio=0.5, confidence=0.95, decision_rule="ratio-interval-moses/1",
    caching_probe_requests=2, caching_margin=0.10, device_kind="none", devices=())


def latency_outcome(latency: float | None, failure: str | None = None) -> Outcome:
    """One request's outcome on TRACK: its latency, or a failure with none."""
    sample = timed_sample("x", "a", TRACK, "measured", 0, 42, ok=failure is None,
                          failure=failure, detail=failure,
                          status=200 if failure is None else 500, latency_s=latency)
    return Outcome(sample, {"video": {}} if failure is None else None, ())


def latency_run(arm: str, latencies: list[float],
                distinct: list[float] = (),  # type: ignore[assignment]
                interference: list[str] = (), failure: str | None = None,  # type: ignore[assignment]
                warmups: list[float] | None = None, steady: bool = True) -> InstanceRun:
    """One instance of `arm`: its measured latencies (then a failed request where `failure`
    names one), distinct requests, interference, and warm-ups (two of the first latency unless
    given)."""
    warm = [latencies[0], latencies[0]] if warmups is None else warmups
    run = InstanceRun(arm, 0, [latency_outcome(x) for x in latencies],
                      [latency_outcome(x) for x in distinct], list(interference),
                      [latency_outcome(x) for x in warm], steady)
    if failure:
        run.measured.append(latency_outcome(None, failure))
    return run


# -- a run's state on a fixture campaign -----------------------------------------------------------

class _Config:
    """What RunState reads of pytest's config for the order: the --order-seed option."""

    def __init__(self, order_seed: int | None = None) -> None:
        self.order_seed = order_seed

    def getoption(self, name: str, default: object = None) -> object:
        return self.order_seed if name == "order_seed" else default


def run_state(campaign: str = "reference", order_seed: int | None = None):  # type: ignore[no-untyped-def]
    """A RunState (run id "r") on fixtures/campaigns/<campaign>.yaml, its order seed drawn
    unless given."""
    from ref2va_accept.plugin._state import RunState

    return RunState(_Config(order_seed), "r", ROOT / "evidence",  # type: ignore[arg-type]
                    ROOT / "fixtures" / "campaigns" / f"{campaign}.yaml")


# -- arm runners for the protocol --------------------------------------------------------------

class StandInEngine:
    """The engine handle a stand-in arm runner starts: its arm, and no processes."""

    def __init__(self, arm: str) -> None:
        self.arm = arm

    def snapshot_tree(self) -> None:
        pass

    def known_pids(self) -> set[int]:
        return set()


THREE = ("lossless-text-kv", "reduction-order", "mislabelled-cache")

# reduction-order no faster than B0: its protocol stops once supported is out of reach, while
# B0's instances go on for the two others.
SECONDS = {ArmRole.B0: 7.0, "lossless-text-kv": 2.3, "reduction-order": 7.1,
           "mislabelled-cache": 2.9}


class ScriptedArms:
    """Arms whose requests take a fixed time per arm; `failing` arms fail at their n-th start."""

    def __init__(self, plan: TrackPlan, seconds: dict[str, float],
                 failing: dict[str, int] | None = None, not_starting: str | None = None) -> None:
        self.plan = plan
        self.seconds = seconds
        self.failing = failing or {}
        self.not_starting = not_starting
        self.outcomes = OutcomeLog()
        self.starts: list[str] = []
        self.requests: list[tuple[str, str]] = []
        self.notes: list[str] = []
        self.checks: list[Any] = []
        self.evidence = SimpleNamespace(add_check=self.checks.append, note=self.notes.append,
                                        checks=self.checks)
        self.registry = SimpleNamespace(stop=lambda engine: None)

    def for_track(self, plan: TrackPlan) -> ScriptedArms:
        """As Arms.for_track: another track's arms, sharing what this one records."""
        other = ScriptedArms(plan, self.seconds, self.failing, self.not_starting)
        other.outcomes, other.starts, other.requests = self.outcomes, self.starts, self.requests
        other.notes, other.checks, other.evidence = self.notes, self.checks, self.evidence
        return other

    def _jitter(self) -> float:
        # A 1% spread that repeats every three requests: each arm spreads (the Welch rule
        # decides nothing on values that do not), and the ratios stay what SECONDS says.
        return 1 + 0.01 * (len(self.requests) % 3 - 1)

    def start(self, arm_id: str = "b0") -> StandInEngine:
        self.starts.append(arm_id)
        if arm_id == self.not_starting:
            raise EngineStartError(f"{arm_id} not healthy after 60 s")
        return StandInEngine(arm_id)

    def request(self, engine: StandInEngine, arm_id: str, *, kind: str, index: int,
                seed: int | None = None, **_: object) -> Outcome:
        self.requests.append((arm_id, kind))
        fails = self.starts.count(arm_id) == self.failing.get(arm_id, 0)
        sample = timed_sample("s", arm_id, self.plan.track_id, kind, index, seed, ok=not fails,
                              failure="http_500" if fails else None,
                              detail="boom" if fails else None,
                              status=500 if fails else 200,
                              latency_s=None if fails else self.seconds[arm_id] * self._jitter())
        outcome = Outcome(sample, None if fails else {"video": {}}, ())
        self.outcomes.add(outcome)
        return outcome


def plan_910c(**latency: Any) -> TrackPlan:
    """The 910C campaign's TRACK (order seed 4) with three candidates, fast, slow and other, and
    no caching probe; `latency` changes its protocol further."""
    plans = plan_campaign(load_campaign(ROOT / "fixtures/campaigns/910c.yaml"), order_seed=4)
    plan = plans[TRACK]
    # Three candidates on the lossless track; the protocol as frozen (Welch at 0.96, 3 + 3).
    arms = (plan.arms[0], *(dataclasses.replace(plan.arms[1], id=c) for c in ("fast", "slow",
                                                                              "other")))
    return dataclasses.replace(plan, arms=arms, latency=dataclasses.replace(
        plan.latency, caching_probe_requests=0, **latency))


@dataclass
class _Evidence:
    checks: list[AnyCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add_check(self, check: AnyCheck) -> None:
        self.checks.append(check)

    def note(self, text: str) -> None:
        self.notes.append(text)


class _Registry:
    def stop(self, engine: StandInEngine) -> None:
        pass


class ChosenLatencyArms:
    """What the latency protocol uses of workload.Arms; `latency(arm, kind, n)` answers each
    request (None: the request fails)."""

    def __init__(self, plan: TrackPlan, latency: Callable[[str, str, int], float | None]
                 ) -> None:
        self.plan, self.latency = plan, latency
        self.evidence = _Evidence()
        self.registry = _Registry()
        self.outcomes = OutcomeLog()
        self.started: list[str] = []

    def start(self, arm: str) -> StandInEngine:
        self.started.append(arm)
        return StandInEngine(arm)

    def request(self, engine: StandInEngine, arm: str, *, kind: str, index: int, seed: int,
                **_: Any) -> Outcome:
        n = sum(1 for a in self.started if a == arm)
        value = self.latency(arm, kind, n)
        sample = timed_sample(f"{arm}{index}", arm, TRACK, kind, index, seed,
                              ok=value is not None,
                              failure=None if value is not None else "http_status",
                              detail=None if value is not None else "500",
                              status=200 if value is not None else 500, latency_s=value)
        return Outcome(sample, {"video": {}} if value is not None else None, ())
