"""The lossy gate's arithmetic on scores: the relative errors of the gated dimensions (and their
aggregate), every other dimension's beside them, the fidelity minimums a seed missed, and the
decision per dimension (`within`, `broken`, `open`) with the evidence it writes."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from ref2va_accept.campaign import LossyGate
from ref2va_accept.evidence import (
    GateDecision,
    GateError,
    RelativeError,
    ScoreRecord,
    WeightRecord,
)
from ref2va_accept.quality import relative_errors

WITHIN: Final[GateDecision] = "within"
BROKEN: Final[GateDecision] = "broken"
OPEN: Final[GateDecision] = "open"

T = TypeVar("T")


def _gated_errors(errors: Sequence[RelativeError], gate: LossyGate) -> list[RelativeError]:
    kinds = {scorer_id.split(".", 1)[0] for scorer_id in gate.gated}
    chosen = [e for e in errors if e.scorer in gate.gated]
    if gate.gate_aggregate:
        chosen += [e for e in errors if e.dimension == "aggregate" and e.kind in kinds]
    return chosen


def _errors(candidate: Sequence[ScoreRecord], baseline: Sequence[ScoreRecord], gate: LossyGate
            ) -> list[RelativeError]:
    gated = [s for s in candidate if s.scorer in gate.gated]
    base = [s for s in baseline if s.scorer in gate.gated]
    # The aggregate is over the gated dimensions only: the frozen reduced set.
    return _gated_errors(relative_errors(gated, base, normalized=gate.normalized), gate)


def _spread(candidate: Sequence[ScoreRecord], baseline: Sequence[ScoreRecord], gate: LossyGate
            ) -> list[tuple[RelativeError, bool]]:
    """Every dimension's relative error (recorded), and whether it decides (the gated ones and
    their aggregate); aggregates over ungated dimensions would be numbers nobody froze."""
    gated = _errors(candidate, baseline, gate)
    gated_ids = {e.scorer for e in gated}
    rest = [e for e in relative_errors(candidate, baseline, normalized=gate.normalized)
            if e.dimension != "aggregate" and e.scorer not in gated_ids]
    return [(e, True) for e in gated] + [(e, False) for e in rest]


def _missing_gated(scores: Sequence[ScoreRecord], gate: LossyGate) -> list[str]:
    found = {s.scorer for s in scores}
    return [scorer_id for scorer_id in gate.gated if scorer_id not in found]


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


def decide(error: RelativeError, threshold: float) -> GateDecision:
    """One dimension of one seed: within the threshold, broken (at or above it), or open."""
    if error.error is None or math.isnan(error.error):
        return OPEN
    return WITHIN if error.error < threshold else BROKEN


def gate_error(error: RelativeError, threshold: float,
               weights: dict[str, list[WeightRecord]]) -> GateError:
    """The evidence of one gated dimension: its relative error, the threshold, the decision and
    (for a model-based score) the weights files that made it."""
    named = {"weights": weights[error.scorer]} if error.scorer in weights else {}
    return GateError.model_validate({**error.model_dump(), "threshold": threshold,
                                     "gate": decide(error, threshold), **named})


def scored_until_broken(outputs: Sequence[tuple[T, Sequence[ScoreRecord]]],
                        score: Callable[[T], tuple[ScoreRecord, ...]], gate: LossyGate
                        ) -> list[tuple[ScoreRecord, ...] | None]:
    """A candidate's outputs, each with its seed's B0 scores, scored in seed order until one
    breaks a gated dimension; None for each output after it, never scored. A dimension broken on
    any seed fails the gate (`quality_gate_failed`), and what is checked before it (a request
    that failed, outputs that cannot be compared) needs no score: the seeds left could change
    neither the verdict nor its reason, only add model time (a 5 s output through CLIP ViT-B/32
    was 27 s of CPU here; on the host, a scoring device's time)."""
    scored: list[tuple[ScoreRecord, ...] | None] = []
    broken = False
    for output, baseline in outputs:
        if broken:
            scored.append(None)
            continue
        scores = score(output)
        scored.append(scores)
        broken = any(decide(e, gate.threshold) == BROKEN
                     for e in _errors(scores, baseline, gate))
    return scored
