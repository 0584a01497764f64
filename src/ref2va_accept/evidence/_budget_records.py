"""The evidence's records of the campaign's account, as the history stage keeps it: the run
against the budget (ceilings, authorizations, what earlier runs spent, what this one plans), the
campaign's ledger with its entries, and the ratings of the blind review ingested after a run."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from pydantic import Field

from ref2va_accept.evidence._base import Number, OpenRecord, Record, Sha256
from ref2va_accept.evidence._latency_records import LatencySummary

__all__ = [
    "Authorization",
    "Budget",
    "Difference",
    "HumanEvaluation",
    "Ledger",
    "LedgerEntry",
    "Preference",
    "Rating",
    "RatingSummary",
    "Spent",
]


class Authorization(Record):
    """More hours than the ceiling, granted (campaign.schema.BudgetAuthorization)."""

    by: str
    at: str
    wall_hours: Number
    device_hours: Number
    note: str


class Spent(Record):
    runs: int
    wall_s: Number
    device_s: Number


class Budget(Record):
    """The run against the campaign's budget before any engine started (built by
    planning.check_budget): ceilings with their authorizations, what earlier runs spent, what this
    run plans."""

    wall_ceiling_h: Number
    device_ceiling_h: Number
    authorizations: list[Authorization]
    spent_before: Spent
    planned_wall_s: list[Number] | None
    planned_device_s: list[Number] | None
    devices: int
    over: list[str]
    unpriced: list[str]

    def refusal(self) -> str | None:
        """The line that refuses the run, when it would pass a ceiling (None: it may start)."""
        if not self.over:
            return None
        return ("ref2va: the budget would be passed: " + "; ".join(self.over)
                + " (record an authorization under budget.authorizations: by, at, wall_hours, "
                "device_hours)")


class LedgerEntry(OpenRecord):
    """An entry of the campaign's ledger (record.entries): a candidate attempt or a run. Entries
    of earlier runs may come from another version of the judge: the keys known today are typed,
    others kept."""

    schema_id: Literal["ref2va-ledger/1"] = Field(alias="schema")
    # Entries written before runs had entries of their own have no kind: attempts
    # (history/_ledger.py).
    kind: Literal["attempt", "run"] = "attempt"
    at: str | None = None
    run_id: str
    run_status: str
    campaign: str | None = None
    campaign_lock: str | None = None
    # attempts
    track: str | None = None
    candidate: str | None = None
    verdict: str | None = None
    reasons: list[str] | None = None
    open_checks: list[str] | None = None
    attempt: int | None = None
    earlier: list[str] | None = None
    holm: str | None = None
    p_value: Number | None = None
    stand_in_weights: list[str] | None = None
    localized: str | None = None
    latency: LatencySummary | None = None
    quality: dict[str, Any] | None = None
    # the candidate record the campaign declares, and what ran (record.entries)
    description: str | None = None
    hypothesis: str | None = None
    attribution: dict[str, Any] | None = None
    change_class: str | None = None
    scope_decision: dict[str, Any] | None = None
    enabled_path: dict[str, Any] | None = None
    profile_diff: dict[str, Any] | None = None
    # runs
    wall_s: Number | None = None
    instances: int | None = None
    instance_s: Number | None = None
    device_s: Number | None = None
    devices: int | None = None


class Ledger(Record):
    """The campaign's ledger (<campaign>.ledger.jsonl): this run's entries appended at its end,
    and every entry of the campaign's record as read back then."""

    file: str
    appended: int = Field(ge=0)
    torn_tail: bool
    history: list[LedgerEntry]


Preference: TypeAlias = Literal["b0", "candidate", "same"]
Difference: TypeAlias = Literal["none", "minor", "major"]


class Rating(Record):
    pair: str
    track: str
    candidate: str
    seed: int
    kind: Literal["quality", "measured"]
    preferred: Preference | None
    visible_differences: Difference | None
    audio_differences: Difference | None
    notes: str


class RatingSummary(Record):
    track: str
    candidate: str
    pairs: int
    rated: int
    preferred: dict[Preference, int]
    visible_differences: dict[Difference, int]
    audio_differences: dict[Difference, int]


class HumanEvaluation(Record):
    """One set of ratings of the blind review sheet (record.ingest): apart from the automatic
    gates, read by no verdict."""

    review_id: str
    reviewer: str
    ingested_at: str
    file_sha256: Sha256
    unrated_pairs: list[str]
    ratings: list[Rating]
    summary: list[RatingSummary]
