"""A candidate's quality gate on its first latency instance (latency_run.GateHost): its gate
requests before that instance's warm-ups, judged there; a failed gate leaves the instance
unmeasured and starts none of the candidate's other instances, and the candidate's quality
scenario reads the hosted checks instead of starting an instance of its own."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest

from ref2va_accept.campaign import load_campaign
from ref2va_accept.core import ArmRole, Check, EngineStartError, Reason
from ref2va_accept.evidence import AnyCheck
from ref2va_accept.judging import BaselineGateRunner, Baselines, GateChecks, GateOutcome
from ref2va_accept.judging import _latency as latency
from ref2va_accept.judging import _latency_run as latency_run
from ref2va_accept.planning import (
    ScenarioItem,
    TrackPlan,
    hosted_gate_requests,
    hosted_gate_warmups,
    hosts_gate,
    plan_campaign,
    plan_run,
    plan_track,
)
from ref2va_accept.timing import latency_schedule
from tests.unit.check_records import make_check
from tests.unit.latency_doubles import SECONDS, THREE, ScriptedArms
from tests.unit.suite_runner import ROOT

pytestmark = pytest.mark.fast

CAMPAIGN = ROOT / "fixtures/campaigns/reference.yaml"


@pytest.fixture(scope="module")
def plan() -> TrackPlan:
    return plan_track(load_campaign(CAMPAIGN), "5s-lossless")


class Host:
    """A gate that sends one request before the warm-ups and judges it as told: `fails` in
    before (a quality failure), `differs` in after (the measured output is not the watched)."""

    def __init__(self, candidate: str, fails: bool = False, differs: bool = False) -> None:
        self.candidate, self.fails, self.differs = candidate, fails, differs
        self.calls: list[tuple[str, int]] = []

    def _check(self, arms: Any, name: Check, failed: bool) -> AnyCheck:
        check = make_check(arms.plan.track_id, self.candidate, name,
                           "fail" if failed else "pass",
                           Reason.QUALITY_GATE_FAILED if failed and name == Check.LOSSLESS_GATE
                           else Reason.OUTPUT_DIFFERS_WHEN_UNOBSERVED if failed else None,
                           "planted")
        arms.evidence.add_check(check)
        return check

    def before(self, arms: Any, engine: Any) -> list[AnyCheck]:
        self.calls.append(("before", len(arms.requests)))
        arms.request(engine, self.candidate, kind="quality", index=0)
        return [self._check(arms, Check.LOSSLESS_GATE, self.fails)]

    def warmups(self, arms: Any) -> list[Any]:
        return []  # a watched request: not a warm-up

    def after(self, arms: Any, engine: Any, run: latency_run.InstanceRun) -> list[AnyCheck]:
        self.calls.append(("after", len(run.measured)))
        return [self._check(arms, Check.UNOBSERVED_OUTPUT, self.differs)]

    def settle(self, arms: Any, run: latency_run.InstanceRun) -> list[AnyCheck]:
        return []


def _schedules(hosts: dict[str, Host], prepared: list[str] | None = None
               ) -> latency.LatencySchedules:
    schedules = latency.LatencySchedules()
    schedules.cover("5s-lossless", THREE)
    schedules.host({("5s-lossless", c) for c in hosts}, lambda plan, c: hosts[c],
                   lambda arms: (prepared if prepared is not None else []).append(
                       arms.plan.track_id))
    return schedules


def test_the_reference_and_host_campaigns_host_their_gates(plan: TrackPlan) -> None:
    assert hosts_gate(plan)
    assert all(hosts_gate(p) for p in plan_campaign(load_campaign(ROOT / "fixtures/campaigns/"
                                                                   "910c.yaml")).values())


def test_a_passing_gate_runs_before_the_warmups_of_the_first_instance_only(
        plan: TrackPlan) -> None:
    arms = ScriptedArms(plan, SECONDS)
    hosts = {c: Host(c) for c in THREE}
    prepared: list[str] = []
    schedules = _schedules(hosts, prepared)
    gate = schedules.hosted_gate(arms, "lossless-text-kv")  # type: ignore[arg-type]
    assert prepared == ["5s-lossless"]  # B0's gate made before the schedule chose its members
    assert gate is not None and [c.name for c in gate] == [Check.LOSSLESS_GATE,
                                                           Check.UNOBSERVED_OUTPUT]
    for host in hosts.values():
        # Once each, on the candidate's first instance: before its warm-ups, after its measured
        # requests (all of them there).
        assert [what for what, _ in host.calls] == ["before", "after"]
        assert host.calls[1][1] == plan.latency.repeats
    kinds = [kind for arm, kind in arms.requests if arm == "lossless-text-kv"]
    per_instance = ["warmup"] * plan.latency.warmups + ["measured"] * plan.latency.repeats
    assert kinds[0] == "quality" and kinds.count("quality") == 1
    assert kinds[1:1 + len(per_instance)] == per_instance
    # No instance of its own: three starts per candidate, as the latency protocol alone.
    assert Counter(arms.starts)["lossless-text-kv"] == 3
    # The perf scenario judges the same schedule; it runs nothing more.
    before = len(arms.starts)
    checks = latency.run_latency(arms, "lossless-text-kv", schedules)  # type: ignore[arg-type]
    assert len(arms.starts) == before
    ratio = next(c for c in checks if c.name == Check.LATENCY_RATIO)
    assert ratio.latency is not None and ratio.latency.verdict == "supported"
    hosted = [i for i in ratio.json_dict()["data"]["instances"] if "hosted_gate" in i]
    assert len(hosted) == 1 and hosted[0]["hosted_gate"] == ["lossless_gate",
                                                             "unobserved_output"]


def test_a_failed_gate_stops_its_candidate_at_the_gate(plan: TrackPlan) -> None:
    arms = ScriptedArms(plan, SECONDS)
    hosts = {c: Host(c, fails=c == "reduction-order") for c in THREE}
    schedules = _schedules(hosts)
    gate = schedules.hosted_gate(arms, "reduction-order")  # type: ignore[arg-type]
    assert gate is not None and gate[0].reason == Reason.QUALITY_GATE_FAILED
    # Its one instance (the gate's) measured nothing: no warm-up, no measured request; the
    # unobserved output is still judged (after() ran with nothing measured).
    assert [k for a, k in arms.requests if a == "reduction-order"] == ["quality"]
    assert hosts["reduction-order"].calls == [("before", hosts["reduction-order"].calls[0][1]),
                                             ("after", 0)]
    assert Counter(arms.starts)["reduction-order"] == 1
    assert any(n.startswith("5s-lossless reduction-order: latency protocol ended after "
                            "reduction-order#") and "its gate there stopped on lossless_gate "
               "(quality_gate_failed)" in n and n.endswith("2 instance(s) not started")
               for n in arms.notes), arms.notes
    # The others run whole; its latency row says what stopped it.
    assert Counter(arms.starts)["lossless-text-kv"] == 3
    (row,) = latency.run_latency(arms, "reduction-order", schedules)  # type: ignore[arg-type]
    assert row.detail == "not measured: stopped on lossless_gate (quality_gate_failed)"


def test_an_output_that_differs_unobserved_stops_after_the_first_instance(
        plan: TrackPlan) -> None:
    arms = ScriptedArms(plan, SECONDS)
    hosts = {c: Host(c, differs=c == "mislabelled-cache") for c in THREE}
    schedules = _schedules(hosts)
    schedules.hosted_gate(arms, "lossless-text-kv")  # type: ignore[arg-type]
    assert Counter(arms.starts)["mislabelled-cache"] == 1
    assert "measured" in [k for a, k in arms.requests if a == "mislabelled-cache"]


def test_a_b0_decided_first_leaves_the_gate_to_an_instance_of_its_own(
        plan: TrackPlan) -> None:
    # An order seed that puts some candidate's first instance after B0's first.
    for seed in range(100):
        drawn = dataclasses.replace(plan, latency=dataclasses.replace(plan.latency,
                                                                     order_seed=seed))
        order = latency_schedule(drawn.latency, "5s-lossless", THREE)
        first_b0 = order.index(ArmRole.B0)
        late = [c for c in THREE if order.index(c) > first_b0]
        if late and len(late) < len(THREE):
            break
    arms = ScriptedArms(drawn, SECONDS, failing={ArmRole.B0: 1})
    hosts = {c: Host(c) for c in THREE}
    schedules = _schedules(hosts)
    for candidate in THREE:
        found = schedules.hosted_gate(arms, candidate)  # type: ignore[arg-type]
        assert (found is None) == (candidate in late)
    # Not hosted at all: None, the gate runs as before.
    other = latency.LatencySchedules()
    other.cover("5s-lossless", THREE)
    assert other.hosted_gate(arms, "lossless-text-kv") is None  # type: ignore[arg-type]


def test_a_hosting_instance_that_does_not_start_raises_in_the_quality_scenario(
        plan: TrackPlan) -> None:
    arms = ScriptedArms(plan, SECONDS, not_starting="mislabelled-cache")
    schedules = _schedules({c: Host(c) for c in THREE})
    with pytest.raises(EngineStartError):
        schedules.hosted_gate(arms, "mislabelled-cache")  # type: ignore[arg-type]
    assert schedules.hosted_gate(arms, "lossless-text-kv") is not None  # type: ignore[arg-type]


class _Runner(BaselineGateRunner[GateChecks]):
    name = "planted"

    def __init__(self, baselines: Baselines) -> None:
        super().__init__(baselines)
        self.judged: list[str] = []

    def make_baseline(self, arms: Any) -> GateChecks:
        return GateChecks(checks=())

    def judge(self, arms: Any, candidate: str, baseline: GateChecks) -> list[AnyCheck]:
        self.judged.append(candidate)
        return [make_check(arms.plan.track_id, candidate, Check.LOSSLESS_GATE, "pass", None,
                           "own instance")]


def test_the_quality_scenario_reads_the_hosted_gate(plan: TrackPlan) -> None:
    arms = ScriptedArms(plan, SECONDS)
    hosts = {c: Host(c, fails=c == "reduction-order") for c in THREE}
    runner = _Runner(Baselines(schedules=_schedules(hosts)))
    failed = runner.candidate(arms, "reduction-order")  # type: ignore[arg-type]
    assert failed.outcome is GateOutcome.FAILED and "quality_gate_failed" in failed.message
    assert runner.candidate(arms, "lossless-text-kv").outcome is GateOutcome.PASSED  # type: ignore[arg-type]
    assert runner.judged == []  # no instance of its own
    # Without the session's schedules (a quality-only session) it runs on its own instance.
    alone = _Runner(Baselines())
    assert alone.candidate(arms, "lossless-text-kv").outcome is GateOutcome.PASSED  # type: ignore[arg-type]
    assert alone.judged == ["lossless-text-kv"]


def test_progress_plans_a_hosted_gate_inside_the_schedule(plan: TrackPlan) -> None:
    plans = {"5s-lossless": plan}
    gate = [ScenarioItem(f"q::c[{c}]", "test_lossless.py", "test_candidate_is_bit_exact",
                         "5s-lossless", c) for c in THREE]
    perf = [ScenarioItem(f"p::l[{c}]", "test_latency.py", "test_latency_against_matched_b0",
                         "5s-lossless", c) for c in THREE]
    both = plan_run([*gate, *perf], plans)
    alone = plan_run(gate, plans)
    first = both.items[gate[0].nodeid]
    # The first gate scenario runs the whole schedule: it carries every latency unit, and its
    # own unit starts nothing and sends the watched request.
    mine = next(u for u in first if u.key == f"hosted-gate/5s-lossless/{THREE[0]}")
    assert (mine.starts, mine.requests, mine.dumps) == (0, hosted_gate_requests(plan), 1)
    latency_keys = {u.key for p in perf for u in both.items[p.nodeid]}
    assert latency_keys <= {u.key for u in first}
    # ... and every candidate's hosted gate, which that schedule runs.
    assert {f"hosted-gate/5s-lossless/{c}" for c in THREE} <= {u.key for u in first}
    assert both.total == sum(u.requests for u in both.units().values())
    # A quality-only session: each candidate's gate on its own instance (one start, two
    # requests), and no latency unit.
    own = [u for u in alone.items[gate[0].nodeid] if u.key == gate[0].nodeid]
    assert [(u.starts, u.requests) for u in own] == [(1, 2)]
    starts = sum(u.starts for u in both.units().values())
    assert starts == 2 + 3 + 3 * 3  # B0's gate pair, B0's latency, the candidates' instances


def test_a_candidate_stopped_before_the_schedule_hosts_nothing(plan: TrackPlan) -> None:
    arms = ScriptedArms(plan, SECONDS)
    # Its cleanup failed in an earlier scenario: it takes no place in the schedule.
    arms.checks.append(make_check("5s-lossless", "reduction-order", Check.CLEANUP, "fail",
                                  Reason.INCOMPLETE_CLEANUP, "left a worker"))
    schedules = _schedules({c: Host(c) for c in THREE})
    assert schedules.hosted_gate(arms, "reduction-order") is None  # type: ignore[arg-type]
    assert schedules.hosted_gate(arms, "lossless-text-kv") is not None  # type: ignore[arg-type]
    assert "reduction-order" not in arms.starts  # no instance of it, no schedule of its own


def _lossy_host(device: str, monkeypatch: pytest.MonkeyPatch, *, fails: bool,
                warmup_steps: int | None = None) -> tuple[Any, list[bool], list[str]]:
    """A schedule of two lossy candidates whose first hosts a lossy.HostedGate (scores and
    verdict planted); (the arms, whether the engine was up at each score, the stops)."""
    from types import SimpleNamespace

    from ref2va_accept.judging import _lossy as lossy

    plan = plan_campaign(load_campaign(CAMPAIGN))["5s-lossy"]
    plan = dataclasses.replace(plan, gate=dataclasses.replace(plan.lossy, device=device),
                               latency=dataclasses.replace(plan.latency,
                                                           warmup_steps=warmup_steps))
    arms = ScriptedArms(plan, {**SECONDS, LOSSY[0]: 2.0, LOSSY[1]: 3.0})
    stopped: list[str] = []
    arms.registry = SimpleNamespace(stop=lambda engine: stopped.append(engine.arm))
    engine_up_when_scored: list[bool] = []
    monkeypatch.setattr(lossy, "_score", lambda a, o: (
        engine_up_when_scored.append(stopped.count(LOSSY[0]) == 0), ())[1])
    monkeypatch.setattr(lossy, "judge_candidate", lambda track, gate, c, b, runs: make_check(
        track, c, Check.LOSSY_GATE, "fail" if fails else "pass",
        Reason.QUALITY_GATE_FAILED if fails else None, "planted"))
    runner = SimpleNamespace(made=lambda a: SimpleNamespace(
        runs=[SimpleNamespace(seed=s, scores=()) for s in plan.seeds]))
    host = lossy.HostedGate(runner, LOSSY[0])  # type: ignore[arg-type]
    schedules = latency.LatencySchedules()
    schedules.cover("5s-lossy", LOSSY)
    schedules.host({("5s-lossy", LOSSY[0])}, lambda p, c: host, lambda a: None)
    gate = schedules.hosted_gate(arms, LOSSY[0])  # type: ignore[arg-type]
    assert gate is not None
    assert (gate[0].reason == Reason.QUALITY_GATE_FAILED) is fails
    arms.schedules = schedules
    return arms, engine_up_when_scored, stopped


LOSSY = ("cache-dit-aggressive", "cache-dit-mild")


@pytest.mark.parametrize("device", ["cpu", "npu:0"])
def test_a_failed_lossy_gate_is_scored_once_its_instance_stopped_on_any_device(
        device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    arms, engine_up_when_scored, _ = _lossy_host(device, monkeypatch, fails=True)
    seeds = arms.plan.seeds
    assert len(engine_up_when_scored) == len(seeds)
    # Scored once the instance had stopped, whatever the device: nothing waited between its
    # requests and the warm-ups; that instance measured, and the failure started none of its
    # others.
    assert not any(engine_up_when_scored)
    kinds = [k for a, k in arms.requests if a == LOSSY[0]]
    assert kinds[:len(seeds)] == ["quality"] * len(seeds) and "measured" in kinds
    assert Counter(arms.starts)[LOSSY[0]] == 1 and Counter(arms.starts)[LOSSY[1]] == 3


def test_a_lossy_gates_requests_are_its_instances_warmups(
        monkeypatch: pytest.MonkeyPatch) -> None:
    arms, _, _ = _lossy_host("cpu", monkeypatch, fails=False)
    plan = arms.plan
    settings = plan.latency
    assert hosted_gate_warmups(plan) == len(plan.seeds) >= settings.warmups
    # (the caching probe's distinct requests aside)
    kinds = [k for a, k in arms.requests if a == LOSSY[0] and k != "distinct"]
    # The hosting instance sends B0's seeds (the very requests its warm-ups would be), then
    # its measured request with no warm-up of its own (they were steady); the candidate's
    # other instances warm up in full.
    per_instance = ["warmup"] * settings.warmups + ["measured"] * settings.repeats
    assert kinds == ["quality"] * len(plan.seeds) + ["measured"] * settings.repeats \
        + per_instance * 2
    runs = arms.schedules.runs(arms, LOSSY[0])
    hosting = next(r for r in runs if r.gate)
    assert hosting.warmups_from_gate == len(plan.seeds)
    assert len(hosting.warmups) == len(plan.seeds) and hosting.steady
    assert hosting.record().warmups_from_gate == len(plan.seeds)
    assert all(r.warmups_from_gate == 0 for r in runs if r is not hosting)
    # An instance that hosted no gate records neither key.
    assert all({"hosted_gate", "warmups_from_gate"}.isdisjoint(r.record().json_dict())
               for r in runs if r is not hosting)


def test_cheap_warmups_are_not_the_gates_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    # With warm-ups of fewer steps the gate's full requests are not what the warm-ups send:
    # the hosting instance warms up as the candidate's others do.
    arms, _, _ = _lossy_host("cpu", monkeypatch, fails=False, warmup_steps=4)
    assert hosted_gate_warmups(arms.plan) == 0
    kinds = [k for a, k in arms.requests if a == LOSSY[0] and k != "distinct"]
    per_instance = ["warmup"] * arms.plan.latency.warmups + ["measured"]
    assert kinds == ["quality"] * len(arms.plan.seeds) + per_instance * 3
