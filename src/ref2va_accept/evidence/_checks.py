"""The record of a run's checks: what every stage that checks something writes (the engines,
the campaign's preflight, the arm runner, the gates), below all of them; the verdicts they lead
to are the bundle's records (`_bundle_records.TrackVerdict`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ref2va_accept.core import (
    CHECK_REASON_CATEGORIES,
    Check,
    CheckStatus,
    Reason,
    check_name,
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
