"""The record of a run's checks: what every stage that checks something writes (the engines,
the campaign's preflight, the arm runner, the gates), below all of them; the verdicts they lead
to are the bundle's records (`_bundle_records.TrackVerdict`).

`CheckRecord` is the base of every check, with the rules each obeys when it is built (its
writer's mistake fails at the writer, not at the end of a run); one subclass per check of the
vocabulary, with its typed data, is in `_checks_records` (built by `new_check`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Final, Generic, Self, TypeAlias, TypeVar

from pydantic import AfterValidator, ConfigDict, WithJsonSchema, model_validator

from ref2va_accept.core import (
    CHECK_REASON_CATEGORIES,
    Check,
    CheckStatus,
    Reason,
    check_name,
    reason_code,
)
from ref2va_accept.evidence._base import Record

if TYPE_CHECKING:
    from ref2va_accept.evidence._latency_records import LatencyInterval

__all__ = ["CHECK_REASON_SCHEMA", "CHECK_STATUSES", "CheckReason", "CheckRecord"]

# Every status a check may have (the evidence schema's test reads it).
CHECK_STATUSES: tuple[CheckStatus, ...] = tuple(CheckStatus)


def _check_reason(reason: Reason) -> Reason:
    if reason.category not in CHECK_REASON_CATEGORIES:
        raise ValueError(f"{reason.value!r} is a verdict's reason (category {reason.category}); "
                         "a check records validity or defect reasons")
    return reason


# A reason a check may record: a validity or defect reason of the vocabulary.
CHECK_REASON_SCHEMA: Final = {
    "description": "a reason a check may record (a validity or defect reason of the vocabulary)",
    "enum": [r.value for r in Reason if r.category in CHECK_REASON_CATEGORIES]}
CheckReason: TypeAlias = Annotated[Reason, AfterValidator(_check_reason),
                                   WithJsonSchema(CHECK_REASON_SCHEMA)]

N = TypeVar("N")
D = TypeVar("D")


def _carries_interval(data: Any) -> bool:
    """Whether a check's data (as its writer gave it, or typed) carries a latency interval."""
    found = data.get("interval") if isinstance(data, Mapping) else getattr(data, "interval", None)
    return found is not None


class CheckRecord(Record, Generic[N, D]):
    """One check of one arm in one track, as the evidence records it (one subclass per check,
    `_checks_records`).

    `name` and `reason` must be members of the vocabulary (given as members or their strings);
    a failed check must name a validity or defect reason, a passed or open one none. A passed
    latency_ratio check carries its typed result (`latency`) in its data (`interval`, with its
    `verdict`), and no other check does. A check is frozen: a writer that learns more about it
    builds a new one (`revised`).
    """

    model_config = ConfigDict(frozen=True)

    track: str
    arm: str
    name: N
    status: CheckStatus
    reason: CheckReason | None
    detail: str
    data: D

    @model_validator(mode="before")
    @classmethod
    def _vocabulary(cls, given: Any) -> Any:
        """The check's name, status and reason from the vocabulary, and the rules between them
        and its data, before its data is read (the message names the check)."""
        if not isinstance(given, Mapping):
            return given
        raw = dict(given)
        where = f"check {raw.get('track')}/{raw.get('arm')}/{raw.get('name')}"
        if "name" in raw:
            raw["name"] = check_name(raw["name"])
        if "status" in raw:
            if raw["status"] not in CHECK_STATUSES:
                raise ValueError(f"{where}: status {raw['status']!r} is not one of "
                                 f"{', '.join(CHECK_STATUSES)}")
            raw["status"] = CheckStatus(raw["status"])
        reason = raw.get("reason")
        if reason is not None:
            reason = reason_code(reason)
            if reason.category not in CHECK_REASON_CATEGORIES:
                raise ValueError(f"{where}: reason {reason.value!r} is a verdict's reason "
                                 f"(category {reason.category}); a check records validity or "
                                 "defect reasons")
            raw["reason"] = reason
        if "status" not in raw or "name" not in raw:
            return raw  # the missing field is the error
        if (raw["status"] is CheckStatus.FAIL) != (reason is not None):
            raise ValueError(f"{where}: a failed check names its reason and only a failed one "
                             f"does (status {raw['status'].value!r}, reason "
                             f"{None if reason is None else reason.value!r})")
        if _carries_interval(raw.get("data")) != (raw["name"] is Check.LATENCY_RATIO
                                                  and raw["status"] is CheckStatus.PASS):
            raise ValueError(f"{where}: a passed latency_ratio check carries its typed latency "
                             "result, and no other check does")
        return raw

    @property
    def latency(self) -> LatencyInterval | None:
        """The latency interval's typed result: a passed latency_ratio check's (None here)."""
        return None

    def revised(self, *, detail: str | None = None, **data: Any) -> Self:
        """This check with `detail` for its own and `data` merged into its data, validated
        again as a new record (the evidence writes the keys it was built with, and these)."""
        raw = self.model_dump(by_alias=True, exclude_unset=True)
        if detail is not None:
            raw["detail"] = detail
        raw["data"] = {**raw["data"], **data}
        return self.model_validate(raw)
