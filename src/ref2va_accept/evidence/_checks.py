"""The records of a run's checks and verdicts: what every stage that checks something writes
(the engines, the campaign's preflight, the arm runner, the gates), below all of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ref2va_accept.core import (
    CHECK_REASON_CATEGORIES,
    Check,
    CheckStatus,
    Reason,
    Verdict,
    check_name,
    enum_member,
    reason_code,
)

if TYPE_CHECKING:
    from ref2va_accept.evidence._latency_records import LatencyInterval

# Every status a check may have (the evidence schema's test reads it).
CHECK_STATUSES: tuple[CheckStatus, ...] = tuple(CheckStatus)


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
    latency: LatencyInterval | None = None

    def __post_init__(self) -> None:
        where = f"check {self.track}/{self.arm}/{self.name}"
        object.__setattr__(self, "name", check_name(self.name))
        if self.status not in CHECK_STATUSES:
            raise ValueError(f"{where}: status {self.status!r} is not one of "
                             f"{', '.join(CHECK_STATUSES)}")
        object.__setattr__(self, "status", CheckStatus(self.status))
        if self.reason is not None:
            reason = reason_code(self.reason)
            if reason.category not in CHECK_REASON_CATEGORIES:
                raise ValueError(f"{where}: reason {reason.value!r} is a verdict's reason "
                                 f"(category {reason.category}); a check records validity or "
                                 "defect reasons")
            object.__setattr__(self, "reason", reason)
        if (self.status is CheckStatus.FAIL) != (self.reason is not None):
            raise ValueError(f"{where}: a failed check names its reason and only a failed one "
                             f"does (status {self.status.value!r}, reason "
                             f"{None if self.reason is None else self.reason.value!r})")
        if (self.latency is not None) != (self.name is Check.LATENCY_RATIO
                                          and self.status is CheckStatus.PASS):
            raise ValueError(f"{where}: a passed latency_ratio check carries its typed latency "
                             "result, and no other check does")

    def to_dict(self) -> dict[str, Any]:
        data = self.data
        if self.latency is not None:
            data = {**data, "verdict": self.latency.verdict.value,
                    "interval": self.latency.json_dict()}
        return {
            "track": self.track, "arm": str(self.arm), "name": self.name.value,
            "status": self.status.value,
            "reason": None if self.reason is None else self.reason.value,
            "detail": self.detail, "data": data,
        }




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
        if self.verdict not in tuple(Verdict):
            raise ValueError(f"verdict {self.track}/{self.candidate}: {self.verdict!r} is not "
                             f"one of {', '.join(Verdict)}")
        object.__setattr__(self, "verdict", Verdict(self.verdict))
        object.__setattr__(self, "reasons", tuple(reason_code(r) for r in self.reasons))
        object.__setattr__(self, "open_checks", tuple(check_name(c) for c in self.open_checks))
        object.__setattr__(self, "checks", {check_name(c): enum_member(CheckStatus, s, "status")
                                            for c, s in self.checks.items()})

    def to_dict(self) -> dict[str, Any]:
        return {
            "track": self.track, "candidate": self.candidate, "verdict": self.verdict.value,
            "reasons": [r.value for r in self.reasons],
            "open_checks": [c.value for c in self.open_checks],
            "checks": {name.value: status.value for name, status in self.checks.items()},
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
