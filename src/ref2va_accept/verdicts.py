"""Per-track verdicts from the checks that ran, in the documented order (docs/protocol.md).

1. The run is not evaluable -> inconclusive (a failed check with a validity reason).
2. The candidate is defective -> failed (a failed check with a defect reason).
3. A required check did not run -> inconclusive, with the check listed as open.
4. Otherwise the latency interval decides (the latency check's own typed result).

A check that did not run is open, never a pass; a track with an open check is never supported.
A check that has nothing to check here (no device to probe) is `not_applicable`: it does not
leave its track open, and it is shown as such, never as a pass.
Names and reasons come from the vocabulary (checks.py): anything else cannot be recorded, so a
misspelt reason can never be taken for another category.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .checks import (
    CHECK_REASON_CATEGORIES,
    Category,
    Check,
    Reason,
    check_name,
    reason_code,
    reasons_of,
    required_checks,
)

if TYPE_CHECKING:
    from .stats import LatencyVerdict

CheckStatus = Literal["pass", "fail", "open", "not_applicable"]
Verdict = Literal["supported", "failed", "inconclusive"]
CHECK_STATUSES: tuple[CheckStatus, ...] = ("pass", "fail", "open", "not_applicable")
_STATUSES = CHECK_STATUSES
# When a check is recorded several times, the most severe status is its summary.
_PRECEDENCE: dict[CheckStatus, int] = {"fail": 3, "open": 2, "pass": 1, "not_applicable": 0}
# What a required check may be for its track not to stay open.
SATISFIED: frozenset[CheckStatus] = frozenset({"pass", "not_applicable"})
_VERDICTS: tuple[Verdict, ...] = ("supported", "failed", "inconclusive")

# Derived from the vocabulary; kept for readers of the old names.
VALIDITY_REASONS = reasons_of(Category.VALIDITY)
CANDIDATE_DEFECTS = reasons_of(Category.DEFECT)


@dataclass(frozen=True)
class CheckResult:
    """One check of one arm in one track, as the evidence records it.

    `name` and `reason` must be members of the vocabulary (given as members or their strings);
    a failed check must name a validity or defect reason, a passed or open one none. The latency
    check carries its own typed result (`latency`), which the evidence writes as
    `data["verdict"]` and `data["interval"]`.
    """

    track: str
    arm: str
    name: Check
    status: CheckStatus
    reason: Reason | None = None
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    latency: LatencyVerdict | None = None

    def __post_init__(self) -> None:
        where = f"check {self.track}/{self.arm}/{self.name}"
        object.__setattr__(self, "name", check_name(self.name))
        if self.status not in _STATUSES:
            raise ValueError(f"{where}: status {self.status!r} is not one of "
                             f"{', '.join(_STATUSES)}")
        if self.reason is not None:
            reason = reason_code(self.reason)
            if reason.category not in CHECK_REASON_CATEGORIES:
                raise ValueError(f"{where}: reason {reason.value!r} is a verdict's reason "
                                 f"(category {reason.category}); a check records validity or "
                                 "defect reasons")
            object.__setattr__(self, "reason", reason)
        if (self.status == "fail") != (self.reason is not None):
            raise ValueError(f"{where}: a failed check names its reason and only a failed one "
                             f"does (status {self.status!r}, reason {self.reason!r})")
        if (self.latency is not None) != (self.name is Check.LATENCY_RATIO
                                          and self.status == "pass"):
            raise ValueError(f"{where}: a passed latency_ratio check carries its typed latency "
                             "result, and no other check does")

    def to_dict(self) -> dict[str, Any]:
        data = self.data
        if self.latency is not None:
            data = {**data, "verdict": self.latency.verdict, "interval": self.latency.to_dict()}
        return {
            "track": self.track, "arm": self.arm, "name": self.name.value,
            "status": self.status, "reason": None if self.reason is None else self.reason.value,
            "detail": self.detail, "data": data,
        }


@dataclass(frozen=True)
class GateChecks:
    """A baseline's checks, shared by its track's candidates: usable only when every one passed
    or was not applicable."""

    checks: tuple[CheckResult, ...]

    @property
    def usable(self) -> bool:
        return all(check.status in SATISFIED for check in self.checks)

    @property
    def judgeable(self) -> bool:
        """Candidates may be judged against it: nothing failed (an open check stays open in
        their track's verdict, but their own figures are still recorded)."""
        return all(check.status != "fail" for check in self.checks)

    def explain(self) -> str:
        return "; ".join(c.detail for c in self.checks if c.status not in SATISFIED)


@dataclass(frozen=True)
class TrackVerdict:
    track: str
    candidate: str | None
    verdict: Verdict
    reasons: tuple[Reason, ...]
    open_checks: tuple[Check, ...]
    checks: dict[Check, CheckStatus]
    note: str = ""
    # Several candidates on one track: this one's verdict after Holm's step-down over the
    # track's latency p-values ("supported" / "not supported"); None with one candidate.
    holm: str | None = None
    p_value: float | None = None  # its latency p-value (stats.p_value), where it has one
    # Which attempt of this candidate on this track this run is (1 + the ledger's earlier
    # ones), and what the earlier ones gave; None when the run read no ledger.
    attempt: int | None = None
    earlier: tuple[str, ...] = ()
    # The seeded stand-in weights files that made this row's lossy scores (B0's or the
    # candidate's; the scorer_weights checks): labelled wherever the verdict is shown.
    stand_in_weights: tuple[str, ...] = ()
    # Where a lossless candidate that is not bit-exact first parted from B0 (its localization
    # check: the module path and step), "" when no pass named one.
    localized: str = ""

    def __post_init__(self) -> None:
        # Like a check, a verdict can only speak the vocabulary (given as members or strings).
        if self.verdict not in _VERDICTS:
            raise ValueError(f"verdict {self.track}/{self.candidate}: {self.verdict!r} is not "
                             f"one of {', '.join(_VERDICTS)}")
        object.__setattr__(self, "reasons", tuple(reason_code(r) for r in self.reasons))
        object.__setattr__(self, "open_checks", tuple(check_name(c) for c in self.open_checks))
        object.__setattr__(self, "checks", {check_name(c): s for c, s in self.checks.items()})

    def to_dict(self) -> dict[str, Any]:
        return {
            "track": self.track, "candidate": self.candidate, "verdict": self.verdict,
            "reasons": [r.value for r in self.reasons],
            "open_checks": [c.value for c in self.open_checks],
            "checks": {name.value: status for name, status in self.checks.items()},
            "note": self.note, "holm": self.holm, "p_value": self.p_value,
            "attempt": self.attempt, "earlier": list(self.earlier),
            "stand_in_weights": list(self.stand_in_weights),
            "localized": self.localized,
        }

    @property
    def stand_in_label(self) -> str:
        """"" for scores of real weights; else the label every view of the verdict shows."""
        return stand_in_label(self.stand_in_weights)


def stand_in_label(files: Sequence[str] | None) -> str:
    """The label of a verdict whose lossy scores came from stand-in weights (`files`, their
    names), for the report, the terminal, the ledger and merge alike; "" without any."""
    return f"STAND-IN scores ({', '.join(files)})" if files else ""


def _stand_ins(checks: Sequence[CheckResult]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(str(name) for c in checks if c.name is Check.SCORER_WEIGHTS
                               for name in c.data.get("stand_ins") or ()))


# Checks that measure time: a validity problem they find concerns the timing only.
TIMING_CHECKS = frozenset({Check.LATENCY_RATIO, Check.RESOURCE_INTERFERENCE, Check.CACHING_PROBE})

_T = TypeVar("_T", Reason, Check)


def _dedupe(items: Iterable[_T]) -> tuple[_T, ...]:
    return tuple(dict.fromkeys(items))


def judge(
    track: str,
    quality_class: str,
    candidate: str | None,
    checks: Sequence[CheckResult],
    cap_reason: str | Sequence[str] | None = None,
) -> TrackVerdict:
    """The verdict of one candidate in one track from every check recorded for the track.

    Checks of the baseline arm ("b0") count for every candidate; a candidate's own checks only for
    itself. `cap_reason` (an unfrozen or drifted protocol, a validity reason) caps the verdict at
    inconclusive. Failed checks are sorted by their reason's category, never by guesswork.
    The row names the stand-in weights its lossy scores came from (labelled wherever shown).
    """
    relevant = [c for c in checks if c.track == track and c.arm in ("b0", candidate)]
    row = _judge(track, quality_class, candidate, relevant, cap_reason)
    said = [c.detail for c in relevant if c.reason is Reason.UNDECLARED_STAND_IN_WEIGHTS]
    if said and not row.note:  # why the scores decide nothing, in one line
        row = replace(row, note=said[0])
    return replace(row, stand_in_weights=_stand_ins(relevant), localized=_localized(relevant))


def _localized(checks: Sequence[CheckResult]) -> str:
    """The place a localization pass named (``module (step N)``, ``code between A and B``,
    ``A .. B not run``), '' when none did."""
    for check in checks:
        if check.name is Check.LOCALIZATION and check.status == "pass":
            data = check.data
            where = data.get("where") or data.get("module") or "outside any module"
            step = data.get("step")
            return f"{where} (step {step})" if step is not None else str(where)
    return ""


def _judge(track: str, quality_class: str, candidate: str | None,
           relevant: Sequence[CheckResult], cap_reason: str | Sequence[str] | None
           ) -> TrackVerdict:
    summary: dict[Check, CheckStatus] = {}
    for check in relevant:
        # fail > open > pass > not_applicable: one failing instance fails the check, one open
        # instance leaves it open, and it is not applicable only when no instance applied.
        seen = summary.get(check.name)
        if seen is None or _PRECEDENCE[check.status] > _PRECEDENCE[seen]:
            summary[check.name] = check.status
    failed = [(c, c.reason) for c in relevant if c.reason is not None]
    validity = [r for _, r in failed if r.category is Category.VALIDITY]
    caps = [cap_reason] if isinstance(cap_reason, str) else list(cap_reason or ())
    for given in caps:
        cap = reason_code(given)
        if cap.category is not Category.VALIDITY:
            raise ValueError(f"verdict cap: {cap.value!r} is a {cap.category} reason, "
                             "not a validity one")
        validity.append(cap)
    defects = [r for _, r in failed if r.category is Category.DEFECT]
    # A quality failure decided without timing (a gate, an audit, a request) is not masked by
    # a problem of the timing alone (drift, unsteady warm-ups, interference during latency
    # instances): the candidate failed whatever its latency would have been.
    decided = [r for c, r in failed if r.category is Category.DEFECT
               and c.name not in TIMING_CHECKS]
    untimed_validity = [r for c, r in failed if r.category is Category.VALIDITY
                        and c.name not in TIMING_CHECKS]
    open_checks = _dedupe(
        [name for name in required_checks(quality_class)
         if summary.get(name, "open") not in (*SATISFIED, "fail")]
        + [c.name for c in relevant if c.status == "open"]
    )
    if candidate is None:
        reasons = _dedupe([*validity, *defects, Reason.NO_CANDIDATE])
        return TrackVerdict(track, None, "inconclusive", reasons, open_checks, summary,
                            "the campaign names no candidate for this track: nothing to judge")
    if decided and not untimed_validity and not caps:
        return TrackVerdict(track, candidate, "failed", _dedupe([*decided, *validity, *defects]),
                            open_checks, summary,
                            "a quality failure decided without timing; the timing's own "
                            "validity problems are listed after it" if validity else "")
    if validity:
        return TrackVerdict(track, candidate, "inconclusive", _dedupe([*validity, *defects]),
                            open_checks, summary)
    if defects:
        return TrackVerdict(track, candidate, "failed", _dedupe(defects), open_checks, summary)
    if open_checks:
        return TrackVerdict(track, candidate, "inconclusive", (Reason.OPEN_CHECKS,),
                            open_checks, summary)
    latency = [c.latency for c in relevant
               if c.latency is not None and c.arm == candidate]
    verdict: Verdict = latency[-1].verdict if latency else "inconclusive"
    reason = _LATENCY_REASONS[verdict]
    if latency and latency[-1].reasons == ("supported_out_of_reach",):
        reason = Reason.LATENCY_OUT_OF_REACH
    return TrackVerdict(track, candidate, verdict, (reason,), (), summary)


def family_wise(rows: Sequence[TrackVerdict], checks: Sequence[CheckResult], alpha: float
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
        return [replace(r, p_value=p.get(r.candidate)) for r in rows]
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
    return [replace(r, p_value=p.get(r.candidate),
                    holm=None if r.candidate is None else
                    "supported" if r.verdict == "supported" and r.candidate in rejected
                    else "not supported") for r in rows]


_LATENCY_REASONS: dict[Verdict, Reason] = {
    "supported": Reason.LATENCY_SUPPORTED,
    "failed": Reason.LATENCY_FAILED,
    "inconclusive": Reason.LATENCY_INCONCLUSIVE,
}
