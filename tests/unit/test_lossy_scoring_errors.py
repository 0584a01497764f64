"""No scorer error escapes the lossy gate: a video that cannot be scored leaves every dimension
in error with the reason, and the gate open (never a crash at B0, never a pass)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ref2va_accept import quality
from ref2va_accept.campaign import LossyGate
from ref2va_accept.judging import _lossy as lossy
from ref2va_accept.judging import _lossy_errors as lossy_errors
from ref2va_accept.quality._registry import SCORERS, ScorerError, ok_score

pytestmark = pytest.mark.fast

GATED = ["vbench.temporal_flickering", "proxy.subject_consistency.ssim"]


def _arms_and_outcome(tmp_path: Path) -> tuple[Any, Any]:
    media = tmp_path / "b0.mp4"
    media.write_bytes(b"not scored here")
    plan = SimpleNamespace(
        track_id="5s-lossy",
        lossy=SimpleNamespace(weights={}, weight_pins={}, stand_ins=frozenset(), device="cpu"),
        inputs=SimpleNamespace(reference_image=SimpleNamespace(path=tmp_path / "ref.png")))
    outcome = SimpleNamespace(complete=True, media_path=media,
                              sample=SimpleNamespace(arm="b0", seed=42))
    return SimpleNamespace(plan=plan), outcome


def test_a_scorer_error_puts_every_dimension_in_error_and_the_gate_open(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise ScorerError("b0.mp4: unknown weights name(s) clip_vitl14_laion")

    monkeypatch.setattr(quality, "score_video", broken)
    arms, outcome = _arms_and_outcome(tmp_path)
    scores = lossy._score(arms, outcome)  # returns; nothing raised
    assert {s.scorer for s in scores} == {i for i, info in SCORERS.items()
                                             if info.kind != "fidelity"}
    assert all(s.status == "error" and s.value is None for s in scores)
    assert all("scoring failed: b0.mp4: unknown weights name(s)" in s.detail for s in scores)
    # Against a B0 that scored, each gated dimension is open: the gate cannot decide.
    gate = LossyGate(gated=GATED)
    baseline = [ok_score(SCORERS[i], 0.9) for i in GATED]
    errors = lossy_errors._errors(scores, baseline, gate)
    assert errors and all(lossy_errors.decide(e, gate.threshold) == lossy_errors.OPEN
                          for e in errors)


def test_a_video_that_scores_is_scored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The same path without a failure gives the scorer's values, untouched.
    scored = [ok_score(SCORERS[i], 0.5) for i in GATED]
    monkeypatch.setattr(quality, "score_video", lambda *_, **__: scored)
    arms, outcome = _arms_and_outcome(tmp_path)
    assert lossy._score(arms, outcome) == tuple(scored)


# ---- a candidate's seeds are scored until one breaks the gate -------------------------------

def _scoring(values: dict[str, float]) -> tuple[list[str], Any]:
    """A scorer that hands each output's planted flicker score and notes which it scored."""
    scored: list[str] = []

    def score(output: str) -> tuple[Any, ...]:
        scored.append(output)
        value = values[output]
        return (ok_score(SCORERS[GATED[0]], value) if not math.isnan(value) else
                quality.error_score(SCORERS[GATED[0]], "weights missing"),)
    return scored, score


B0_SCORES = [ok_score(SCORERS[GATED[0]], 0.9)]


@pytest.mark.parametrize(("values", "expected"), [
    # Within on every seed: each seed is scored.
    ({"s42": 0.9, "s43": 0.901, "s44": 0.9}, ["s42", "s43", "s44"]),
    # Broken on the second: the third is never scored.
    ({"s42": 0.9, "s43": 0.8, "s44": 0.9}, ["s42", "s43"]),
    # Broken on the first: only the first.
    ({"s42": 0.8, "s43": 0.9, "s44": 0.9}, ["s42"]),
    # An open dimension decides nothing: scoring goes on.
    ({"s42": float("nan"), "s43": 0.9, "s44": 0.8}, ["s42", "s43", "s44"]),
])
def test_a_candidates_seeds_are_scored_until_one_breaks_the_gate(
        values: dict[str, float], expected: list[str]) -> None:
    scored, score = _scoring(values)
    found = lossy_errors.scored_until_broken([(o, B0_SCORES) for o in values], score,
                                             LossyGate(gated=GATED[:1]))
    assert scored == expected
    assert [s is not None for s in found] == [o in expected for o in values]


def test_the_candidate_check_is_handed_each_seed_scored_or_why_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The gate judged (judge_candidate, planted) receives every seed: those scored with their
    # scores, those after the seed that broke the gate with none and that seed named.
    values = {42: 0.9, 43: 0.8, 44: 0.9}
    scored: list[int] = []
    handed: list[Any] = []

    def score(_arms: Any, outcome: Any) -> tuple[Any, ...]:
        scored.append(outcome.seed)
        return (ok_score(SCORERS[GATED[0]], values[outcome.seed]),)

    monkeypatch.setattr(lossy, "_score", score)
    monkeypatch.setattr(lossy, "judge_candidate",
                        lambda track, gate, c, b, runs: handed.extend(runs) or "judged")
    monkeypatch.setattr(lossy, "record", lambda arms, checks: checks)
    arms = SimpleNamespace(plan=SimpleNamespace(
        track_id="5s-lossy", lossy=SimpleNamespace(gate=LossyGate(gated=GATED[:1]))))
    baseline = SimpleNamespace(runs=[SimpleNamespace(seed=s, scores=B0_SCORES) for s in values])
    outcomes = [SimpleNamespace(seed=s) for s in values]
    assert lossy._judged(arms, "c1", baseline, outcomes)[0] == "judged"  # type: ignore[arg-type]
    assert scored == [42, 43]
    assert [(r.seed, r.not_scored, len(r.scores)) for r in handed] == [
        (42, None, 1), (43, None, 1), (44, "seed 43 broke the gate first", 0)]
    # Nothing broken: every seed scored, none marked.
    values[43] = 0.9
    scored.clear(), handed.clear()
    lossy._judged(arms, "c1", baseline, outcomes)  # type: ignore[arg-type]
    assert scored == [42, 43, 44] and all(r.not_scored is None for r in handed)
