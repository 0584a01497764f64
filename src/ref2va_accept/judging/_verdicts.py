"""Per-track verdicts from the checks that ran, in the documented order (docs/protocol.md).

0. A quality failure decided without timing -> failed, whatever the timing's own problems.
1. The run is not evaluable -> inconclusive (a failed check with a validity reason).
2. The candidate is defective -> failed (a failed check with a defect reason).
3. A required check did not run -> inconclusive, with the check listed as open.
4. Otherwise the latency interval decides (the latency check's own typed result).

That order is `classify`, the one rule: a track's verdict (`judge`) and a gate's result
(gates.GateResult.from_checks) are both read from it.

A check that did not run is open, never a pass; a track with an open check is never supported.
A check that has nothing to check here (no device to probe) is `not_applicable`: it does not
leave its track open, and it is shown as such, never as a pass.
Names and reasons come from the vocabulary (core/_checks.py), statuses and verdicts from
core/_vocabulary.py: anything else cannot be recorded, so a misspelt reason can never be taken for
another category.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, TypeVar

from ref2va_accept.core import (
    ArmRole,
    Category,
    Check,
    CheckStatus,
    IntervalReason,
    QualityClass,
    Reason,
    Verdict,
    reason_code,
    reasons_of,
    required_checks,
)
from ref2va_accept.evidence import (
    AnyCheck,
    LocalizationCheck,
    ScorerWeightsCheck,
    TrackVerdict,
)

if TYPE_CHECKING:
    from ref2va_accept.evidence import LatencyInterval

# When a check is recorded several times, the most severe status is its summary.
_PRECEDENCE: dict[CheckStatus, int] = {CheckStatus.FAIL: 3, CheckStatus.OPEN: 2,
                                       CheckStatus.PASS: 1, CheckStatus.NOT_APPLICABLE: 0}
# What a required check may be for its track not to stay open.
SATISFIED: frozenset[CheckStatus] = frozenset({CheckStatus.PASS, CheckStatus.NOT_APPLICABLE})

# Derived from the vocabulary; kept for readers of the old names.
VALIDITY_REASONS = reasons_of(Category.VALIDITY)
CANDIDATE_DEFECTS = reasons_of(Category.DEFECT)


@dataclass(frozen=True)
class GateChecks:
    """A baseline's checks, shared by its track's candidates: usable only when every one passed
    or was not applicable."""

    checks: tuple[AnyCheck, ...]

    @property
    def usable(self) -> bool:
        return all(check.status in SATISFIED for check in self.checks)

    @property
    def judgeable(self) -> bool:
        """Candidates may be judged against it: nothing failed (an open check stays open in
        their track's verdict, but their own figures are still recorded)."""
        return all(check.status is not CheckStatus.FAIL for check in self.checks)

    def explain(self) -> str:
        return "; ".join(c.detail for c in self.checks if c.status not in SATISFIED)



def _stand_ins(checks: Sequence[AnyCheck]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name for c in checks if isinstance(c, ScorerWeightsCheck)
                               for name in c.data.stand_ins))


# Checks that measure time: a validity problem they find concerns the timing only.
TIMING_CHECKS = frozenset({Check.LATENCY_RATIO, Check.RESOURCE_INTERFERENCE, Check.CACHING_PROBE})

_T = TypeVar("_T", Reason, Check)


def _dedupe(items: Iterable[_T]) -> tuple[_T, ...]:
    return tuple(dict.fromkeys(items))


class Step(StrEnum):
    """The step of the verdict order (docs/protocol.md, "Verdict order") that decided."""

    DECIDED_DEFECT = "decided_defect"  # 0: a defect found without timing -> failed
    NOT_EVALUABLE = "not_evaluable"  # 1: a validity reason (or a cap) -> inconclusive
    DEFECT = "defect"  # 2: a defect reason -> failed
    OPEN = "open"  # 3: a required check did not run, or a check is open -> inconclusive
    LATENCY = "latency"  # 4: the latency interval's own result decides


@dataclass(frozen=True)
class Classification:
    """What a set of checks decides in the verdict order: the `step` that decided, the
    `reasons` a verdict row gives for it (in its order), the checks that decided it
    (`deciding`), the `open_checks` (required ones first), every check's summary status, and
    the latency result where step 4 decides (None when no check carries one)."""

    step: Step
    reasons: tuple[Reason, ...]
    deciding: tuple[AnyCheck, ...]
    open_checks: tuple[Check, ...]
    summary: dict[Check, CheckStatus]
    found: tuple[Reason, ...]  # the validity (caps included) and defect reasons, in that order
    latency: LatencyInterval | None = None

    @property
    def verdict(self) -> Verdict:
        """The verdict the step gives: failed, inconclusive, or the latency result's (a latency
        check that carries none is inconclusive)."""
        if self.step in (Step.DECIDED_DEFECT, Step.DEFECT):
            return Verdict.FAILED
        if self.step is Step.LATENCY and self.latency is not None:
            return self.latency.verdict
        return Verdict.INCONCLUSIVE


def summarise(checks: Iterable[AnyCheck]) -> dict[Check, CheckStatus]:
    """Each check's status where it was recorded several times: the most severe one."""
    summary: dict[Check, CheckStatus] = {}
    for check in checks:
        # fail > open > pass > not_applicable: one failing instance fails the check, one open
        # instance leaves it open, and it is not applicable only when no instance applied.
        seen = summary.get(check.name)
        if seen is None or _PRECEDENCE[check.status] > _PRECEDENCE[seen]:
            summary[check.name] = check.status
    return summary


def classify(checks: Sequence[AnyCheck], required: Sequence[Check] = (),
             caps: Sequence[Reason] = ()) -> Classification:
    """The verdict order (docs/protocol.md), the one rule a track's verdict and a gate's result
    are read from. `checks`: every check that counts (B0's and the candidate's); `required`:
    the checks that must be satisfied (pass or not_applicable), open otherwise; `caps`:
    validity reasons that cap the result at inconclusive (an unfrozen campaign...).

    0. a defect found by a check that does not measure time, with no validity reason but the
       timing's own (and no cap): failed, that defect first and the timing's reasons after it;
    1. a validity reason or a cap: inconclusive, the defects found listed after them;
    2. a defect: failed;
    3. an open check (a required one not satisfied, or any recorded open): inconclusive;
    4. otherwise the last latency result of a candidate decides.
    Failed checks are sorted by their reason's category, never by guesswork.
    """
    summary = summarise(checks)
    failed = [c for c in checks if c.reason is not None]
    invalid, defective = _of(failed, Category.VALIDITY), _of(failed, Category.DEFECT)
    validity = [*_reasons(invalid), *caps]
    defects = _reasons(defective)
    found = _dedupe([*validity, *defects])
    # A quality failure decided without timing (a gate, an audit, a request) is not masked by
    # a problem of the timing alone (drift, unsteady warm-ups, interference during latency
    # instances): the candidate failed whatever its latency would have been.
    decided = _reasons(c for c in defective if c.name not in TIMING_CHECKS)
    untimed_invalid = [c for c in invalid if c.name not in TIMING_CHECKS]
    opened = [c for c in checks if c.status is CheckStatus.OPEN]
    open_checks = _dedupe(
        [name for name in required
         if summary.get(name, CheckStatus.OPEN) not in (*SATISFIED, CheckStatus.FAIL)]
        + [c.name for c in opened])

    def step(at: Step, reasons: Iterable[Reason], deciding: Iterable[AnyCheck],
             latency: LatencyInterval | None = None) -> Classification:
        return Classification(at, _dedupe(reasons), tuple(deciding), open_checks, summary,
                              found, latency)

    if decided and not untimed_invalid and not caps:
        return step(Step.DECIDED_DEFECT, [*decided, *validity, *defects], failed)
    if validity:
        return step(Step.NOT_EVALUABLE, found, invalid)
    if defects:
        return step(Step.DEFECT, defects, defective)
    if open_checks:
        return step(Step.OPEN, (Reason.OPEN_CHECKS,), opened)
    timed = [c for c in checks if c.latency is not None and c.arm != ArmRole.B0]
    latency = timed[-1].latency if timed else None
    if latency is None:
        return step(Step.LATENCY, (Reason.LATENCY_INCONCLUSIVE,), ())
    reason = _LATENCY_REASONS[latency.verdict]
    if latency.reasons == (IntervalReason.SUPPORTED_OUT_OF_REACH,):
        reason = Reason.LATENCY_OUT_OF_REACH
    return step(Step.LATENCY, (reason,), timed[-1:], latency)


def _of(checks: Iterable[AnyCheck], category: Category) -> list[AnyCheck]:
    return [c for c in checks if c.reason is not None and c.reason.category is category]


def _reasons(checks: Iterable[AnyCheck]) -> list[Reason]:
    return [c.reason for c in checks if c.reason is not None]


def judge(
    track: str,
    quality_class: QualityClass | str,
    candidate: str | None,
    checks: Sequence[AnyCheck],
    cap_reason: str | Sequence[str] | None = None,
) -> TrackVerdict:
    """The verdict of one candidate in one track from every check recorded for the track.

    Checks of the baseline arm (ArmRole.B0) count for every candidate; a candidate's own checks
    only for itself. `cap_reason` (an unfrozen or drifted protocol, a validity reason) caps the
    verdict at inconclusive. The order is `classify`'s.
    The row names the stand-in weights its lossy scores came from (labelled wherever shown).
    """
    relevant = [c for c in checks if c.track == track and c.arm in (ArmRole.B0, candidate)]
    row = _judge(track, quality_class, candidate, relevant, cap_reason)
    said = [c.detail for c in relevant if c.reason is Reason.UNDECLARED_STAND_IN_WEIGHTS]
    if said and not row.note:  # why the scores decide nothing, in one line
        row = row.model_copy(update={"note": said[0]})
    return row.model_copy(update={"stand_in_weights": _stand_ins(relevant),
                                 "localized": _localized(relevant)})


def _localized(checks: Sequence[AnyCheck]) -> str:
    """The place a localization pass named (``module (step N)``, ``code between A and B``,
    ``A .. B not run``), '' when none did."""
    for check in checks:
        if isinstance(check, LocalizationCheck) and check.status is CheckStatus.PASS:
            data = check.data
            where = data.where or data.module or "outside any module"
            return f"{where} (step {data.step})" if data.step is not None else where
    return ""


def _caps(cap_reason: str | Sequence[str] | None) -> list[Reason]:
    caps = []
    for given in [cap_reason] if isinstance(cap_reason, str) else list(cap_reason or ()):
        cap = reason_code(given)
        if cap.category is not Category.VALIDITY:
            raise ValueError(f"verdict cap: {cap.value!r} is a {cap.category} reason, "
                             "not a validity one")
        caps.append(cap)
    return caps


def _judge(track: str, quality_class: QualityClass | str, candidate: str | None,
           relevant: Sequence[AnyCheck], cap_reason: str | Sequence[str] | None
           ) -> TrackVerdict:
    found = classify(relevant, required_checks(quality_class), _caps(cap_reason))
    if candidate is None:
        return TrackVerdict(
            track=track, candidate=None, verdict=Verdict.INCONCLUSIVE,
            reasons=_dedupe([*found.found, Reason.NO_CANDIDATE]), open_checks=found.open_checks,
            checks=found.summary,
            note="the campaign names no candidate for this track: nothing to judge")
    note = ""
    if found.step is Step.DECIDED_DEFECT and any(r.category is Category.VALIDITY
                                                 for r in found.found):
        note = ("a quality failure decided without timing; the timing's own validity problems "
                "are listed after it")
    open_checks = () if found.step is Step.LATENCY else found.open_checks
    return TrackVerdict(track=track, candidate=candidate, verdict=found.verdict,
                        reasons=found.reasons, open_checks=open_checks, checks=found.summary,
                        note=note)


def judge_tracks(tracks: Sequence[tuple[str, QualityClass | str, Sequence[str]]],
                 checks: Sequence[AnyCheck], caps: Sequence[str], alpha: float
                 ) -> list[TrackVerdict]:
    """A run's verdict rows: per track (its id, quality class and candidates, in the order
    given) one row per candidate (one without a candidate where none entered), Holm's column
    at `alpha` over each track's candidates."""
    rows: list[TrackVerdict] = []
    for track, quality_class, candidates in tracks:
        judged: list[str | None] = [*candidates] or [None]
        rows += family_wise([judge(track, quality_class, c, checks, caps) for c in judged],
                            checks, alpha)
    return rows


def family_wise(rows: Sequence[TrackVerdict], checks: Sequence[AnyCheck], alpha: float
                ) -> list[TrackVerdict]:
    """The rows of one track with Holm's column: with K candidates judged against one B0,
    a candidate stays supported family-wise only when Holm's step-down at `alpha` rejects its
    "ratio >= target" too (its p-value is stats.p_value of its latency result; a candidate with
    none is never rejected). Holds the chance that any of the K is falsely supported to alpha
    (calibration shows it: the shared-B0 cells)."""
    p: dict[str | None, float | None] = {}
    for row in rows:
        latency = [c.latency for c in checks if c.track == row.track and c.arm == row.candidate
                   and c.latency is not None]
        p[row.candidate] = latency[-1].p_value if latency else None
    judged = [r for r in rows if r.candidate is not None]
    if len(judged) < 2:
        return [r.model_copy(update={"p_value": p.get(r.candidate)}) for r in rows]
    def key(row: TrackVerdict) -> float:
        value = p[row.candidate]
        return 1.0 if value is None else value

    ordered = sorted(judged, key=key)
    rejected: set[str | None] = set()
    for rank, row in enumerate(ordered):
        value = p[row.candidate]
        if value is None or value > alpha / (len(ordered) - rank):
            break
        rejected.add(row.candidate)
    return [r.model_copy(update={
        "p_value": p.get(r.candidate),
        "holm": None if r.candidate is None else
        "supported" if r.verdict is Verdict.SUPPORTED and r.candidate in rejected
        else "not supported"}) for r in rows]


_LATENCY_REASONS: dict[Verdict, Reason] = {
    Verdict.SUPPORTED: Reason.LATENCY_SUPPORTED,
    Verdict.FAILED: Reason.LATENCY_FAILED,
    Verdict.INCONCLUSIVE: Reason.LATENCY_INCONCLUSIVE,
}
