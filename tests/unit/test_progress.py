"""Live progress: the plan of a run, its remaining time, and what the terminal shows.

Request counts the plan derives (and where from; each is checked below by running that code
against a counting stand-in of Arms):
- acceptance: one `smoke` request (test_b0_output) and one `after_cancel` request (lifecycle);
- lossless: B0 3 (watched + unobserved, watched on a second instance), 2 per candidate;
- lossy: B0 2 x the track's seeds (two instances), the track's seeds per candidate;
- perf: per instance of the frozen ordering (ABA, AB, ABBA) warmups + repeats, plus the caching
  probe's distinct requests on the candidate's instances;
- verdicts and the other lifecycle scenarios: none through Arms.
Engine starts are counted the same way (the stand-in counts `start`), and scored outputs are the
lossy gates' requests; the remaining time prices both at the campaign's frozen figures.
"""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from ref2va_accept.arms import Outcome, OutcomeLog, ProgressReporter, Terminal
from ref2va_accept.campaign import LoadedCampaign, canonical_campaign, freeze, load_campaign, verify
from ref2va_accept.core import CampaignError
from ref2va_accept.judging import _latency as latency
from ref2va_accept.judging import _latency_run as latency_run
from ref2va_accept.judging import _lossless as lossless
from ref2va_accept.judging import _lossy as lossy
from ref2va_accept.planning import (
    SCENARIOS,
    Plan,
    Progress,
    ScenarioItem,
    TrackPlan,
    WorkUnit,
    hosted_gate_requests,
    hosts_gate,
    latency_arm_starts,
    latency_requests,
    lossless_baseline_dumps,
    lossless_baseline_requests,
    lossless_baseline_starts,
    lossless_candidate_dumps,
    lossless_candidate_requests,
    lossless_candidate_starts,
    lossy_baseline_requests,
    lossy_baseline_starts,
    lossy_candidate_requests,
    lossy_candidate_starts,
    plan_campaign,
    plan_run,
    plan_track,
)
from tests.unit.check_records import make_check
from tests.unit.plugin_sessions import collect_in_checkout
from tests.unit.suite_runner import ROOT, campaign_variant
from tests.unit.terminal_doubles import (
    REQUEST,
    Clock,
    FakeTTY,
    progress_plan,
    request_outcome,
    screen,
    terminal_reporter,
)
from tests.unit.timed_samples import timed_sample

pytestmark = pytest.mark.fast

REFERENCE = ROOT / "fixtures/campaigns/reference.yaml"
SCENARIO_DIRS = ("tests/acceptance", "tests/quality", "tests/perf", "tests/verdicts",
                 "tests/profile")


@pytest.fixture(scope="module")
def campaign() -> LoadedCampaign:
    return load_campaign(REFERENCE)


def _item(nodeid: str) -> ScenarioItem:
    """A collected node id as the plan sees it: file, function, [track] or [track:candidate]."""
    match = re.fullmatch(r"(?:.*/)?([^/]+\.py)::(\w+)(?:\[([^:\]]+)(?::([^\]]+))?\])?", nodeid)
    assert match, nodeid
    file, function, track, candidate = match.groups()
    return ScenarioItem(nodeid, file, function, track, candidate)


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> list[ScenarioItem]:
    """Every campaign scenario of the suite, as pytest collects it with the reference campaign
    (in this process: tests/unit/plugin_sessions.py)."""
    evidence = tmp_path_factory.mktemp("evidence")  # pytest-html's empty report goes there
    # -m names every scenario group: the profile scenarios are collected only when it names
    # theirs (selection.py).
    result = collect_in_checkout(*SCENARIO_DIRS, "-p", "no:randomly", "-m",
                                 "acceptance or quality or perf or verdict or profile",
                                 "--campaign", str(REFERENCE), "--evidence-dir", str(evidence))
    assert result.ret == 0, result.out[-2000:] + result.err[-2000:]
    return [_item(nodeid) for nodeid in result.nodeids]


def test_every_campaign_scenario_belongs_to_a_track(collected: list[ScenarioItem]) -> None:
    """`./ref2va campaign` runs its lanes by track marks (lanes.py), so a campaign scenario that
    belonged to no track would run in no lane."""
    assert collected
    assert [i.nodeid for i in collected if i.track is None] == []


# -- the campaign field -------------------------------------------------------------------------
def _with_medians(tmp_path: Path, medians: object) -> Path:
    protocol = yaml.safe_load(REFERENCE.read_text())["protocol"]
    return campaign_variant(tmp_path / "c", protocol={**protocol, "expected_request_s": medians})


@pytest.mark.parametrize(("medians", "message"), [
    ({"5s": 0}, "protocol.expected_request_s.5s"),
    ({"5s": -3.5}, "protocol.expected_request_s.5s"),
    ({"10s": 60.0}, "protocol.expected_request_s"),
    ({"5s": "fast"}, "protocol.expected_request_s.5s"),
])
def test_expected_request_s_refuses_what_is_not_a_positive_time_per_duration(
        tmp_path: Path, medians: object, message: str) -> None:
    with pytest.raises(CampaignError) as caught:
        load_campaign(_with_medians(tmp_path, medians))
    assert "campaign.yaml" in str(caught.value) and message in str(caught.value)


def test_expected_request_s_is_frozen_when_given_and_absent_when_not(tmp_path: Path) -> None:
    path = _with_medians(tmp_path, {"5s": 292.148, "15s": 1702})
    loaded = load_campaign(path)
    assert loaded.model.protocol.expected_request_s == {"5s": 292.148, "15s": 1702.0}
    assert canonical_campaign(loaded)["protocol"]["expected_request_s"] == {
        "15s": 1702.0, "5s": 292.148}
    freeze(path)
    assert verify(path).state == "frozen"
    path.write_text(path.read_text().replace("292.148", "300.5"))
    assert any(p.startswith("protocol.expected_request_s.5s: locked 292.148, now 300.5")
               for p in verify(path).problems), verify(path).problems
    # Without the field (the reference campaign), the canonical form has no trace of it, so
    # campaigns frozen before it existed keep their lock.
    assert "expected_request_s" not in canonical_campaign(load_campaign(REFERENCE))["protocol"]


def test_host_campaign_carries_the_preflight_medians() -> None:
    host = load_campaign(ROOT / "fixtures/campaigns/910c.yaml")
    assert host.model.protocol.expected_request_s == {"5s": 292.148, "15s": 1702.939}


# -- the plan -------------------------------------------------------------------------------------
def test_plan_of_5s_lossless_with_one_candidate_counts_every_request(
        collected: list[ScenarioItem], campaign: LoadedCampaign) -> None:
    chosen = [i for i in collected if i.track == "5s-lossless"
              and i.candidate in (None, "lossless-text-kv")]
    plan = plan_run(chosen, plan_campaign(campaign))
    protocol = campaign.model.protocol
    assert (protocol.replication, protocol.instances_per_arm, protocol.warmups,
            protocol.repeats, protocol.caching_probe_requests) == ("instance", 3, 2, 1, 2)
    # b0 smoke 1 + after_cancel 1 + lossless B0 3 + candidate 1 (its watched request, on its
    # first latency instance) + perf 6 instances x (2 + 1) + 2 + the profiling scenario of B0
    # and of the candidate: each 2 warm-ups and 1 profiled
    assert plan.total == 1 + 1 + 3 + 1 + 6 * 3 + 2 + 2 * (2 + 1) == 32
    assert plan.per_duration() == {"5s": 32}
    assert plan.unknown == ()
    # With every candidate of the track, B0's lossless runs are still planned once, and so are
    # its latency instances (shared by the track's candidates): 3 x (2 + 1) requests; each arm
    # (B0 and every candidate) is profiled once: 2 warm-ups and 1 profiled request; each
    # candidate's gate is its watched request.
    every = plan_run([i for i in collected if i.track == "5s-lossless"], plan_campaign(campaign))
    candidates = len(campaign.arms_for("5s-lossless")) - 1
    assert every.total == 1 + 1 + 3 + 9 + candidates * (1 + 11) + (candidates + 1) * 3


def test_latency_counts_are_as_scheduled_and_the_plan_says_so(
        collected: list[ScenarioItem], campaign: LoadedCampaign) -> None:
    """A latency schedule is counted whole, with its least warm-ups: a run decided early sends
    fewer, an unsettled instance more. So a plan with one says so, and its remaining time is
    never written as a bound (">="), priced or not; a plan without one (acceptance scenarios
    send exactly their count) says nothing of it."""
    plans = plan_campaign(campaign)
    clause = ("(latency runs as scheduled: one decided early, or whose candidate fails a gate, "
              "sends fewer; an unsettled instance more warm-ups)")
    acceptance = plan_run([i for i in collected if i.track == "5s-lossless"
                           and i.file in ("test_b0_output.py", "test_lifecycle.py")], plans)
    assert acceptance.total and not acceptance.as_scheduled
    assert clause not in Progress(acceptance).summary()
    perf = [i for i in collected if i.track == "5s-lossless" and i.file == "test_latency.py"]
    for design in ("shared", None):  # B0's instances shared by the track's candidates, or not
        latency = dataclasses.replace(plans["5s-lossless"].latency, baseline_instances=design)
        plan = plan_run(perf, {**plans, "5s-lossless": dataclasses.replace(
            plans["5s-lossless"], latency=latency)})
        assert plan.as_scheduled and all(u.as_scheduled for u in plan.units().values())
        progress = Progress(plan)
        assert clause in progress.summary()
        progress.item_started(perf[0].nodeid)
        progress.request_started()
        progress.request_finished("5s", 10.0, ok=True)
        # The reference campaign prices no engine start: named, and still no ">=".
        assert progress.eta().startswith("~") and "not priced: " in progress.eta()


def test_every_campaign_scenario_of_the_suite_has_a_known_request_count(
        collected: list[ScenarioItem], campaign: LoadedCampaign) -> None:
    assert collected
    missing = {(i.file, i.function) for i in collected} - set(SCENARIOS)
    assert not missing, f"add these scenarios to run_plan.SCENARIOS: {sorted(missing)}"
    assert plan_run(collected, plan_campaign(campaign)).unknown == ()


def test_an_unknown_scenario_is_planned_as_none_and_named(campaign: LoadedCampaign) -> None:
    plan = plan_run([ScenarioItem("t.py::test_new[5s-lossy]", "t.py", "test_new", "5s-lossy",
                                  None)], plan_campaign(campaign))
    assert plan.unknown == ("t.py::test_new[5s-lossy]",) and plan.total == 0


def _calls_of_arms_request(function: str, path: Path) -> int:
    source = path.read_text()
    body = source.split(f"def {function}(", 1)[1].split("\ndef ", 1)[0]
    return body.count("arms.request(")


def _calls_of_arms_start(function: str, path: Path) -> int:
    source = path.read_text()
    body = source.split(f"def {function}(", 1)[1].split("\ndef ", 1)[0]
    return body.count("arms.start(")


@pytest.mark.parametrize(("rel", "function", "count", "starts"), [
    ("tests/acceptance/test_b0_output.py", "test_b0_returns_complete_mp4", 1, 1),
    ("tests/acceptance/test_lifecycle.py",
     "test_cancelled_async_job_leaves_server_able_to_serve", 1, 1),
    ("tests/acceptance/test_lifecycle.py", "test_bad_request_gets_400_and_server_stays_healthy",
     0, 1),
    ("tests/acceptance/test_lifecycle.py", "test_stop_leaves_nothing_and_restart_works", 0, 2),
    ("tests/verdicts/test_track_verdicts.py", "test_track_verdict", 0, 0),
])
def test_acceptance_counts_match_the_scenarios_own_requests(
        rel: str, function: str, count: int, starts: int, campaign: LoadedCampaign) -> None:
    # These scenarios send their requests and start their engines inline, once each (no loop):
    # count the calls.
    assert _calls_of_arms_request(function, ROOT / rel) == count
    assert _calls_of_arms_start(function, ROOT / rel) == starts
    units = SCENARIOS[(Path(rel).name, function)](plan_track(campaign, "5s-lossless"), None, "x")
    assert sum(u.requests for u in units) == count
    assert sum(u.starts for u in units) == starts


class _Engine:
    def __init__(self, instance_id: str) -> None:
        self.spec = SimpleNamespace(instance_id=instance_id)

    def snapshot_tree(self) -> None:
        pass

    def known_pids(self) -> set[int]:
        return set()


class CountingArms:
    """Arms as the gates use it, counting requests. By default every request fails at once, which
    the quality gates record and go on from, so they run whole without an engine; the latency
    protocol ends at a failure, so for it every request succeeds in `latency_s` seconds (the same
    every time: warm-up is steady at its minimum)."""

    def __init__(self, plan: TrackPlan, latency_s: float | None = None) -> None:
        self.plan = plan
        self.latency_s = latency_s
        self.outcomes = OutcomeLog()
        self.requests: list[tuple[str, str]] = []
        self.starts: list[str] = []  # the arm of each engine started
        self.dumps = 0  # requests that asked for comparison points
        self.evidence = SimpleNamespace(add_check=lambda check: None, note=lambda text: None,
                                        checks=[])
        self.registry = SimpleNamespace(stop=lambda engine: None)

    def start(self, arm_id: str = "b0") -> _Engine:
        self.starts.append(arm_id)
        return _Engine(f"{self.plan.track_id}.{arm_id}")

    def request(self, engine: _Engine, arm_id: str, *, kind: str, index: int,
                seed: int | None = None, diagnostics_points: tuple[str, ...] = (),
                **_: object) -> Outcome:
        self.requests.append((arm_id, kind))
        self.dumps += bool(diagnostics_points)
        if self.latency_s is not None:
            # The candidate well below the target: the protocol runs whole (a candidate no
            # faster than B0 would stop once supported is out of reach).
            seconds = self.latency_s * (1.0 if arm_id == "b0" else 0.4)
            sample = timed_sample("s", arm_id, self.plan.track_id, kind, index, seed, ok=True,
                                  status=200, latency_s=seconds)
            outcome = Outcome(sample, {"video": {}}, ())
        else:
            sample = timed_sample("s", arm_id, self.plan.track_id, kind, index, seed, ok=False,
                                  failure="counted", detail="not sent")
            outcome = Outcome(sample, None, ())
        self.outcomes.add(outcome)
        return outcome


@pytest.mark.parametrize("track", ["5s-lossless", "15s-lossless"])
def test_lossless_counts_match_the_gate(track: str, campaign: LoadedCampaign) -> None:
    arms = CountingArms(plan_track(campaign, track))
    baseline = lossless.run_baseline(arms)  # type: ignore[arg-type]
    assert len(arms.requests) == lossless_baseline_requests()
    assert arms.dumps == lossless_baseline_dumps() == 2  # the disk estimate sizes these
    assert len(arms.starts) == lossless_baseline_starts() == 2
    arms.requests.clear()
    arms.starts.clear()
    arms.dumps = 0
    lossless.run_candidate(arms, "lossless-text-kv", baseline)  # type: ignore[arg-type]
    assert len(arms.requests) == lossless_candidate_requests()
    assert arms.dumps == lossless_candidate_dumps() == 1
    assert arms.starts == ["lossless-text-kv"] and lossless_candidate_starts() == 1


@pytest.mark.parametrize("track", ["5s-lossy", "15s-lossy"])
def test_lossy_counts_match_the_gate(track: str, campaign: LoadedCampaign) -> None:
    plan = plan_track(campaign, track)
    seeds = plan.seeds
    assert len(seeds) == 2  # so that "x seeds" is not mistaken for a constant
    arms = CountingArms(plan)
    baseline = lossy.run_baseline(arms)  # type: ignore[arg-type]
    assert len(arms.requests) == lossy_baseline_requests(seeds) == 4
    assert len(arms.starts) == lossy_baseline_starts() == 2
    arms.requests.clear()
    arms.starts.clear()
    # The candidate runs B0's seeds (a baseline whose requests failed still carries them).
    assert tuple(run.seed for run in baseline.runs) == seeds
    lossy.run_candidate(arms, "cache-dit-mild", baseline)  # type: ignore[arg-type]
    assert len(arms.requests) == lossy_candidate_requests(seeds) == 2
    assert arms.starts == ["cache-dit-mild"] and lossy_candidate_starts() == 1
    assert arms.dumps == 0  # no lossy request dumps (the plan sizes none)


@pytest.mark.parametrize("track", ["5s-lossless", "15s-lossless", "5s-lossy", "15s-lossy"])
def test_hosted_gate_counts_match_the_gate(track: str, campaign: LoadedCampaign,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # The gate on the candidate's first latency instance (lossless/lossy.HostedGate), judged as
    # passing, its instance's first measured output back: exactly hosted_gate_requests, and no
    # start of its own (the instance is the latency protocol's).
    plan = plan_track(campaign, track)
    assert hosts_gate(plan)
    arms = CountingArms(plan, latency_s=1.0)
    passed = [SimpleNamespace(status="pass", reason=None, name="x")]
    monkeypatch.setattr(lossless, "judge_gate", lambda *a: [])
    monkeypatch.setattr(lossless, "judge_unobserved", lambda *a: make_check(
        plan.track_id, "c", "unobserved_output", "pass", None, "stand-in"))
    monkeypatch.setattr(lossy, "judge_candidate", lambda *a: passed[0])
    monkeypatch.setattr(lossy, "_score", lambda arms, outcome: ())
    runner = SimpleNamespace(made=lambda arms: SimpleNamespace(
        runs=[SimpleNamespace(seed=s) for s in plan.seeds]))
    gate_class = lossless.HostedGate if plan.quality == "lossless" else lossy.HostedGate
    gate = gate_class(runner, "c")  # type: ignore[arg-type]
    engine = arms.start("c")
    arms.starts.clear()
    gate.before(arms, engine)  # type: ignore[arg-type]
    sample = timed_sample("s", "c", track, "measured", 0, plan.seeds[0], ok=True, status=200,
                          latency_s=1.0)
    run = latency_run.InstanceRun("c", 0, measured=[Outcome(sample, {"video": {}}, (),
                                                            media_path=Path("m.mp4"))])
    gate.after(arms, engine, run)  # type: ignore[arg-type]
    assert len(arms.requests) == hosted_gate_requests(plan)
    assert arms.dumps == (1 if plan.quality == "lossless" else 0)
    assert arms.starts == []


@pytest.mark.parametrize(("design", "instances", "warmups", "repeats", "probe"), [
    ("interleaved", 3, 2, 1, 2), ("interleaved", 2, 3, 2, 5), ("ABA", None, 1, 3, 2),
    ("AB", None, 2, 5, 0), ("ABBA", None, 0, 4, 3)])
def test_latency_counts_match_the_protocol(design: str, instances: int | None, warmups: int,
                                           repeats: int, probe: int,
                                           campaign: LoadedCampaign) -> None:
    plan = plan_track(campaign, "5s-lossless")
    protocol = dataclasses.replace(
        plan.latency, replication="instance" if instances else "request",
        instances_per_arm=instances, ordering=design, warmups=warmups, max_warmups=warmups + 2,
        steady_fraction=0.1 if warmups >= 2 else None, repeats=repeats,
        caching_probe_requests=probe)
    arms = CountingArms(dataclasses.replace(plan, latency=protocol), latency_s=1.0)
    latency.run_latency(arms, "lossless-text-kv")  # type: ignore[arg-type]
    assert len(arms.requests) == latency_requests(protocol, "lossless-text-kv")
    started = 2 * instances if instances else {"ABA": 3, "AB": 2, "ABBA": 4}[design]
    assert len(arms.requests) == started * (warmups + repeats) + probe
    b0_starts, own_starts = latency_arm_starts(protocol, "lossless-text-kv")
    assert arms.starts.count("b0") == b0_starts
    assert arms.starts.count("lossless-text-kv") == own_starts
    assert b0_starts + own_starts == started
    assert arms.dumps == 0  # timed requests never dump (it perturbs timing)


# -- the remaining time ---------------------------------------------------------------------------
def test_eta_from_the_frozen_medians() -> None:
    progress = Progress(progress_plan(), {"5s": 100.0, "15s": 1000.0})
    assert progress.total == 6
    assert progress.eta() == "~25m00s (from the frozen preflight medians)"  # 5 x 100 + 1000
    progress.item_started("a")
    assert progress.request_started() == 1
    # 4 more 5 s, 1 x 15 s, and 70 s left of the running one
    assert progress.eta("5s", 30.0) == "~24m30s (from the frozen preflight medians)"
    # Running past its median counts as nothing left of it, not as negative time.
    assert progress.eta("5s", 500.0) == "~23m20s (from the frozen preflight medians)"


def test_eta_from_the_runs_own_finished_requests() -> None:
    progress = Progress(progress_plan())
    assert progress.eta() == "unknown (no finished request yet)"
    progress.item_started("a")
    progress.request_started()
    progress.request_finished("5s", 3.0, ok=False)  # a fast failure is no estimate
    assert progress.eta() == "unknown (no finished request yet)"
    progress.request_started()
    progress.request_finished("5s", 90.0, ok=True)
    progress.request_started()
    progress.request_finished("5s", 110.0, ok=True)
    progress.item_finished("a")
    # b's own 2 x 5 s at the median 100 s; c's 15 s request not timed yet
    assert progress.eta() == ("~3m20s (estimate from 2 finished requests; "
                              "not yet timed: 1 x 15s)")
    assert progress.total == 3 + 3


def test_eta_prices_engine_starts_and_scoring() -> None:
    plan = Plan({
        "a": (WorkUnit("lossy-baseline/5s-lossy", "5s-lossy", 4, starts=2, scored=4),),
        "b": (WorkUnit("b", "5s-lossless", 2, starts=1),),
    })
    progress = Progress(plan, {"5s": 100.0}, {"5s": 600.0}, {"5s-lossy": 50.0})
    # 6 requests x 100 s + 3 starts x 600 s + 4 scored x 50 s
    assert progress.eta() == "~43m20s (from the frozen preflight medians)"
    assert progress.summary().endswith(
        "3 engine starts (5s) at 600 s, 4 scored outputs (5s-lossy) at 50 s")
    progress.item_started("a")
    progress.engine_started()
    progress.request_started()
    # one start and one request of a's are behind it; its scoring is still to come
    assert progress.remaining_starts() == {"5s": 2}
    assert progress.remaining_scored() == {"5s-lossy": 4}
    assert progress.eta() == "~31m40s (from the frozen preflight medians)"
    progress.item_finished("a")
    assert progress.remaining_scored() == {}
    assert progress.eta() == "~13m20s (from the frozen preflight medians)"


def test_eta_names_the_starts_and_scoring_it_cannot_price() -> None:
    plan = Plan({"a": (WorkUnit("a", "5s-lossy", 2, starts=1, scored=2),)})
    progress = Progress(plan, {"5s": 100.0})
    assert progress.eta() == ("~3m20s (from the frozen preflight medians; not priced: "
                              "1 engine start (5s), scoring 2 outputs (5s-lossy))")
    assert progress.summary().endswith(
        "1 engine start (5s) not priced, 2 scored outputs (5s-lossy) not priced")


def test_a_scenario_that_sends_less_than_planned_shrinks_n() -> None:
    progress = Progress(progress_plan(), {"5s": 1.0, "15s": 1.0})
    progress.item_started("a")
    progress.request_started()
    progress.item_finished("a")  # B0 failed early: one request instead of three
    assert progress.total == 1 + 2 + 1
    progress.item_started("b")  # B0's runs are over: b sends only its own two
    assert progress.remaining_requests() == {"5s": 2, "15s": 1}


# -- what the terminal shows ---------------------------------------------------------------------
def test_plain_lines_start_heartbeat_and_end(pytestconfig: pytest.Config) -> None:
    stream, clock = io.StringIO(), Clock()
    tr = terminal_reporter(pytestconfig, stream)
    reporter = ProgressReporter(Progress(progress_plan(), {"5s": 100.0, "15s": 1000.0}),
                                Terminal(tr), "plain", clock=clock, tick_s=None)
    tr.write("tests/perf/test_latency.py ")
    reporter.progress.item_started("a")
    reporter.on_request_start(REQUEST)
    for now in (59.0, 61.0, 90.0, 119.5, 121.0):
        clock.now = 1000.0 + now
        reporter.tick()
    clock.now = 1000.0 + 130.0
    reporter.on_request_end(REQUEST, request_outcome(True, 129.5))
    reporter.terminal.restore()  # as the plugin does before pytest writes the result
    tr.write(".")
    lines = stream.getvalue().splitlines()
    assert lines[0] == "tests/perf/test_latency.py "
    assert lines[1].startswith("[ref2va] plan: 6 requests (5s: 5, 15s: 1) in 3 scenarios; "
                               "expected per request 5s 100.0 s, 15s 1000.0 s from the frozen")
    assert lines[2] == ("[ref2va] request 1/6 start: 5s-lossless b0 measured seed 42 · run ETA "
                        "~25m00s (from the frozen preflight medians)")
    # one heartbeat per 60 s while it runs: at 61 s and at 121 s, none in between
    assert lines[3] == ("[ref2va] request 1/6 running 1m01s: 5s-lossless b0 measured · run ETA "
                        "~23m59s (from the frozen preflight medians)")
    assert lines[4].startswith("[ref2va] request 1/6 running 2m01s: ")
    assert lines[5] == ("[ref2va] request 1/6 end: 5s-lossless b0 measured: ok 129.5 s, "
                        "complete MP4 · run ETA ~23m20s (from the frozen preflight medians)")
    assert lines[6] == "tests/perf/test_latency.py ."  # pytest's line, back where it was
    assert len(lines) == 7


def test_plain_end_line_names_a_failure(pytestconfig: pytest.Config) -> None:
    stream = io.StringIO()
    reporter = ProgressReporter(Progress(progress_plan()),
                                Terminal(terminal_reporter(pytestconfig, stream)),
                                "plain", clock=Clock(), tick_s=None)
    reporter.on_request_start(REQUEST)
    reporter.on_request_end(REQUEST, request_outcome(False, 0.4))
    reporter.on_request_start(REQUEST)
    reporter.on_request_end(REQUEST, None)
    text = stream.getvalue()
    assert "end: 5s-lossless b0 measured: FAILED 0.4 s: request failed (http_status): HTTP 500" \
        in text
    assert "no outcome (interrupted or raised) after 0s" in text
    assert "run ETA unknown (no finished request yet)" in text  # failures time nothing


@pytest.mark.parametrize(("status", "detail", "said"), [
    (409, "HTTP 409: ref2va-capture-stopped: the capture of the DiT at step 2 is written",
     "stopped 0.4 s: the engine cut it once its capture was written"),
    (409, "HTTP 409: conflict", "FAILED 0.4 s: request failed (http_status): HTTP 409"),
    (500, "HTTP 500: ref2va-capture-stopped: the capture of the DiT at step 2 is written",
     "FAILED 0.4 s: request failed (http_status): HTTP 500"),
])
def test_plain_end_line_tells_a_planned_capture_stop_from_a_failure(
        pytestconfig: pytest.Config, status: int, detail: str, said: str) -> None:
    stream = io.StringIO()
    reporter = ProgressReporter(Progress(progress_plan()),
                                Terminal(terminal_reporter(pytestconfig, stream)),
                                "plain", clock=Clock(), tick_s=None)
    sample = timed_sample("s1", "cand", "5s-lossless", "localize", 1, 42, ok=False,
                          failure="http_status", status=status, detail=detail, latency_s=0.4)
    reporter.on_request_start(REQUEST)
    reporter.on_request_end(REQUEST, Outcome(sample, None, ()))
    text = stream.getvalue()
    assert f"end: 5s-lossless b0 measured: {said}" in text
    # a stopped request is not a whole one: it times nothing for the ETA
    assert "run ETA unknown (no finished request yet)" in text


def test_tty_line_is_rewritten_in_place_and_cleared(pytestconfig: pytest.Config) -> None:
    stream, clock = FakeTTY(), Clock()
    tr = terminal_reporter(pytestconfig, stream)
    reporter = ProgressReporter(Progress(progress_plan(), {"5s": 100.0, "15s": 1000.0}),
                                Terminal(tr), "tty", clock=clock, tick_s=None)
    assert tr.isatty()
    reporter.terminal.line("first")  # the plan line goes first; here written by hand
    reporter.terminal.restore()
    tr.write("tests/perf/test_latency.py ..")
    reporter._announced = True
    reporter.progress.item_started("a")
    reporter.on_request_start(REQUEST)
    assert screen(stream.getvalue())[-1].startswith(
        "[ref2va] request 1/6 5s-lossless b0 measured 0s · run ETA ~25m00s")
    clock.now += 75
    reporter.tick()
    raw = stream.getvalue()
    assert "\r[ref2va] request 1/6 5s-lossless b0 measured 1m15s · run ETA ~23m45s" in raw
    assert raw.count("\n") == 1  # rewritten, never a new line per tick
    reporter.on_request_end(REQUEST, request_outcome(True, 75.0))
    tr.write(".")
    assert screen(stream.getvalue()) == ["first", "tests/perf/test_latency.py ..."]
    # pytest measures its line to place [ nn%]: it must see only its own text there
    assert tr._tw.width_of_current_line == len("tests/perf/test_latency.py ...")

