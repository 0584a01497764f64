"""B0's second instance on a lossy track: an output that is the first's bytes is scored once on
the CPU (whose scoring repeats itself), and every other output is scored; the baseline-
variability check says which seeds were scored once (judging/_lossy.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ref2va_accept.arms import Outcome
from ref2va_accept.campaign import load_campaign
from ref2va_accept.evidence import ScoreRecord
from ref2va_accept.judging import _lossy as lossy
from ref2va_accept.judging._b0_gate import GateRuns
from ref2va_accept.planning import TrackPlan, plan_campaign
from ref2va_accept.quality import SCORERS
from ref2va_accept.quality._registry import ok_score
from tests.unit.suite_runner import ROOT
from tests.unit.timed_samples import timed_sample

pytestmark = pytest.mark.fast

TRACK = "5s-lossy"


@pytest.fixture(scope="module")
def plan() -> TrackPlan:
    return dict(plan_campaign(load_campaign(ROOT / "fixtures/campaigns/reference.yaml")))[TRACK]


def _outcome(plan: TrackPlan, instance: int, seed: int, body: str | None) -> Outcome:
    """A complete output whose body hashes to `body` (None: the request failed)."""
    sample = timed_sample(f"{instance}-{seed}", "b0", plan.track_id, "quality", instance * 100,
                          seed, ok=body is not None, sha256=body,
                          failure=None if body else "http_error")
    return Outcome(sample, {"frames": 124} if body else None, (), Path(f"{instance}-{seed}.mp4"))


class _Arms:
    def __init__(self, plan: TrackPlan) -> None:
        self.plan = plan
        self.checks: list[Any] = []
        self.evidence = SimpleNamespace(add_check=self.checks.append, note=lambda text: None)


def _run(plan: TrackPlan, monkeypatch: pytest.MonkeyPatch, second_bodies: dict[int, str | None],
         ) -> tuple[Any, list[str], dict[str, Any]]:
    """B0's baseline from two instances: the first's seeds give bodies "a<seed>", the second's
    `second_bodies`; every scoring is logged and gives each gated dimension the same value."""
    scored: list[str] = []

    def score(arms: Any, outcome: Outcome) -> tuple[ScoreRecord, ...]:
        scored.append(outcome.sample.sample_id)
        return tuple(ok_score(SCORERS[s], 0.9) for s in plan.lossy.gate.gated if s in SCORERS)

    monkeypatch.setattr(lossy, "_score", score)
    runs = GateRuns((plan.track_id,))
    runs.plain = [{s: _outcome(plan, 1, s, f"a{s}") for s in plan.seeds},
                  {s: _outcome(plan, 2, s, second_bodies[s]) for s in plan.seeds}]
    arms = _Arms(plan)
    baseline = lossy.run_baseline(arms, runs)  # type: ignore[arg-type]
    (check, *_) = baseline.checks
    return check, scored, check.json_dict()["data"]


def test_the_first_instances_bytes_again_are_scored_once_on_the_cpu(
        plan: TrackPlan, monkeypatch: pytest.MonkeyPatch) -> None:
    assert plan.lossy.device == "cpu" and len(plan.seeds) == 2
    first, other = plan.seeds
    check, scored, data = _run(plan, monkeypatch, {first: f"a{first}", other: "b"})
    # The second instance's first seed gave the same bytes: not scored again; the other seed's
    # output differs and is scored.
    assert scored == [f"1-{first}", f"1-{other}", f"2-{other}"]
    assert check.status == "pass"
    assert data["same_bytes_scored_once"] == [first]
    assert all(v == 0.0 for v in data["same_seed_spread"].values())
    assert check.detail.endswith(f"seed(s) {first}: the second instance gave the first's bytes, "
                                 "scored once (CPU scoring repeats itself)")


def test_outputs_that_differ_failed_or_are_scored_off_the_cpu_are_each_scored(
        plan: TrackPlan, monkeypatch: pytest.MonkeyPatch) -> None:
    first, other = plan.seeds
    # Different bytes: scored, and no seed is said to be scored once.
    check, scored, data = _run(plan, monkeypatch, {first: "x", other: "y"})
    assert len(scored) == 4 and "same_bytes_scored_once" not in data
    assert "scored once" not in check.detail
    # The same bytes, but scored on an accelerator, whose scoring need not repeat itself: the
    # rescoring is what measures the scorer's own spread.
    on_npu = dataclasses.replace(plan, gate=dataclasses.replace(plan.lossy, device="npu:0"))
    check, scored, data = _run(on_npu, monkeypatch, {s: f"a{s}" for s in plan.seeds})
    assert len(scored) == 4 and "same_bytes_scored_once" not in data
    # A failed request is not "the same bytes" (it has none): B0's check fails on it.
    check, scored, data = _run(plan, monkeypatch, {first: None, other: f"a{other}"})
    assert check.status == "fail" and check.reason == "baseline_request_failed"
    assert "same_bytes_scored_once" not in data and "scored once" not in check.detail


def test_same_bytes_needs_two_complete_outputs_with_one_hash(plan: TrackPlan) -> None:
    seed = plan.seeds[0]
    a, b = _outcome(plan, 1, seed, "h"), _outcome(plan, 2, seed, "h")
    assert lossy.same_bytes(a, b)
    assert not lossy.same_bytes(a, _outcome(plan, 2, seed, "other"))
    assert not lossy.same_bytes(a, _outcome(plan, 2, seed, None))
    unhashed = Outcome(a.sample.model_copy(update={"sha256": None}), a.media, (), a.media_path)
    assert not lossy.same_bytes(unhashed, unhashed)
