"""The evidence's latency records: each timed request (a sample: the request as sent and what
came back) and the latency check's data (the instances as they ran, warm-up, spreads, caching
probe, the ratio interval and its tails), with the summary of its decision the ledger keeps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, Field

from ref2va_accept.core import Check, DecisionRule, IntervalReason, Unit, Verdict
from ref2va_accept.evidence._base import Number, Record
from ref2va_accept.evidence._closed_sets import BaselineInstances, Design

if TYPE_CHECKING:
    from ref2va_accept.evidence._checks_records import LatencyRatioCheck

__all__ = [
    "CachingInstance",
    "CachingProbe",
    "Futility",
    "LatencyData",
    "LatencyInstance",
    "LatencyInterval",
    "LatencyStopped",
    "LatencySummary",
    "RatioInterval",
    "ReferenceFile",
    "RequestRecord",
    "Sample",
    "Spread",
    "TailClaim",
    "WarmupRule",
]


# -- samples --------------------------------------------------------------------------------------


class ReferenceFile(Record):
    """A reference file as the request sent it, by size and hash (timing.ReferenceFile holds
    its bytes, to send)."""

    filename: str
    mime: str
    bytes: int
    sha256: str


class RequestRecord(Record):
    """The request as sent (timing.GenerationRequest.describe builds it: file contents by
    hash)."""

    fields: dict[str, str]
    references: list[ReferenceFile]


class Sample(Record):
    """One timed request and what came back (timing.TimedClient.generate builds it, the
    request as sent included); the payload of a `sample` event and a line of samples.jsonl."""

    model_config = ConfigDict(frozen=True)

    sample_id: str
    arm: str
    track: str
    kind: str
    index: int
    seed: int | None
    started_at: str
    ok: bool
    failure: str | None
    detail: str | None
    status: int | None
    latency_s: Number | None
    ttfb_s: Number | None
    body_bytes: int
    sha256: str | None
    content_type: str | None
    server_request_id: str | None
    server_model: str | None
    inference_time_s: Number | None
    stage_durations: dict[str, Any] | None
    peak_memory_mb: Number | None
    media_file: str | None
    extra: dict[str, Any]
    request: RequestRecord
    dump_dir: str | None = Field(default=None,
                                 description="its comparison points, when it dumped any")


# -- the latency check's data (judging.judge_latency) -------------------------------------------

class LatencyInstance(Record):
    """One instance as it ran (built by judging's InstanceRun.record)."""

    arm: str
    position: int
    warmups_s: list[Number]
    steady: bool
    measured_s: list[Number]
    distinct_s: list[Number]
    value_s: Number | None = Field(description="the median of its measured requests")
    hosted_gate: list[Check] | None = Field(
        default=None, description="the quality checks of the candidate's gate it ran first")
    warmups_from_gate: int | None = None


class WarmupRule(Record):
    min: int
    max: int
    steady_fraction: Number | None


class Spread(Record):
    """An arm's relative spread (standard deviation over mean) between and within instances
    (timing.spread): between the per-instance values (None below two instances), within the
    instances' steady windows, pooled (None if none has two values)."""

    model_config = ConfigDict(frozen=True)

    between_instances: Number | None
    within_instance: Number | None
    instances: int


class CachingInstance(Record):
    repeated_median_s: Number
    distinct_fastest_s: Number


class CachingProbe(Record):
    instances: list[CachingInstance]
    ratios: list[Number]
    margin: Number


class Futility(Record):
    stopped_after_position: int
    own_instances_not_started: int


class RatioInterval(Record):
    """An interval for the candidate/B0 latency ratio, one-sided at `confidence` at each end:
    the distribution-free rank interval (Lehmann/Moses, `k`), or the Welch interval on log
    values (`df`, `se_log`, set for that rule only; k is 0 there) (timing.ratio_interval)."""

    model_config = ConfigDict(frozen=True)

    rule: DecisionRule
    k: int
    lower: Number | None
    upper: Number | None
    n_baseline: int
    n_candidate: int
    confidence: Number
    one_sided_each_end: bool
    ratios: tuple[Number, ...]
    df: Number | None = None  # Welch-Satterthwaite degrees of freedom (Welch rule only)
    se_log: Number | None = None  # standard error of the log ratio (Welch rule only)


class TailClaim(Record):
    """A percentile an arm's sample may claim (timing.tail_claims); value None (null) below
    the early-stopping floor (`required` samples)."""

    model_config = ConfigDict(frozen=True)

    arm: str
    percentile: Number
    value: Number | None
    samples: int
    required: int


class LatencyInterval(Record):
    """The latency interval's verdict for one track and candidate, with every number it rests
    on (timing.latency_verdict): the latency check's typed result."""

    model_config = ConfigDict(frozen=True)

    verdict: Verdict
    reasons: tuple[IntervalReason, ...]
    target: Number
    rule: DecisionRule
    p_value: Number | None  # of "ratio >= target" under the rule (timing's p_value)
    confidence: Number
    interval: RatioInterval
    ratio_of_medians: Number
    ratio_of_means: Number
    baseline: tuple[Number, ...]
    candidate: tuple[Number, ...]
    tails: tuple[TailClaim, ...]
    note: str
    unit: Unit


class LatencyData(Record):
    """A latency comparison that ran (judging.judge_latency). The protocol may end before a
    decision (a request failed, a warm-up never became steady, drift): what it had measured is
    kept, and `interval` is absent."""

    unit: Unit
    design: Design
    instances_per_arm: int | None
    baseline_instances: BaselineInstances
    order_seed: int
    order_drawn: bool
    decision_rule: DecisionRule
    sequence: list[str]
    instances: list[LatencyInstance]
    warmup_rule: WarmupRule
    b0_spread: Spread
    candidate_spread: Spread
    # Set as the protocol goes on; absent where it ended before.
    drift: Number | None = Field(default=None, description="B0's drift, first to last")
    caching_probe: CachingProbe | None = None
    futility: Futility | None = None
    baseline_s: list[Number] | None = None
    candidate_s: list[Number] | None = None
    baseline_shared_with: list[str] | None = None
    baseline_tracks: list[str] | None = None
    verdict: Verdict | None = None
    interval: LatencyInterval | None = None


class LatencyStopped(Record):
    """No instance was started: a quality check stopped the candidate first."""

    stopped_on: str


class LatencySummary(Record):
    """A latency_ratio check's decision in brief, as the ledger's entries and merge.json keep
    it: ratio of medians, interval bounds, target and verdict (:meth:`of`)."""

    ratio_of_medians: Number | None
    lower: Number | None
    upper: Number | None
    target: Number | None
    # A string, not the vocabulary's Verdict: ledger entries of earlier judges are read too.
    verdict: str | None

    @classmethod
    def of(cls, check: LatencyRatioCheck | None) -> LatencySummary | None:
        """The summary of a recorded latency_ratio check; None without one, or when it has no
        interval (the protocol ended before a decision, or never started)."""
        data = None if check is None else check.data
        interval = data.interval if isinstance(data, LatencyData) else None
        if interval is None:
            return None
        return cls(ratio_of_medians=interval.ratio_of_medians, lower=interval.interval.lower,
                   upper=interval.interval.upper, target=interval.target,
                   verdict=interval.verdict.value)
