"""The lossy gate: reduced-VBench relative error below the frozen threshold (quality.md).

Order of judgement for one lossy track:
1. B0's variability first: B0 with the same seeds on two independent instances, and B0 with
   different seeds, every dimension's spread recorded. If the same-seed spread of a gated
   dimension (or their aggregate) is not below the frozen fraction of the threshold, the gate
   cannot decide and the track is inconclusive (`baseline_variability_too_high`).
2. A candidate's output must be comparable with B0's (frame count, fps, size, encoder): a
   mismatch is a failed precondition (`quality_precondition_failed`), never a score.
3. Every gated dimension (and, when frozen so, the aggregate) must differ from B0's by less than
   the threshold, two-sided, for every seed; an open dimension (weights absent) leaves the gate
   open, never passed. Fidelity (PSNR, SSIM, per-frame curves) and audio metrics against B0 are
   reported beside it, since VBench alone stayed within 1% in published caching work while
   fidelity collapsed; fidelity is gated too where the contract freezes a minimum PSNR or SSIM.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .campaign import LossyGate
from .errors import MediaError, Ref2VAError
from .media import probe
from .placeholder import is_placeholder
from .quality.audio import compare_audio_files
from .quality.fidelity import compare_videos
from .quality.pipeline import score_video
from .quality.registry import Score
from .quality.scoring import RelativeError, check_comparable, relative_errors
from .verdicts import CheckResult, GateChecks
from .workload import Arms, Outcome

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScoredOutcome:
    seed: int
    outcome: Outcome
    scores: tuple[Score, ...]


def gate_for(arms: Arms, track_id: str) -> LossyGate:
    gate = arms.campaign.model.tracks[track_id].lossy_gate  # type: ignore[index]
    assert gate is not None  # the campaign refuses a lossy track without one
    return gate


def _score(arms: Arms, track_id: str, outcome: Outcome) -> tuple[Score, ...]:
    if not outcome.complete or outcome.media_path is None:
        return ()
    campaign = arms.campaign
    track = campaign.model.tracks[track_id]  # type: ignore[index]
    weights = {name: Path(w.path) for name, w in campaign.model.scorer_weights.items()}
    pins = {name: w.sha256 for name, w in campaign.model.scorer_weights.items()
            if not is_placeholder(w.sha256)}
    return tuple(score_video(outcome.media_path,
                             reference_image=campaign.resolve(track.inputs.reference_image.path),
                             weights=weights, weight_pins=pins))


def _run_seeds(arms: Arms, track_id: str, arm_id: str, seeds: Sequence[int],
               index: int, record_check: str | None) -> list[ScoredOutcome]:
    engine = arms.start(track_id, arm_id)
    scored = []
    for n, seed in enumerate(seeds):
        outcome = arms.request(engine, track_id, arm_id, kind="quality", index=index * 100 + n,
                               seed=seed, record_check=record_check if n == 0 else None)
        scored.append(ScoredOutcome(seed, outcome, _score(arms, track_id, outcome)))
    arms.registry.stop(engine)
    return scored


def _gated_errors(errors: Sequence[RelativeError], gate: LossyGate) -> list[RelativeError]:
    kinds = {scorer_id.split(".", 1)[0] for scorer_id in gate.gated}
    chosen = [e for e in errors if e.scorer_id in gate.gated]
    if gate.gate_aggregate:
        chosen += [e for e in errors if e.dimension == "aggregate" and e.kind in kinds]
    return chosen


def _errors(candidate: Sequence[Score], baseline: Sequence[Score], gate: LossyGate
            ) -> list[RelativeError]:
    gated = [s for s in candidate if s.scorer.id in gate.gated]
    base = [s for s in baseline if s.scorer.id in gate.gated]
    # The aggregate is over the gated dimensions only: the frozen reduced set.
    return _gated_errors(relative_errors(gated, base, normalized=gate.normalized), gate)


def _spread(candidate: Sequence[Score], baseline: Sequence[Score], gate: LossyGate
            ) -> list[tuple[RelativeError, bool]]:
    """Every dimension's relative error (recorded), and whether it decides (the gated ones and
    their aggregate); aggregates over ungated dimensions would be numbers nobody froze."""
    gated = _errors(candidate, baseline, gate)
    gated_ids = {e.scorer_id for e in gated}
    rest = [e for e in relative_errors(candidate, baseline, normalized=gate.normalized)
            if e.dimension != "aggregate" and e.scorer_id not in gated_ids]
    return [(e, True) for e in gated] + [(e, False) for e in rest]


def _missing_gated(scores: Sequence[Score], gate: LossyGate) -> list[str]:
    found = {s.scorer.id for s in scores}
    return [scorer_id for scorer_id in gate.gated if scorer_id not in found]


@dataclass(frozen=True)
class LossyBaseline(GateChecks):
    """B0's scored reference runs of a lossy track and whether they may be judged against."""

    runs: tuple[ScoredOutcome, ...]  # the reference run, one per seed


def run_baseline(arms: Arms, track_id: str) -> LossyBaseline:
    baseline = _baseline(arms, track_id)
    for check in baseline.checks:
        arms.evidence.add_check(check)
    return baseline


def _baseline(arms: Arms, track_id: str) -> LossyBaseline:
    """B0 twice (independent instances, same seeds); its spread decides whether the gate can."""
    gate = gate_for(arms, track_id)
    seeds = arms.campaign.model.tracks[track_id].request.seeds  # type: ignore[index]
    first = _run_seeds(arms, track_id, "b0", seeds, 0, "b0_media")
    second = _run_seeds(arms, track_id, "b0", seeds, 1, None)
    failed = [r.outcome for r in (*first, *second) if not r.outcome.complete]
    if failed:
        check = CheckResult(track_id, "b0", "baseline_variability", "fail",
                            "baseline_request_failed", failed[0].explain())
        return LossyBaseline(checks=(check,), runs=tuple(first))
    same_seed: dict[str, float] = {}
    decisive: set[str] = set()
    for a, b in zip(first, second, strict=True):
        for error, decides in _spread(b.scores, a.scores, gate):
            decisive |= {error.scorer_id} if decides else set()
            if error.error is not None:
                same_seed[error.scorer_id] = max(same_seed.get(error.scorer_id, 0.0), error.error)
    other_seed: dict[str, float] = {}
    if len(first) > 1:
        for error, _ in _spread(first[1].scores, first[0].scores, gate):
            if error.error is not None:
                other_seed[error.scorer_id] = error.error
    limit = gate.variability_fraction * gate.threshold
    too_wide = {k: v for k, v in same_seed.items() if k in decisive and v >= limit}
    data = {"same_seed_spread": same_seed, "different_seed_spread": other_seed,
            "gated": sorted(decisive), "limit": limit, "threshold": gate.threshold,
            "baseline_scores": [s.to_dict() for s in first[0].scores]}
    if too_wide:
        check = CheckResult(
            track_id, "b0", "baseline_variability", "fail", "baseline_variability_too_high",
            "B0's same-seed spread is not below "
            f"{gate.variability_fraction:g} x {gate.threshold:g}: "
            + ", ".join(f"{k} {v:.4%}" for k, v in sorted(too_wide.items())), data)
    else:
        worst = max(same_seed.values(), default=0.0)
        check = CheckResult(track_id, "b0", "baseline_variability", "pass", None,
                            f"B0 same-seed spread at most {worst:.4%} (limit {limit:.4%})", data)
    return LossyBaseline(checks=(check,), runs=tuple(first))


def judge_candidate(arms: Arms, track_id: str, candidate: str, baseline: LossyBaseline,
                    runs: Sequence[ScoredOutcome]) -> CheckResult:
    gate = gate_for(arms, track_id)
    per_seed: list[dict[str, Any]] = []
    worst: dict[str, float] = {}
    opened: set[str] = set()
    precondition: list[str] = []
    fidelity_broken: list[str] = []
    for base, cand in zip(baseline.runs, runs, strict=True):
        if not cand.outcome.complete or cand.outcome.media_path is None:
            return CheckResult(track_id, candidate, "lossy_gate", "fail",
                               "candidate_request_failed", cand.outcome.explain())
        assert base.outcome.media_path is not None
        try:
            precondition += check_comparable(probe(cand.outcome.media_path),
                                             probe(base.outcome.media_path))
        except MediaError as exc:
            precondition.append(str(exc))
        errors = _errors(cand.scores, base.scores, gate)
        opened |= {e.scorer_id for e in errors if e.status == "open"}
        opened |= set(_missing_gated(cand.scores, gate))
        for e in errors:
            if e.error is not None:
                worst[e.scorer_id] = max(worst.get(e.scorer_id, 0.0), e.error)
        beside = _beside(base.outcome.media_path, cand.outcome.media_path)
        low, unjudged = fidelity_below(beside["fidelity"], gate)
        fidelity_broken += [f"{what} (seed {cand.seed})" for what in low]
        opened |= set(unjudged)
        per_seed.append({"seed": cand.seed, "errors": [_error_dict(e) for e in errors],
                         **beside})
    data = {"threshold": gate.threshold, "normalized": gate.normalized, "worst": worst,
            "min_psnr_db": gate.min_psnr_db, "min_ssim": gate.min_ssim, "per_seed": per_seed}
    if precondition:
        return CheckResult(track_id, candidate, "lossy_gate", "fail",
                           "quality_precondition_failed",
                           "outputs not comparable: " + "; ".join(dict.fromkeys(precondition)),
                           data)
    broken = {k: v for k, v in worst.items() if v >= gate.threshold}
    if broken or fidelity_broken:
        parts = ([f"relative error at or above {gate.threshold:.2%}: " + ", ".join(
            f"{k} {v:.3%}" for k, v in sorted(broken.items(), key=lambda i: -i[1]))]
            if broken else [])
        if fidelity_broken:
            parts.append("fidelity to B0 below the frozen minimum: " + ", ".join(fidelity_broken))
        return CheckResult(track_id, candidate, "lossy_gate", "fail", "quality_gate_failed",
                           "; ".join(parts), data)
    if opened:
        return CheckResult(track_id, candidate, "lossy_gate", "open", None,
                           "cannot decide: open dimensions " + ", ".join(sorted(opened)), data)
    top = max(worst.values(), default=0.0)
    fidelity_note = "".join(
        f", {name} at least {value:g}" for name, value in
        (("PSNR dB", gate.min_psnr_db), ("SSIM", gate.min_ssim)) if value is not None)
    return CheckResult(track_id, candidate, "lossy_gate", "pass", None,
                       f"every gated score within {gate.threshold:.2%} of B0 (worst {top:.3%})"
                       + fidelity_note, data)


def fidelity_below(fidelity: dict[str, Any], gate: LossyGate) -> tuple[list[str], list[str]]:
    """(fidelity minimums this seed missed, fidelity scorers that could not be judged)."""
    wanted = [(scorer_id, key, minimum, unit) for scorer_id, key, minimum, unit in (
        ("fidelity.psnr", "psnr_db", gate.min_psnr_db, " dB"),
        ("fidelity.ssim", "ssim_mean", gate.min_ssim, "")) if minimum is not None]
    if not wanted:
        return [], []
    if "error" in fidelity:
        return [], [scorer_id for scorer_id, *_ in wanted]
    low = []
    for scorer_id, key, minimum, unit in wanted:
        raw = fidelity[key]
        value = math.inf if raw == "inf" else float(raw)  # "inf": every frame identical to B0
        if not value >= minimum:
            low.append(f"{scorer_id} {value:.4g}{unit} < {minimum:g}{unit}")
    return low, []


def _error_dict(error: RelativeError) -> dict[str, Any]:
    return {"scorer": error.scorer_id, "dimension": error.dimension, "kind": error.kind,
            "candidate": error.candidate, "baseline": error.baseline, "error": error.error,
            "status": error.status, "detail": error.detail}


def _beside(baseline: Path, candidate: Path) -> dict[str, Any]:
    """Fidelity (with its per-frame curves) and audio against B0, for the evidence."""
    out: dict[str, Any] = {}
    try:
        out["fidelity"] = compare_videos(candidate, baseline).to_dict()  # curves included
    except Ref2VAError as exc:
        out["fidelity"] = {"error": str(exc)}
    try:
        out["audio"] = compare_audio_files(candidate, baseline).to_dict()
    except (Ref2VAError, ValueError) as exc:
        out["audio"] = {"error": str(exc)}
    return out


def run_candidate(arms: Arms, track_id: str, candidate: str, baseline: LossyBaseline
                  ) -> CheckResult:
    """The candidate on a fresh instance with the track's seeds, judged against B0."""
    seeds = [run.seed for run in baseline.runs]
    runs = _run_seeds(arms, track_id, candidate, seeds, 0, "candidate_media")
    check = judge_candidate(arms, track_id, candidate, baseline, runs)
    arms.evidence.add_check(check)
    return check
