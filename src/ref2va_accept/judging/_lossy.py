"""The lossy gate: reduced-VBench relative error below the frozen threshold (docs/quality.md).

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

Every decision is recorded where it is made, so the report only renders it: per candidate, seed
and dimension the relative error, the threshold and `within` / `broken` / `open`; per B0 scorer
whether its same-seed spread is below the limit.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ref2va_accept.arms import Arms, Outcome
from ref2va_accept.campaign import LossyGate
from ref2va_accept.core import ArmRole, Check, CheckStatus, MediaError, Reason, Ref2VAError
from ref2va_accept.evidence import (
    AnyCheck,
    ScoreRecord,
    WeightRecord,
    new_check,
)
from ref2va_accept.judging._b0_gate import GateRuns
from ref2va_accept.judging._gate_run import GateOnInstance, record, reference_run
from ref2va_accept.judging._gates import BaselineGateRunner
from ref2va_accept.judging._lossy_errors import (
    BROKEN,
    _errors,
    _missing_gated,
    _spread,
    decide,
    fidelity_below,
    gate_error,
    scored_until_broken,
)
from ref2va_accept.judging._verdicts import GateChecks
from ref2va_accept.media import probe
from ref2va_accept.planning import hosted_gate_warmups
from ref2va_accept.quality import (
    SCORERS,
    ScorerError,
    check_comparable,
    error_score,
)

if TYPE_CHECKING:
    from ref2va_accept.engines import EngineInstance
    from ref2va_accept.judging._latency_run import InstanceRun

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScoredOutcome:
    seed: int
    outcome: Outcome
    scores: tuple[ScoreRecord, ...]
    # Not scored: the scores are those of the same bytes from B0's first instance (_second_scored)
    scored_once: bool = False
    # A candidate's seed left unscored (scored_until_broken): why, for the evidence
    not_scored: str | None = None


# Per candidate, seed and dimension: what the gate decided.


# What score_video scores (fidelity is judged apart, against B0): a scoring failure puts each of
# these in error rather than leaving them missing.
_VIDEO_SCORERS = tuple(info for info in SCORERS.values() if info.kind != "fidelity")


def _score(arms: Arms, outcome: Outcome) -> tuple[ScoreRecord, ...]:
    if not outcome.complete or outcome.media_path is None:
        return ()
    plan = arms.plan
    scoring = plan.lossy
    from ref2va_accept.quality import score_video  # noqa: PLC0415 - OpenCV, torch
    try:
        return tuple(score_video(outcome.media_path,
                                 reference_image=plan.inputs.reference_image.path,
                                 weights=dict(scoring.weights),
                                 weight_pins=dict(scoring.weight_pins),
                                 stand_ins=scoring.stand_ins, device=scoring.device))
    except ScorerError as exc:
        # No scorer error escapes the gate: every dimension of this output is in error with the
        # reason, so the gate (or B0's spread) is open, never a crash and never a pass.
        reason = f"scoring failed: {exc}"
        log.warning("%s %s seed %s: %s", plan.track_id, outcome.sample.arm, outcome.sample.seed,
                    reason)
        return tuple(error_score(info, reason) for info in _VIDEO_SCORERS)


def _run_seeds(arms: Arms, arm_id: str, seeds: Sequence[int],
               index: int, record_check: Check | None) -> list[Outcome]:
    """The seeds on a fresh instance, stopped before any is scored: a scoring device may be one
    the engine holds, and the instance would only idle while the CPU scores."""
    engine = arms.start(arm_id)
    try:
        return _requests(arms, engine, arm_id, seeds, index, record_check)
    finally:
        arms.registry.stop(engine)


def _requests(arms: Arms, engine: EngineInstance, arm_id: str, seeds: Sequence[int],
              index: int, record_check: Check | None) -> list[Outcome]:
    return [arms.request(engine, arm_id, kind="quality", index=index * 100 + n, seed=seed,
                         record_check=record_check if n == 0 else None)
            for n, seed in enumerate(seeds)]


@dataclass(frozen=True)
class LossyBaseline(GateChecks):
    """B0's scored reference runs of a lossy track and whether they may be judged against."""

    runs: tuple[ScoredOutcome, ...]  # the reference run, one per seed


def run_baseline(arms: Arms, runs: GateRuns | None = None) -> LossyBaseline:
    """B0 twice (independent instances, the track's seeds on each), scored; `runs`: the
    instances this track shares with others of its gate group (judging/_b0_gate.py)."""
    plan = arms.plan

    def judged(runs: GateRuns) -> tuple[LossyBaseline, dict[str, object]]:
        made_first, made_second = runs.plain
        first = [ScoredOutcome(seed, made_first[seed], _score(arms, made_first[seed]))
                 for seed in plan.seeds]
        second = [_second_scored(arms, a, made_second[a.seed]) for a in first]
        baseline = _baseline(arms, first, second)
        weights = weights_check(plan.track_id, ArmRole.B0, [*first, *second])
        if weights is not None:
            # A part of B0's reference: scores that decide nothing leave it not judged against.
            baseline = dataclasses.replace(baseline, checks=(*baseline.checks, weights))
        return baseline, {}

    return reference_run(arms, runs, judged)


# The scoring device whose scores repeat themselves exactly: the same bytes scored twice on the
# CPU give the same records (test_scoring_repeats_itself_on_the_cpu checks every scorer). Another
# device may not (an accelerator's kernels need not be deterministic): there the same-seed spread
# is the scorer's own too, so each output is scored.
REPEATABLE_SCORING_DEVICE = "cpu"


def same_bytes(a: Outcome, b: Outcome) -> bool:
    """Both complete and byte-identical (the sha256 of each response body)."""
    return (a.complete and b.complete and a.sample.sha256 is not None
            and a.sample.sha256 == b.sample.sha256)


def _second_scored(arms: Arms, first: ScoredOutcome, outcome: Outcome) -> ScoredOutcome:
    """B0's second instance for a seed, scored; where its output is the first's bytes and the
    scorer repeats itself (the CPU), the first's scores instead of scoring the same bytes again
    (a 5 s output is about 13 s of CPU with the CLIP-based dimension): the same-seed spread is
    then 0 by what was observed, the bytes, and the baseline-variability check says so."""
    if (arms.plan.lossy.device == REPEATABLE_SCORING_DEVICE and first.scores
            and same_bytes(first.outcome, outcome)):
        return ScoredOutcome(first.seed, outcome, first.scores, scored_once=True)
    return ScoredOutcome(first.seed, outcome, _score(arms, outcome))


def _baseline(arms: Arms, first: list[ScoredOutcome], second: list[ScoredOutcome]
              ) -> LossyBaseline:
    """B0 twice (independent instances, same seeds); its spread decides whether the gate can."""
    plan = arms.plan
    track_id, gate = plan.track_id, plan.lossy.gate
    failed = [r.outcome for r in (*first, *second) if not r.outcome.complete]
    if failed:
        check = new_check(track_id, ArmRole.B0, Check.BASELINE_VARIABILITY, CheckStatus.FAIL,
                          Reason.BASELINE_REQUEST_FAILED, failed[0].explain())
        return LossyBaseline(checks=(check,), runs=tuple(first))
    same_seed: dict[str, float] = {}
    decisive: set[str] = set(gate.gated)
    unmeasured: set[str] = set()  # gated, but no same-seed spread on some seed
    for a, b in zip(first, second, strict=True):
        measured: set[str] = set()
        for error, decides in _spread(b.scores, a.scores, gate):
            decisive |= {error.scorer} if decides else set()
            if error.error is not None and not math.isnan(error.error):
                measured.add(error.scorer)
                seen = same_seed.get(error.scorer)
                same_seed[error.scorer] = error.error if seen is None else max(seen,
                                                                                  error.error)
        unmeasured |= decisive - measured
    other_seed: dict[str, float] = {}
    if len(first) > 1:
        for error, _ in _spread(first[1].scores, first[0].scores, gate):
            if error.error is not None:
                other_seed[error.scorer] = error.error
    limit = gate.variability_fraction * gate.threshold
    below = {k: v < limit for k, v in same_seed.items() if k in decisive}
    too_wide = {k: v for k, v in same_seed.items() if k in decisive and not below[k]}
    data = {"same_seed_spread": same_seed, "different_seed_spread": other_seed,
            "gated": sorted(decisive), "limit": limit, "threshold": gate.threshold,
            "below_limit": below, "unmeasured": sorted(unmeasured),
            "baseline_scores": [s.json_dict() for s in first[0].scores]}
    once = [b.seed for b in second if b.scored_once]
    if once:
        data["same_bytes_scored_once"] = once
    said_once = (f"; seed(s) {', '.join(map(str, once))}: the second instance gave the first's "
                 "bytes, scored once (CPU scoring repeats itself)") if once else ""
    if too_wide:
        check = new_check(
            track_id, ArmRole.B0, Check.BASELINE_VARIABILITY, CheckStatus.FAIL,
            Reason.BASELINE_VARIABILITY_TOO_HIGH,
            "B0's same-seed spread is not below "
            f"{gate.variability_fraction:g} x {gate.threshold:g}: "
            + ", ".join(f"{k} {v:.4%}" for k, v in sorted(too_wide.items())) + said_once, data)
    elif unmeasured:
        # A spread that could not be computed is not a spread of 0: nothing was compared there.
        check = new_check(track_id, ArmRole.B0, Check.BASELINE_VARIABILITY, CheckStatus.OPEN,
                          None, "B0's same-seed spread could not be computed for gated "
                          + ", ".join(sorted(unmeasured)) + said_once, data)
    else:
        worst = max(v for k, v in same_seed.items() if k in decisive)
        check = new_check(track_id, ArmRole.B0, Check.BASELINE_VARIABILITY, CheckStatus.PASS,
                          None, f"B0 same-seed spread at most {worst:.4%} over "
                          f"{len(below)} gated scores (limit {limit:.4%}){said_once}", data)
    return LossyBaseline(checks=(check,), runs=tuple(first))


def weights_check(track_id: str, arm: str, runs: Sequence[ScoredOutcome]
                  ) -> AnyCheck | None:
    """Which weights files made the arm's model-based scores (None: no model scored). A seeded
    stand-in (declared by the campaign, or recognised by its bytes: known_standins) is named;
    one the campaign does not declare fails the check with a validity reason, since its scores
    are not VBench's and can decide no lossy verdict."""
    seen: dict[tuple[str, str], WeightRecord] = {}
    for run in runs:
        for score in run.scores:
            for identity in score.weights:
                seen.setdefault((identity.name, identity.sha256), identity)
    if not seen:
        return None
    files = sorted(seen.values(), key=lambda w: (w.name, w.sha256))
    undeclared = [w for w in files if w.stand_in and not w.declared]
    stand_ins = [w.name for w in files if w.stand_in]
    data = {"weights": [w.json_dict() for w in files], "stand_ins": stand_ins,
            "undeclared": [w.name for w in undeclared]}
    if undeclared:
        return new_check(
            track_id, arm, Check.SCORER_WEIGHTS, CheckStatus.FAIL,
            Reason.UNDECLARED_STAND_IN_WEIGHTS,
            "scored with seeded stand-in weights the campaign does not mark stand_in: true ("
            + ", ".join(f"{w.name}, sha256 {w.sha256[:12]}..." for w in undeclared)
            + "): random weights, not VBench's, so no lossy verdict is better than "
            "inconclusive; pin the real files", data)
    if stand_ins:
        return new_check(track_id, arm, Check.SCORER_WEIGHTS, CheckStatus.PASS, None,
                         "scored with the campaign's declared stand-in weights (seeded "
                         f"random, not VBench's): {', '.join(stand_ins)}", data)
    return new_check(track_id, arm, Check.SCORER_WEIGHTS, CheckStatus.PASS, None,
                     f"scored with {', '.join(w.name for w in files)}; none is a stand-in",
                     data)


def judge_candidate(track_id: str, gate: LossyGate, candidate: str, baseline: LossyBaseline,
                    runs: Sequence[ScoredOutcome]) -> AnyCheck:
    per_seed: list[dict[str, Any]] = []
    worst: dict[str, float] = {}
    opened: set[str] = set()
    broken_ids: set[str] = set()
    precondition: list[str] = []
    fidelity_broken: list[str] = []
    for base, cand in zip(baseline.runs, runs, strict=True):
        if not cand.outcome.sample.ok or cand.outcome.media_path is None:
            return new_check(track_id, candidate, Check.LOSSY_GATE, CheckStatus.FAIL,
                             Reason.CANDIDATE_REQUEST_FAILED, cand.outcome.explain())
        assert base.outcome.media_path is not None
        try:
            found = check_comparable(probe(cand.outcome.media_path),
                                     probe(base.outcome.media_path))
        except MediaError as exc:
            found = [str(exc)]
        if not found and not cand.outcome.complete:
            # An MP4 came back but is not the track's (frames, audio length, ...): it is not
            # scored, so it cannot be compared either; never an open score.
            found = [f"seed {cand.seed}: {cand.outcome.explain()}"]
        precondition += found
        errors = [] if cand.not_scored else _errors(cand.scores, base.scores, gate)
        # Which weights made each score (a model-based one names its files, stand-ins labelled).
        weights = {sc.scorer: sc.weights for sc in cand.scores if sc.weights}
        opened |= {e.scorer for e in errors if e.status == "open"}
        opened |= set() if cand.not_scored else set(_missing_gated(cand.scores, gate))
        for e in errors:
            if e.error is not None:
                worst[e.scorer] = max(worst.get(e.scorer, 0.0), e.error)
            if decide(e, gate.threshold) == BROKEN:
                broken_ids.add(e.scorer)
        beside = _beside(base.outcome.media_path, cand.outcome.media_path)
        low, unjudged = fidelity_below(beside["fidelity"], gate)
        fidelity_broken += [f"{what} (seed {cand.seed})" for what in low]
        opened |= set(unjudged)
        per_seed.append({"seed": cand.seed, "threshold": gate.threshold,
                         "errors": [gate_error(e, gate.threshold, weights).json_dict()
                                    for e in errors],
                         **({"not_scored": cand.not_scored} if cand.not_scored else {}),
                         "fidelity_gate": {"below_minimum": low, "open": unjudged}, **beside})
    data = {"threshold": gate.threshold, "normalized": gate.normalized, "worst": worst,
            "min_psnr_db": gate.min_psnr_db, "min_ssim": gate.min_ssim, "per_seed": per_seed}
    if precondition:
        return new_check(track_id, candidate, Check.LOSSY_GATE, CheckStatus.FAIL,
                         Reason.QUALITY_PRECONDITION_FAILED,
                         "outputs not comparable: " + "; ".join(dict.fromkeys(precondition)),
                         data)
    # From the per-seed decisions recorded above: a dimension broken on any seed broke the gate.
    broken = {k: v for k, v in worst.items() if k in broken_ids}
    if broken or fidelity_broken:
        parts = ([f"relative error at or above {gate.threshold:.2%}: " + ", ".join(
            f"{k} {v:.3%}" for k, v in sorted(broken.items(), key=lambda i: -i[1]))]
            if broken else [])
        if fidelity_broken:
            parts.append("fidelity to B0 below the frozen minimum: " + ", ".join(fidelity_broken))
        return new_check(track_id, candidate, Check.LOSSY_GATE, CheckStatus.FAIL,
                         Reason.QUALITY_GATE_FAILED,
                         "; ".join(parts), data)
    if opened or not per_seed:
        return new_check(track_id, candidate, Check.LOSSY_GATE, CheckStatus.OPEN, None,
                         "cannot decide: open dimensions " + ", ".join(sorted(opened))
                         if opened else "cannot decide: no seed was compared", data)
    top = max(worst.values(), default=0.0)
    fidelity_note = "".join(
        f", {name} at least {value:g}" for name, value in
        (("PSNR dB", gate.min_psnr_db), ("SSIM", gate.min_ssim)) if value is not None)
    return new_check(track_id, candidate, Check.LOSSY_GATE, CheckStatus.PASS, None,
                     f"every gated score within {gate.threshold:.2%} of B0 (worst {top:.3%})"
                     + fidelity_note, data)


def _beside(baseline: Path, candidate: Path) -> dict[str, Any]:
    """Fidelity (with its per-frame curves) and audio against B0, for the evidence."""
    from ref2va_accept.quality import compare_audio_files, compare_videos  # noqa: PLC0415
    out: dict[str, Any] = {}
    try:
        out["fidelity"] = compare_videos(candidate, baseline).json_dict()  # curves included
    except Ref2VAError as exc:
        out["fidelity"] = {"error": str(exc)}
    try:
        out["audio"] = compare_audio_files(candidate, baseline).json_dict()
    except (Ref2VAError, ValueError) as exc:
        out["audio"] = {"error": str(exc)}
    return out


def run_candidate(arms: Arms, candidate: str, baseline: LossyBaseline) -> list[AnyCheck]:
    """The candidate on a fresh instance with the track's seeds, judged against B0; the gate's
    check first, then which weights scored it. (Its timed outputs are compared with the scored
    ones at verdict time: judging/_timed_output.py.)"""
    seeds = [run.seed for run in baseline.runs]
    runs = _run_seeds(arms, candidate, seeds, 0, Check.CANDIDATE_MEDIA)
    return _judged(arms, candidate, baseline, runs)


def _judged(arms: Arms, candidate: str, baseline: LossyBaseline,
            outcomes: Sequence[Outcome]) -> list[AnyCheck]:
    """The candidate's outputs (one per B0 seed) scored until one breaks the gate, then the
    lossy gate's check of the candidate and its weights check, each recorded."""
    gate = arms.plan.lossy.gate
    pairs = list(zip(baseline.runs, outcomes, strict=True))
    scored = scored_until_broken([(o, base.scores) for base, o in pairs],
                                 lambda o: _score(arms, o), gate)
    # The seeds left unscored follow the one that broke the gate.
    broke = pairs[scored.index(None) - 1][0].seed if None in scored else None
    runs = [ScoredOutcome(base.seed, o, scores) if scores is not None else
            ScoredOutcome(base.seed, o, (), not_scored=f"seed {broke} broke the gate first")
            for (base, o), scores in zip(pairs, scored, strict=True)]
    checks = [judge_candidate(arms.plan.track_id, gate, candidate, baseline, runs)]
    weights = weights_check(arms.plan.track_id, candidate, runs)
    checks += [weights] if weights is not None else []
    return record(arms, checks)


class LossyGateRunner(BaselineGateRunner[LossyBaseline]):
    """The lossy gate as the scenarios run it (gates.QualityGate); B0 made once per track."""

    name = "lossy"

    def make_baseline(self, arms: Arms) -> LossyBaseline:
        return run_baseline(arms, self.baselines.gate_runs(arms))

    def host(self, candidate: str) -> HostedGate:
        return HostedGate(self, candidate)

    def judge(self, arms: Arms, candidate: str, baseline: LossyBaseline) -> Sequence[AnyCheck]:
        return run_candidate(arms, candidate, baseline)


class HostedGate(GateOnInstance[LossyBaseline]):
    """The lossy gate on the candidate's first latency instance (latency_run.GateHost): B0's seeds
    before the warm-ups, scored once the instance has stopped (settle), on any scoring device:
    nothing waits between these requests and the warm-ups, so where they are the very
    requests the warm-ups would send (run_plan.hosted_gate_warmups) they are the instance's
    warm-ups, and the hosting instance has the history of the candidate's others. A failed
    gate starts none of the candidate's other instances. The measured requests are not
    scored (nothing after them): the timed-output check compares them with these."""

    def __init__(self, runner: LossyGateRunner, candidate: str) -> None:
        super().__init__(runner, candidate)
        self.pending: list[Outcome] = []

    def before(self, arms: Arms, engine: EngineInstance) -> list[AnyCheck]:
        seeds = [run.seed for run in self.runner.made(arms).runs]
        self.pending = _requests(arms, engine, self.candidate, seeds, 0, Check.CANDIDATE_MEDIA)
        return []

    def warmups(self, arms: Arms) -> list[Outcome]:
        plan = arms.plan
        credited = hosted_gate_warmups(plan)
        seeds = [o.sample.seed for o in self.pending[:credited]]
        if len(seeds) < credited or seeds != [plan.seeds[w % len(plan.seeds)]
                                              for w in range(credited)]:
            return []  # not the warm-ups' own requests: the instance warms up in full
        return list(self.pending[:credited])

    def settle(self, arms: Arms, run: InstanceRun) -> list[AnyCheck]:
        pending, self.pending = self.pending, []
        return self._judge(arms, pending) if pending else []

    def _judge(self, arms: Arms, outcomes: Sequence[Outcome]) -> list[AnyCheck]:
        baseline = self.runner.made(arms)
        return _judged(arms, self.candidate, baseline, outcomes)
