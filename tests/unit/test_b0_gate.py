"""B0's quality-gate instances shared by the tracks that ask B0 the same gate request
(b0_gate.py): one pair of B0 instances for a duration's lossless and lossy gates, each track
judging its own B0 from them; counted so by live progress and `plan`."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from ref2va_accept.arms import Outcome, OutcomeLog
from ref2va_accept.campaign import LoadedCampaign, load_campaign
from ref2va_accept.core import Check
from ref2va_accept.evidence import ScoreRecord, WeightRecord
from ref2va_accept.judging import Baselines, GateInstances, run_gate_instances
from ref2va_accept.judging import _lossless as lossless
from ref2va_accept.judging import _lossy as lossy
from ref2va_accept.planning import (
    Prices,
    ScenarioItem,
    TrackPlan,
    campaign_costs,
    cost_lines,
    gate_groups,
    gate_units,
    lossless_baseline_requests,
    lossy_baseline_requests,
    needs,
    plan_campaign,
    plan_run,
)
from tests.unit.suite_runner import ROOT
from tests.unit.timed_samples import timed_sample

pytestmark = pytest.mark.fast

CAMPAIGNS = ("fixtures/campaigns/reference.yaml", "fixtures/campaigns/910c.yaml")


@pytest.fixture(scope="module")
def campaign() -> LoadedCampaign:
    return load_campaign(ROOT / CAMPAIGNS[0])


@pytest.fixture(scope="module")
def plans(campaign: LoadedCampaign) -> dict[str, TrackPlan]:
    return dict(plan_campaign(campaign))


class _Engine:
    def __init__(self, instance_id: str) -> None:
        self.spec = SimpleNamespace(instance_id=instance_id)


class Arms:
    """Arms as the gates use them: every request fails at once (recorded, judged as such) and
    is logged with its track; the engines started are counted; `for_track` shares the logs."""

    def __init__(self, plan: TrackPlan, log: list[tuple[str, str, str, int | None, bool]],
                 starts: list[str], stops: list[str]) -> None:
        self.plan, self.log, self.starts, self.stops = plan, log, starts, stops
        self.outcomes = OutcomeLog()
        self.checks: list[Any] = []
        self.evidence = SimpleNamespace(add_check=self.checks.append, note=lambda text: None)
        self.registry = SimpleNamespace(stop=lambda engine: stops.append(engine.spec.instance_id))

    def for_track(self, plan: TrackPlan) -> Arms:
        return Arms(plan, self.log, self.starts, self.stops)

    def start(self, arm_id: str) -> _Engine:
        self.starts.append(f"{self.plan.track_id}.{arm_id}.{len(self.starts)}")
        return _Engine(self.starts[-1])

    def request(self, engine: _Engine, arm_id: str, *, kind: str, index: int,
                seed: int | None = None, diagnostics_points: tuple[str, ...] = (),
                **_: object) -> Outcome:
        seed = self.plan.seeds[0] if seed is None else seed
        self.log.append((self.plan.track_id, engine.spec.instance_id, kind, seed,
                         bool(diagnostics_points)))
        sample = timed_sample("s", arm_id, self.plan.track_id, kind, index, seed, ok=False,
                              failure="counted", detail="not sent")
        return Outcome(sample, None, ())


def _arms(plans: dict[str, TrackPlan], *tracks: str) -> dict[str, Arms]:
    log: list[Any] = []
    starts: list[str] = []
    stops: list[str] = []
    first = Arms(plans[tracks[0]], log, starts, stops)
    return {t: first if t == tracks[0] else first.for_track(plans[t]) for t in tracks}


@pytest.mark.parametrize("path", CAMPAIGNS)
def test_each_durations_lossless_and_lossy_gates_are_one_group(path: str) -> None:
    groups = gate_groups(plan_campaign(load_campaign(ROOT / path)))
    assert groups["5s-lossless"] == groups["5s-lossy"] == ("5s-lossless", "5s-lossy")
    assert groups["15s-lossless"] == groups["15s-lossy"] == ("15s-lossless", "15s-lossy")


def test_a_track_asking_another_request_is_its_own_group(plans: dict[str, TrackPlan]) -> None:
    other = dataclasses.replace(plans["5s-lossy"], seeds=(plans["5s-lossy"].seeds[0] + 1,
                                                          *plans["5s-lossy"].seeds[1:]))
    groups = gate_groups({"5s-lossless": plans["5s-lossless"], "5s-lossy": other})
    assert groups == {"5s-lossless": ("5s-lossless",), "5s-lossy": ("5s-lossy",)}


def test_one_pair_of_instances_answers_both_gates(plans: dict[str, TrackPlan]) -> None:
    runners = _arms(plans, "5s-lossless", "5s-lossy")
    runs = run_gate_instances(runners)
    arms = runners["5s-lossless"]
    seeds = plans["5s-lossy"].seeds
    assert plans["5s-lossless"].seeds[0] == seeds[0]
    # Two starts, not four; each stopped before the next started.
    assert len(arms.starts) == 2 and arms.stops == arms.starts
    first, second = arms.starts
    # Per instance: the lossless watched request (comparison points), then the lossy seeds; the
    # lossless unobserved request is the lossy first-seed one of the first instance.
    assert arms.log == [
        ("5s-lossless", first, "quality", seeds[0], True),
        *[("5s-lossy", first, "quality", s, False) for s in seeds],
        ("5s-lossless", second, "quality", seeds[0], True),
        *[("5s-lossy", second, "quality", s, False) for s in seeds]]
    assert len(arms.log) == 2 + lossy_baseline_requests(seeds) == (
        lossless_baseline_requests() + lossy_baseline_requests(seeds) - 1)
    assert runs.shared and runs.tracks == ("5s-lossless", "5s-lossy")

    # Each track judges its own B0 from them, and says that the instances were shared.
    baseline = lossless.run_baseline(arms, runs)  # type: ignore[arg-type]
    (check,) = baseline.checks
    assert check.name == Check.BASELINE_DETERMINISM and check.status == "fail"  # failed requests
    data = check.json_dict()["data"]
    assert data["gate_instances_served"] == ["5s-lossless", "5s-lossy"]
    assert data["unobserved_request"] == {"track": "5s-lossy", "kind": "quality"}
    assert check.detail.endswith("(B0's gate instances served 5s-lossless+5s-lossy)")
    scored = lossy.run_baseline(runners["5s-lossy"], runs)  # type: ignore[arg-type]
    assert [r.outcome for r in scored.runs] == [runs.plain[0][s] for s in seeds]
    assert scored.checks[0].json_dict()["data"]["gate_instances_served"] == ["5s-lossless",
                                                                            "5s-lossy"]
    assert runners["5s-lossy"].checks == list(scored.checks)
    assert "(B0's gate instances served 5s-lossless+5s-lossy)" in scored.checks[0].detail
    assert len(arms.starts) == 2  # judging started nothing more


CLIP = WeightRecord(name="ViT-B-32.pt", sha256="86a40ba7e120" + "0" * 52, stand_in=True,
                    declared=True)


def _model_scored(arms: Any, outcome: Outcome) -> tuple[ScoreRecord, ...]:
    """A model-based score of each output, named with the weights that made it."""
    return (ScoreRecord(dimension="background_consistency", kind="vbench",
                        scorer="vbench.background_consistency", version="test", weights=[CLIP],
                        value=0.98, status="ok", detail="", extra={}),)


def test_shared_instances_leave_the_scorer_weights_check_as_made(
        plans: dict[str, TrackPlan], monkeypatch: pytest.MonkeyPatch) -> None:
    # A lossy track scored with a model (the reference campaign's stand-in CLIP) and its
    # lossless twin in one session: B0's checks say the instances were shared, but which weights
    # scored B0 is not about the instances, and its record has no field to say so (a session
    # of `-m 5s` on the reference campaign failed every scenario of both tracks on it).
    monkeypatch.setattr(lossy, "_score", _model_scored)
    runners = _arms(plans, "5s-lossless", "5s-lossy")
    runs = run_gate_instances(runners)
    scored = lossy.run_baseline(runners["5s-lossy"], runs)  # type: ignore[arg-type]
    variability, weights = scored.checks
    assert variability.name == Check.BASELINE_VARIABILITY
    assert variability.json_dict()["data"]["gate_instances_served"] == ["5s-lossless",
                                                                        "5s-lossy"]
    assert weights.name == Check.SCORER_WEIGHTS and weights.status == "pass"
    assert "gate_instances_served" not in weights.json_dict()["data"]
    assert "served" not in weights.detail and "ViT-B-32.pt" in weights.detail
    assert runners["5s-lossy"].checks == [variability, weights]
    # The same checks from instances of its own: the weights check is the same record.
    alone = _arms(plans, "5s-lossy")["5s-lossy"]
    own = lossy.run_baseline(alone, run_gate_instances({"5s-lossy": alone}))  # type: ignore
    assert own.checks[1] == weights


def test_a_reference_run_that_failed_is_not_made_again(plans: dict[str, TrackPlan]) -> None:
    baselines = Baselines()
    made: list[str] = []

    def broken() -> object:
        made.append("tried")
        raise ValueError("B0 could not be judged")

    for _ in range(3):  # each scenario that needs it fails with the same error
        with pytest.raises(ValueError, match="could not be judged"):
            baselines.get_or_make("lossy", "5s-lossy", broken)
    assert made == ["tried"]
    # Another track's, or another gate's, is its own.
    assert baselines.get_or_make("lossless", "5s-lossy", lambda: "made") == "made"
    assert baselines.get_or_make("lossless", "5s-lossy", broken) == "made"


@pytest.mark.parametrize("track", ["5s-lossless", "5s-lossy"])
def test_a_track_alone_runs_its_gate_as_before(plans: dict[str, TrackPlan], track: str) -> None:
    runners = _arms(plans, track)
    run_gate_instances(runners)
    arms = runners[track]
    seeds = plans[track].seeds
    assert len(arms.starts) == 2
    kinds = [(kind, seed, dumps) for _, _, kind, seed, dumps in arms.log]
    if track == "5s-lossless":
        assert kinds == [("quality", seeds[0], True), ("unobserved", seeds[0], False),
                         ("quality", seeds[0], True)]
    else:
        assert kinds == [("quality", s, False) for s in seeds] * 2
    assert len(arms.log) == sum(u.requests for u in gate_units({track: plans[track]}))


def test_the_session_makes_a_groups_instances_once(plans: dict[str, TrackPlan]) -> None:
    instances = GateInstances()
    instances.share(gate_groups(plans), plans, ["5s-lossless", "5s-lossy"])
    arms = _arms(plans, "5s-lossless")["5s-lossless"]
    runs = instances.runs(arms)  # type: ignore[arg-type]
    again = instances.runs(arms.for_track(plans["5s-lossy"]))  # type: ignore[arg-type]
    assert runs is again and len(arms.starts) == 2
    # A track whose group-mate has no quality scenario in the session keeps its own.
    alone = GateInstances()
    alone.share(gate_groups(plans), plans, ["5s-lossy"])
    assert alone.group("5s-lossy") == ("5s-lossy",)
    assert GateInstances().group("5s-lossy") == ("5s-lossy",)


@pytest.mark.parametrize("tracks", [("5s-lossless", "5s-lossy"), ("5s-lossless",),
                                    ("5s-lossy",), ("15s-lossless", "15s-lossy")])
def test_gate_units_count_what_the_instances_do(plans: dict[str, TrackPlan],
                                                tracks: tuple[str, ...]) -> None:
    runners = _arms(plans, *tracks)
    run_gate_instances(runners)
    arms = runners[tracks[0]]
    units = gate_units({t: plans[t] for t in tracks})
    assert sum(u.starts for u in units) == len(arms.starts) == 2
    assert sum(u.dumps for u in units) == sum(1 for *_, dumps in arms.log if dumps)
    for unit in units:
        assert unit.requests == sum(1 for t, *_ in arms.log if t == unit.track)
        own = plans[unit.track]
        assert unit.scored == (2 * len(own.seeds) if own.quality == "lossy" else 0)
    assert set(needs({t: plans[t] for t in tracks}).watched) == {
        t for t in tracks if plans[t].quality == "lossless"}


def test_live_progress_plans_a_groups_instances_once(plans: dict[str, TrackPlan]) -> None:
    items = [ScenarioItem(f"q::{f}[{t}]", f"test_{q}.py", f, t, None)
             for t, q, f in (("5s-lossless", "lossless", "test_baseline_reproduces_itself"),
                             ("5s-lossy", "lossy",
                              "test_baseline_variability_leaves_room_to_decide"))]
    together = plan_run(items, plans)
    units = together.units()
    gate = [u for k, u in units.items() if k.startswith("b0-gate/")]
    assert sum(u.starts for u in gate) == 2
    seeds = plans["5s-lossy"].seeds
    assert together.total == 2 + 2 * len(seeds)
    # Either track alone plans its own pair.
    assert plan_run(items[:1], plans).total == lossless_baseline_requests()
    assert plan_run(items[1:], plans).total == lossy_baseline_requests(seeds)


def test_plan_counts_a_groups_gate_instances_once(campaign: LoadedCampaign,
                                                  plans: dict[str, TrackPlan]) -> None:
    prices = Prices.of(campaign)
    shared = campaign_costs(plans, prices)
    alone = campaign_costs(plans, prices, share=False)
    starts = sum(c.b0_gate.starts for c in shared)
    assert starts == 4 and sum(c.b0_gate.starts for c in alone) == 8  # two groups, four tracks
    requests = sum(c.b0_gate.requests.most for c in shared)
    assert requests == sum(c.b0_gate.requests.most for c in alone) - 2  # one per group
    # B0's latency instances are as before: once per baseline group when shared.
    per_arm = plans["5s-lossy"].latency.instances_per_arm
    assert sum(c.b0_latency.starts for c in shared) == 2 * per_arm
    assert any("B0's gate instances shared" in line for line in cost_lines(plans, prices))
