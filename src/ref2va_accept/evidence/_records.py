"""The evidence bundle's records, typed: one pydantic model per event payload and per section.

What the judge writes to `events.jsonl` and `evidence.json` is read back into these models and
nowhere else by key: ``evidence.project`` (and ``rebuild``, ``read_bundle_file``) give a
:class:`Bundle`, ``EvidenceBundle.record`` is the running run's, and every reader uses
attributes. Each model matches what its writer produces (the writer named on it); an unknown or
misspelt key, a missing one or a value of the wrong kind is an error naming the event and the
field. The published JSON Schema of evidence.json is generated from :class:`Bundle`
(:func:`evidence_schema`; ``ref2va-accept schema`` writes it), so the models, the schema and the
writers cannot drift apart.

The models read and write the format that the evidence has always had: a record dumps back
(:meth:`Record.json_dict`: by alias, with exactly the keys that were read, none added) to the
JSON it was read from, and the bundle's text is :func:`bundle_text`.

Checks are a union discriminated by their `name` (one class per check of the vocabulary, e.g.
:class:`LatencyRatioCheck`), each with its own typed `data`; ``Bundle.checks_of(LatencyRatioCheck)``
gives one kind. Where a writer leaves a check's data empty on some path (a request that failed
before anything was compared), its data is that kind's model or :class:`NoData`.

Numbers keep the type they were written with (`Number`: an int stays an int); figures that JSON
cannot hold as numbers are the strings "inf", "-inf" and "nan" where their writers spell them
out (`JsonNumber`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final, Generic, Literal, TypeAlias, TypeVar

from pydantic import (
    AfterValidator,
    Field,
    TypeAdapter,
    WithJsonSchema,
)
from pydantic.json_schema import GenerateJsonSchema, SkipJsonSchema

from ref2va_accept.core import (
    CHECK_REASON_CATEGORIES,
    Check,
    CheckStatus,
    DecisionRule,
    IntervalReason,
    Reason,
    Unit,
    Verdict,
)
from ref2va_accept.evidence._base import (
    JsonNumber,
    Number,
    OpenRecord,
    Record,
    Sha256,
    Timestamp,
)
from ref2va_accept.evidence._profile_records import Profile

__all__ = [
    "SCHEMA_ID",
    "SCHEMA_VERSION",
    "SECTION_KEYS",
    "AnyCheck",
    "Bundle",
    "Campaign",
    "Cleanup",
    "Event",
    "Instance",
    "LatencyData",
    "LatencyInterval",
    "LatencyRatioCheck",
    "LatencyStopped",
    "LatencySummary",
    "LedgerEntry",
    "LosslessGateCheck",
    "LosslessGateData",
    "LossyGateCheck",
    "LossyGateData",
    "Media",
    "NoData",
    "Record",
    "Sample",
    "VerdictRecord",
    "bundle_text",
    "check_record",
    "evidence_schema",
]

SCHEMA_VERSION: Final = "ref2va-evidence/1"
SCHEMA_ID: Final = "https://ref2va-accept/schemas/evidence.schema.json"


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

# Closed sets defined by the modules that write them (tests/unit/test_records.py holds each
# equal to its source; importing those modules would pull the scoring stack into every reader).
EngineKind: TypeAlias = Literal["reference", "vllm-omni"]  # engines.EngineKindName
DeviceKind: TypeAlias = Literal["none", "npu", "cuda"]  # campaign.schema Devices.kind
PointStatus: TypeAlias = Literal[  # tensors.comparison.Status
    "equal", "differs", "missing_in_a", "missing_in_b", "dtype_mismatch", "shape_mismatch"]
ScoreKind: TypeAlias = Literal["vbench", "proxy", "fidelity", "consistency"]  # quality Kind
ScoreStatus: TypeAlias = Literal["ok", "open", "error"]  # quality.registry.ScoreStatus
# campaign.identity.pin
IdentityStatus: TypeAlias = Literal["match", "DRIFT", "unfilled", "not found"]
PartingKind: TypeAlias = Literal[  # judging.localize.capture.Kind
    "differs", "inputs_differ", "not_run", "uncovered", "only_in_candidate", "order", "none"]
RowStatus: TypeAlias = Literal["confirmed", "contradicted", "measured", "not_checked"]
RowKind: TypeAlias = Literal["guess", "risk"]  # bringup.rows.Kind
Design: TypeAlias = Literal["interleaved", "AB", "ABBA", "ABA"]  # LatencySettings.ordering
BaselineInstances: TypeAlias = Literal["per_candidate", "shared"]
GateDecision: TypeAlias = Literal["within", "broken", "open"]  # judging.WITHIN, BROKEN, OPEN
RunStatus: TypeAlias = Literal["running", "complete", "interrupted", "stopped", "failed_write",
                               "killed"]


# -- the run's header ----------------------------------------------------------------------------

class Environment(Record):
    """Where the judge ran (evidence.EvidenceBundle.create)."""

    python: str
    implementation: str
    machine: str
    system: str
    packages: dict[str, str | None] = Field(
        description="the versions of the packages a run depends on (null: not installed)")


class Freeze(Record):
    state: Literal["frozen", "not_frozen", "drifted"]
    lock_sha256: str | None
    problems: list[str]
    unfilled: list[str]
    verdict_cap: Reason | None = Field(
        description="the validity reason that caps every verdict of the run "
                    "(campaign.FreezeStatus.cap_reason)")


class Order(Record):
    """The seed every latency schedule of the run was ordered by: drawn for the run
    (protocol.order_seed: per_run), the campaign's fixed one, or given (--order-seed)."""

    seed: int
    drawn_per_run: bool
    given: bool


class Campaign(Record):
    """The campaign the run judged, and its freeze state (plugin.state.RunState.evidence)."""

    name: str
    file: str
    engine_kind: EngineKind
    source_pin: dict[str, Any]
    canonical: dict[str, Any] = Field(description="the campaign as frozen (canonical form)")
    freeze: Freeze
    order: Order


class StatusChange(Record):
    """The payload of a `status` event."""

    status: RunStatus
    finished_at: Timestamp | None


# -- verdicts ------------------------------------------------------------------------------------

class VerdictRecord(Record):
    """One track verdict of one candidate (evidence.TrackVerdict.to_dict)."""

    track: str
    candidate: str | None
    verdict: Verdict
    reasons: list[Reason]
    open_checks: list[Check]
    checks: dict[Check, CheckStatus]
    note: str
    holm: Literal["supported", "not supported"] | None = Field(
        description="with several candidates on the track: this one's verdict after Holm's "
                    "step-down over their latency p-values")
    p_value: Number | None
    attempt: int | None = Field(
        description="which attempt of this candidate on this track (the ledger's earlier ones "
                    "+ 1)")
    earlier: list[str]
    stand_in_weights: list[str] = Field(
        description="the seeded stand-in weights files this row's lossy scores came from "
                    "(declared by the campaign or recognised by their sha256); empty: real "
                    "weights, or no model scored")
    localized: str = Field(
        description="where a lossless candidate that is not bit-exact first parted from B0, as "
                    "its localization check named it (module path and step); empty when none did")


# -- check data ----------------------------------------------------------------------------------

class NoData(Record):
    """A check that records nothing beside its status and detail (`{}`)."""


class MediaCheckData(Record):
    """b0_media / candidate_media (arms.media_check)."""

    sample_id: str
    latency_s: Number | None
    sha256: str | None


class CleanupCheckData(Record):
    instance: str
    stop_s: Number


class PointRecord(Record):
    """One comparison point, B0 (a) against the candidate (b) (tensors.PointComparison)."""

    name: str
    status: PointStatus
    equal: bool
    dtype_a: str | None
    dtype_b: str | None
    shape_a: list[int] | None
    shape_b: list[int] | None
    elements: int
    differing: int
    fraction: Number
    first_index: list[int] | None
    max_abs_diff: JsonNumber | None
    max_ulp: int | None


class UnobservedRequest(Record):
    track: str
    kind: str


class GateShared(Record):
    """A B0 check with nothing compared (its requests failed), but which names the tracks its
    gate instances served (judging.mark_shared)."""

    gate_instances_served: list[str] | None = None
    unobserved_request: UnobservedRequest | None = None


class BaselineDeterminismData(Record):
    seed: int | None
    points: list[PointRecord]
    # judging.mark_shared: B0's gate instances served these tracks too
    gate_instances_served: list[str] | None = None
    unobserved_request: UnobservedRequest | None = None


class LosslessGateData(Record):
    seed: int | None
    points: list[PointRecord]
    first_divergence: str | None


class EnabledPathAuditData(Record):
    approximate: list[str] | None
    dtype: str | None


class UnobservedOutputData(Record):
    # the hosted gate: whether the unobserved output was a measured request of the instance
    unobserved_request: Literal["measured", "unobserved"] | None = None


class WeightRecord(Record):
    """A weights file that made model-based scores (quality.registry.WeightIdentity)."""

    name: str
    sha256: str
    stand_in: bool | None = None
    declared: bool | None = None


class ScoreRecord(Record):
    """One score of one output (quality.registry.Score.to_dict)."""

    dimension: str
    kind: ScoreKind
    scorer: str
    version: str
    weights: list[WeightRecord]
    value: JsonNumber | None
    status: ScoreStatus
    detail: str
    extra: dict[str, Any]


class BaselineVariabilityData(Record):
    same_seed_spread: dict[str, Number]
    different_seed_spread: dict[str, Number]
    gated: list[str]
    limit: Number
    threshold: Number
    below_limit: dict[str, bool]
    unmeasured: list[str]
    baseline_scores: list[ScoreRecord]
    gate_instances_served: list[str] | None = None


class GateError(Record):
    """One gated dimension of one seed, candidate against B0 (judging._error_dict)."""

    scorer: str
    dimension: str
    kind: ScoreKind
    candidate: Number | None
    baseline: Number | None
    error: Number | None
    status: Literal["ok", "open"]
    detail: str
    threshold: Number
    gate: GateDecision
    weights: list[WeightRecord] | None = None


class FidelityGate(Record):
    below_minimum: list[str]
    open: list[str]


class FidelityFigures(Record):
    """Fidelity of a candidate's video to B0's (quality.fidelity.FidelityReport.to_dict)."""

    frames: int
    psnr_db: JsonNumber
    psnr_min_db: JsonNumber
    ssim_mean: Number
    ssim_min: Number
    identical_frames: int
    all_identical: bool
    psnr_per_frame: list[JsonNumber]
    ssim_per_frame: list[Number]


class NotCompared(Record):
    """A comparison that could not be made: why."""

    error: str


class AudioStatsRecord(Record):
    sample_rate: JsonNumber
    channels: JsonNumber
    samples: JsonNumber
    duration_s: JsonNumber
    start_time_s: JsonNumber | None
    loudness_lufs: JsonNumber
    peak_dbfs: JsonNumber
    clipping_ratio: JsonNumber
    silence_ratio: JsonNumber


class AudioComparisonRecord(Record):
    """A candidate's audio against B0's (quality.audio.AudioComparison.to_dict)."""

    scorer_version: str
    length_slack_samples: int
    candidate: AudioStatsRecord
    baseline: AudioStatsRecord
    lag_samples: JsonNumber
    lag_ms: JsonNumber
    lag_peak_correlation: JsonNumber
    compared_samples: JsonNumber
    snr_db: JsonNumber
    si_sdr_db: JsonNumber
    lsd_db: JsonNumber
    mrstft: JsonNumber
    mrstft_spectral_convergence: JsonNumber
    mrstft_log_magnitude: JsonNumber
    loudness_diff_lu: JsonNumber
    length_mismatch_samples: JsonNumber
    length_within_aac_slack: bool
    start_time_diff_s: JsonNumber | None
    scorers: dict[str, str]


class LossySeed(Record):
    seed: int | None
    threshold: Number
    errors: list[GateError]
    fidelity_gate: FidelityGate
    fidelity: FidelityFigures | NotCompared
    audio: AudioComparisonRecord | NotCompared


class LossyGateData(Record):
    threshold: Number
    normalized: bool
    worst: dict[str, Number]
    min_psnr_db: Number | None
    min_ssim: Number | None
    per_seed: list[LossySeed]


class ScorerWeightsData(Record):
    weights: list[WeightRecord]
    stand_ins: list[str]
    undeclared: list[str]


class TimedRule(Record):
    """The minimums a differing timed output must reach (judging.lossy_rule)."""

    min_psnr_db: Number
    min_psnr_from: str
    min_ssim: Number | None
    min_audio_snr_db: Number


class TimedPair(Record):
    seed: int | None
    timed: str
    scored: str
    identical: bool
    error: str | None = None
    psnr_db: JsonNumber | None = None
    ssim_mean: JsonNumber | None = None
    audio_snr_db: JsonNumber | None = None


class TimedOutputFidelityData(Record):
    rule: TimedRule
    pairs: list[TimedPair]


class ResourceInterferenceData(Record):
    device_kind: DeviceKind
    devices: list[int]


class EngineStartData(Record):
    instance: str
    log: str | None = None
    exit_code: int | None = None


class IdentityRow(Record):
    """One engine.source_pin field beside the host's value (campaign.identity.IdentityRow)."""

    field: str
    frozen: str
    host: str | None
    status: IdentityStatus
    source: str


class HostIdentityData(Record):
    rows: list[IdentityRow]


class DeviceMemoryReleaseData(Record):
    instance: str
    waited_s: Number
    held_mb: dict[str, Number]


class InputProblem(Record):
    """A track input that is missing or not its pinned bytes (campaign.InputProblem)."""

    track: str
    field: str
    path: str
    expected_sha256: str
    found_sha256: str | None
    unreadable: str | None


class InputsData(Record):
    inputs: list[InputProblem]


class WarmupDemonstrationData(Record):
    warmup_steps: int
    full_s: list[Number]
    cheap_s: list[Number]
    ratio: Number
    limit: Number
    measured_at: Timestamp
    per_duration_yaml: str


class Parting(Record):
    """Where two capture logs part (judging.localize.capture.Parting)."""

    kind: PartingKind
    module: str | None
    b0: str | None
    candidate: str | None
    before: str | None
    output: int | None
    skipped: list[str]
    sentence: str


class LocalizedFigures(PointRecord):
    """The named module's output (else the pictured point), B0 against the candidate."""


class DiffPicture(Record):
    """Where the output differs, binned (judging.localize.picture.DiffMap)."""

    shape: list[int]
    rows: int
    cols: int
    row_edges: list[int]
    col_edges: list[int]
    share: list[list[Number]]
    differing: int


class LocalizeRequest(Record):
    arm: str
    level: int
    within: str | None
    ok: bool
    stopped: bool | None = Field(None, description=(
        "the engine stopped the request on purpose once its capture and points were written "
        "(capture.stop; its answer is then not an MP4)"))
    latency_s: Number | None = None
    dump_dir: str | None = None
    reused: bool | None = None


class LocalizationData(Record):
    """What the localization pass found (judging.localize.result.Localization.to_dict)."""

    point: str
    seed: int | None
    stage: str | None
    step: int | None
    first_step: int | None
    point_step: int | None
    found: bool
    module: str | None
    where: str
    sentence: str
    level1: Parting | None
    level2: Parting | None
    figures: LocalizedFigures | NotCompared | None
    inputs_equal: bool | None
    picture: DiffPicture | None
    picture_of: str
    requests: list[LocalizeRequest]


# -- the latency check's data (judging.judge_latency) -------------------------------------------

class LatencyInstance(Record):
    """One instance as it ran (judging.InstanceRun.to_dict)."""

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
    """An arm's relative spread (sd / mean) between and within instances (timing.Spread)."""

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
    """The interval for the candidate/B0 ratio (timing.RatioInterval.to_dict)."""

    rule: DecisionRule
    k: int
    lower: Number | None
    upper: Number | None
    n_baseline: int
    n_candidate: int
    confidence: Number
    one_sided_each_end: bool
    ratios: list[Number]
    df: Number | None = None  # Welch rule only
    se_log: Number | None = None  # Welch rule only


class TailClaim(Record):
    arm: str
    percentile: Number
    value: Number | None
    samples: int
    required: int


class LatencyInterval(Record):
    """The latency check's typed result (timing.LatencyVerdict.to_dict)."""

    verdict: Verdict
    reasons: list[IntervalReason]
    target: Number
    rule: DecisionRule
    p_value: Number | None
    confidence: Number
    interval: RatioInterval
    ratio_of_medians: Number
    ratio_of_means: Number
    baseline: list[Number]
    candidate: list[Number]
    tails: list[TailClaim]
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


# -- checks --------------------------------------------------------------------------------------

N = TypeVar("N")
D = TypeVar("D")


class CheckRecord(Record, Generic[N, D]):
    """One check of one arm in one track (evidence.CheckResult.to_dict)."""

    track: str
    arm: str
    name: N
    status: CheckStatus
    reason: CheckReason | None
    detail: str
    data: D


class B0MediaCheck(CheckRecord[Literal[Check.B0_MEDIA], MediaCheckData]):
    pass


class CandidateMediaCheck(CheckRecord[Literal[Check.CANDIDATE_MEDIA], MediaCheckData]):
    pass


class CleanupCheck(CheckRecord[Literal[Check.CLEANUP], CleanupCheckData]):
    pass


class BaselineDeterminismCheck(CheckRecord[Literal[Check.BASELINE_DETERMINISM],
                                           BaselineDeterminismData | GateShared]):
    pass


class LosslessGateCheck(CheckRecord[Literal[Check.LOSSLESS_GATE], LosslessGateData | NoData]):
    pass


class EnabledPathAuditCheck(CheckRecord[Literal[Check.ENABLED_PATH_AUDIT],
                                        EnabledPathAuditData | NoData]):
    pass


class UnobservedOutputCheck(CheckRecord[Literal[Check.UNOBSERVED_OUTPUT], UnobservedOutputData]):
    pass


class TimedOutputCheck(CheckRecord[Literal[Check.TIMED_OUTPUT], NoData]):
    pass


class BaselineVariabilityCheck(CheckRecord[Literal[Check.BASELINE_VARIABILITY],
                                           BaselineVariabilityData | GateShared]):
    pass


class LossyGateCheck(CheckRecord[Literal[Check.LOSSY_GATE], LossyGateData | NoData]):
    pass


class TimedOutputFidelityCheck(CheckRecord[Literal[Check.TIMED_OUTPUT_FIDELITY],
                                           TimedOutputFidelityData]):
    pass


class ResourceInterferenceCheck(CheckRecord[Literal[Check.RESOURCE_INTERFERENCE],
                                            ResourceInterferenceData]):
    pass


class LatencyRatioCheck(CheckRecord[Literal[Check.LATENCY_RATIO], LatencyData | LatencyStopped]):
    pass


class CachingProbeCheck(CheckRecord[Literal[Check.CACHING_PROBE], NoData]):
    pass


class EngineStartCheck(CheckRecord[Literal[Check.ENGINE_START], EngineStartData]):
    pass


class HostIdentityCheck(CheckRecord[Literal[Check.HOST_IDENTITY], HostIdentityData]):
    pass


class DeviceMemoryReleaseCheck(CheckRecord[Literal[Check.DEVICE_MEMORY_RELEASE],
                                           DeviceMemoryReleaseData]):
    pass


class InputsCheck(CheckRecord[Literal[Check.INPUTS], InputsData]):
    pass


class DeclaredTimeCheck(CheckRecord[Literal[Check.DECLARED_TIME], NoData]):
    pass


class WarmupDemonstrationCheck(CheckRecord[Literal[Check.WARMUP_DEMONSTRATION],
                                           WarmupDemonstrationData | NoData]):
    pass


class ScorerWeightsCheck(CheckRecord[Literal[Check.SCORER_WEIGHTS], ScorerWeightsData]):
    pass


class LocalizationCheck(CheckRecord[Literal[Check.LOCALIZATION], LocalizationData]):
    pass


AnyCheck: TypeAlias = Annotated[
    B0MediaCheck | CandidateMediaCheck | CleanupCheck | BaselineDeterminismCheck
    | LosslessGateCheck | EnabledPathAuditCheck | UnobservedOutputCheck | TimedOutputCheck
    | BaselineVariabilityCheck | LossyGateCheck | TimedOutputFidelityCheck
    | ResourceInterferenceCheck | LatencyRatioCheck | CachingProbeCheck | EngineStartCheck
    | HostIdentityCheck | DeviceMemoryReleaseCheck | InputsCheck | DeclaredTimeCheck
    | WarmupDemonstrationCheck | ScorerWeightsCheck | LocalizationCheck,
    Field(discriminator="name")]
CHECK_ADAPTER: TypeAdapter[AnyCheck] = TypeAdapter(AnyCheck)


def check_record(check: Any) -> AnyCheck:
    """A check as the evidence records it, typed: from a `evidence.CheckResult` (its
    ``to_dict()`` as JSON reads it) or a mapping of the recorded form."""
    raw = check if isinstance(check, Mapping) else check.to_dict()
    return CHECK_ADAPTER.validate_python(json.loads(json.dumps(raw)))


# -- instances, samples, media -------------------------------------------------------------------

class ProcessRecord(Record):
    pid: int
    name: str
    status: str


class StopStep(Record):
    """One step of stopping an instance, in order (engines.StopStep)."""

    action: Literal["SIGTERM main", "SIGTERM group", "SIGKILL"]
    at_s: Number
    waited_s: Number
    alive_after: int = Field(ge=0)


class Cleanup(Record):
    """What stopping one instance took and what it left behind (engines.CleanupAudit.to_dict);
    the payload of an `audit` event."""

    arm: str
    instance: str
    pid: int | None
    exit_code: int | None
    processes_seen: int
    needed_sigkill: list[ProcessRecord]
    survivors: list[ProcessRecord]
    port_free: bool
    stop_s: Number
    lifetime_s: Number | None = Field(
        description="spawn to stopped, the wall time the budget charges")
    clean: bool
    problems: list[str]
    steps: list[StopStep] = Field(
        description="the stop in order: SIGTERM to the main process, a measured wait, then to "
                    "the group, then SIGKILL")


class Instance(Record):
    """An engine instance: its launch record (engines.LaunchSpec.to_dict with its track and run;
    the payload of an `instance` event) and, once stopped, its `cleanup`. An audit of an
    instance never launched in this run makes one with its `instance` and `cleanup` alone."""

    arm: str | None = None
    instance: str | None
    argv: list[str] | None = None
    env: dict[str, str] | None = None
    port: int | None = None
    startup_timeout_s: Number | None = None
    shutdown_grace_s: Number | None = None
    log: str | None = None
    track: str | None = None
    run: str | None = None
    cleanup: Cleanup | None = None


class ReferenceFile(Record):
    filename: str
    mime: str
    bytes: int
    sha256: str


class RequestRecord(Record):
    """The request as sent (timing.GenerationRequest.describe: file contents by hash)."""

    fields: dict[str, str]
    references: list[ReferenceFile]


class Sample(Record):
    """One timed request and what came back (timing.Sample.to_dict with its `request`); the
    payload of a `sample` event and a line of samples.jsonl."""

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


class VideoStream(Record):
    codec: str
    width: int
    height: int
    fps: Number
    pix_fmt: str | None
    frames_decoded: int
    frames_declared: int | None
    duration_s: Number
    start_time_s: Number | None
    profile: str | None
    colour: str | None
    encoder_settings: str | None


class AudioStream(Record):
    codec: str
    sample_rate: int
    channels: int
    layout: str | None
    samples_decoded: int
    duration_s: Number
    start_time_s: Number | None


class MediaProbe(Record):
    """What decoding an MP4 found (media.MediaProbe.to_dict)."""

    name: str
    size_bytes: int
    sha256: str
    container: str
    video: VideoStream | None
    audio: AudioStream | None
    decode_errors: list[str]


class MediaProblem(Record):
    code: str
    message: str


class Media(Record):
    """The probe of one sample's MP4 (arms.Arms._request); the payload of a `media` event."""

    sample_id: str
    file: str | None
    probe: MediaProbe | None
    problems: list[MediaProblem]


# -- sections ------------------------------------------------------------------------------------

class BringupRow(Record):
    """One row of a host bring-up (bringup.rows.Row.to_dict)."""

    id: str
    kind: RowKind
    question: str
    status: RowStatus
    seen: str
    detail: str
    data: dict[str, Any]


class Bringup(Record):
    """A host bring-up's rows (ref2va-accept bringup; its bringup.json holds them with
    everything it measured)."""

    campaign: str
    rows: list[BringupRow]
    failure: str | None


class HostIdentity(Record):
    """The identity preflight: each engine.source_pin field beside the host's value
    (campaign.identity.Preflight.to_dict)."""

    engine_kind: EngineKind
    ok: bool
    rows: list[IdentityRow]


class Poll(Record):
    at_s: Number
    readable: bool
    used_mb: dict[str, Number]
    problem: str | None


class IdleLevel(Record):
    used_mb: dict[str, Number] | None
    problem: str | None


class MemoryWait(Record):
    """The wait for device memory after one stop (engines.MemoryGuard.after_stop)."""

    instance: str
    arm: str
    released: bool
    waited_s: Number
    held_mb: dict[str, Number]
    problem: str | None
    polls: list[Poll]


class DeviceMemoryMeasured(Record):
    """The assigned devices' idle memory and the wait for it after every stop."""

    status: Literal["measured"]
    kind: DeviceKind
    devices: list[int]
    timeout_s: Number
    poll_s: Number
    tolerance_mb: Number
    idle: IdleLevel | None
    waits: list[MemoryWait]


class DeviceMemoryNotApplicable(Record):
    status: Literal["not_applicable"]
    kind: DeviceKind
    reason: str


DeviceMemory: TypeAlias = Annotated[DeviceMemoryMeasured | DeviceMemoryNotApplicable,
                                    Field(discriminator="status")]


class Leftover(Record):
    """An engine process of a dead run, stopped before this run's first engine."""

    pid: int
    name: str
    tag: str
    stopped_by: Literal["SIGTERM", "SIGKILL", "survived"]


class TrackNeed(Record):
    track: str
    requests: int
    dump_requests: int
    mp4_bytes: int
    dump_bytes: int
    bounded_points: list[str]
    localize_bytes: int


class Disk(Record):
    """The run's evidence size estimated before any engine started (planning.DiskCheck.to_dict),
    against the free space of the evidence folder's filesystem."""

    estimate_bytes: int = Field(ge=0)
    margin: Number = Field(ge=1)
    need_bytes: int = Field(ge=0)
    free_bytes: int = Field(ge=0)
    fits: bool
    skipped: bool = Field(description="--ref2va-skip-disk-check: compared, never refused")
    folder: str
    record_bytes: int
    tracks: list[TrackNeed]


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
    """The run against the campaign's budget before any engine started (planning.BudgetCheck):
    ceilings with their authorizations, what earlier runs spent, what this run plans."""

    wall_ceiling_h: Number
    device_ceiling_h: Number
    authorizations: list[Authorization]
    spent_before: Spent
    planned_wall_s: list[Number] | None
    planned_device_s: list[Number] | None
    devices: int
    over: list[str]
    unpriced: list[str]


class LedgerEntry(OpenRecord):
    """An entry of the campaign's ledger (record.entries): a candidate attempt or a run. Entries
    of earlier runs may come from another version of the judge: the keys known today are typed,
    others kept."""

    schema_id: Literal["ref2va-ledger/1"] = Field(alias="schema")
    # Entries written before runs had entries of their own have no kind: attempts
    # (record/_ledger.py).
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


# -- the bundle ----------------------------------------------------------------------------------

C = TypeVar("C", bound=CheckRecord[Any, Any])
_RUN_ID = r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$"


class Bundle(Record):
    """One run of the acceptance suite: what it judged, with what, and what it saw
    (evidence/<run-id>/evidence.json). The projection of the run's events.jsonl; every string
    is sanitized (<host>, <user>, <ip>, <repo>, <abs>/name)."""

    schema_id: Literal["ref2va-evidence/1"] = Field(alias="schema")
    run_id: str = Field(pattern=_RUN_ID, description=(
        "a UTC time stamp and six random hex digits, or the name given with --run-id"))
    status: RunStatus = Field(description=(
        "running until the session ends; interrupted after Ctrl-C or SIGTERM; stopped when the "
        "harness refused to start an engine (an input not matching its pin, too little free "
        "disk for the estimated evidence; the notes say which); failed_write when a file of the "
        "evidence could not be written (a full disk; the notes or the terminal name it); killed "
        "when the judge died and its reaper ended the run"))
    started_at: Timestamp
    finished_at: Timestamp | None
    harness_version: str
    environment: Environment
    campaign: Campaign | None = Field(
        description="null until the first campaign scenario asks for the evidence")
    verdicts: list[VerdictRecord] = Field(
        description="one per track and candidate of the tracks that ran; set at the end")
    checks: list[AnyCheck]
    instances: list[Instance]
    samples: list[Sample]
    media: list[Media]
    notes: list[str]
    # Sections: absent until a `section` event sets one (evidence.SECTIONS).
    bringup: Bringup | SkipJsonSchema[None] = None
    host_identity: HostIdentity | SkipJsonSchema[None] = None
    device_memory: DeviceMemory | SkipJsonSchema[None] = None
    sanitized_files: Annotated[int, Field(ge=0)] | SkipJsonSchema[None] = Field(
        default=None, description="text files of the run rewritten by the final scrub")
    leftovers: list[Leftover] | SkipJsonSchema[None] = Field(
        default=None, description="engine processes of a dead run (their judge gone) stopped "
                                  "before this run's first engine")
    disk: Disk | SkipJsonSchema[None] = None
    ledger: Ledger | SkipJsonSchema[None] = None
    budget: Budget | SkipJsonSchema[None] = None
    human_evaluation: list[HumanEvaluation] | SkipJsonSchema[None] = Field(
        default=None, description="ratings of the blind review sheet (ref2va-accept review), "
                                  "one set per ratings file ingested after the run")
    profiles: list[Profile] | SkipJsonSchema[None] = Field(
        default=None, description="the profiling scenario's entries, one per profiled arm")

    # -- queries ---------------------------------------------------------------------------------
    def checks_of(self, kind: type[C], *, track: str | None = None,
                  arm: str | None = None) -> list[C]:
        """The checks of one kind (e.g. LatencyRatioCheck), filtered on what is given."""
        return [c for c in self.checks if isinstance(c, kind)
                and (track is None or c.track == track) and (arm is None or c.arm == arm)]

    def check_of(self, kind: type[C], track: str, arm: str) -> C | None:
        """The first check of one kind for an arm of a track, None when none was recorded."""
        return next(iter(self.checks_of(kind, track=track, arm=arm)), None)

    def samples_where(self, *, track: str | None = None, arm: str | None = None,
                      kind: str | None = None, ok: bool | None = None) -> list[Sample]:
        return [s for s in self.samples if (track is None or s.track == track)
                and (arm is None or s.arm == arm) and (kind is None or s.kind == kind)
                and (ok is None or s.ok == ok)]

    def instances_where(self, *, track: str | None = None,
                        arm: str | None = None) -> list[Instance]:
        return [i for i in self.instances if (track is None or i.track == track)
                and (arm is None or i.arm == arm)]

    def media_of(self, sample_id: str) -> Media | None:
        return next((m for m in self.media if m.sample_id == sample_id), None)


# The optional top-level sections, in the order Bundle declares them.
SECTION_KEYS: Final = ("bringup", "host_identity", "device_memory", "sanitized_files",
                       "leftovers", "disk", "ledger", "budget", "human_evaluation", "profiles")
_SECTION_ADAPTERS: Final[Mapping[str, TypeAdapter[Any]]] = {
    "bringup": TypeAdapter(Bringup), "host_identity": TypeAdapter(HostIdentity),
    "device_memory": TypeAdapter(DeviceMemory),
    "sanitized_files": TypeAdapter(Annotated[int, Field(ge=0)]),
    "leftovers": TypeAdapter(list[Leftover]), "disk": TypeAdapter(Disk),
    "ledger": TypeAdapter(Ledger), "budget": TypeAdapter(Budget),
    "human_evaluation": TypeAdapter(list[HumanEvaluation]),
    "profiles": TypeAdapter(list[Profile])}


def section_value(key: str, value: Any) -> Any:
    """A section's value, typed (key must be one of SECTION_KEYS)."""
    return _SECTION_ADAPTERS[key].validate_python(value)


def bundle_text(bundle: Bundle) -> str:
    """evidence.json's text: the bundle as JSON, two-space indented, keys sorted as the event
    log writes them."""
    return json.dumps(bundle.json_dict(), indent=2, sort_keys=True) + "\n"


# -- the published JSON Schema -------------------------------------------------------------------

SCHEMA_TITLE: Final = "Ref2VA evidence bundle (evidence/<run-id>/evidence.json)"


class _SchemaWithoutFieldTitles(GenerateJsonSchema):
    """Pydantic's schema without a title on every field (its name, capitalised: noise)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _one_line(node: Any) -> Any:
    """``node`` with every description on one line (docstrings keep their line breaks)."""
    if isinstance(node, dict):
        return {k: " ".join(v.split()) if k == "description" and isinstance(v, str)
                else _one_line(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_one_line(v) for v in node]
    return node


def _by_ref(node: Any, inline: Mapping[str, Any], ref: str) -> Any:
    """``node`` with every copy of ``inline`` replaced by a reference to ``ref``."""
    if node == inline:
        return {"$ref": ref}
    if isinstance(node, dict):
        return {k: _by_ref(v, inline, ref) for k, v in node.items()}
    if isinstance(node, list):
        return [_by_ref(v, inline, ref) for v in node]
    return node


def evidence_schema() -> dict[str, Any]:
    """The JSON Schema of evidence.json (draft 2020-12), generated from :class:`Bundle`.

    A check is validated against the vocabulary's names, statuses and reasons first (`check`),
    then against the one class its name selects, so that a misspelt name is said at the name.
    """
    schema = Bundle.model_json_schema(by_alias=True, mode="validation",
                                      schema_generator=_SchemaWithoutFieldTitles)
    defs: dict[str, Any] = schema["$defs"]
    checks = schema["properties"]["checks"]
    defs["AnyCheck"] = checks["items"]
    defs["check"] = {
        "description": "a check: its name, status and reason from the judge's vocabulary "
                       "(the check vocabulary, Check), then the data its name records",
        "allOf": [{"type": "object",
                   "required": ["track", "arm", "name", "status", "reason", "detail", "data"],
                   "properties": {"name": {"$ref": "#/$defs/Check"},
                                  "status": {"$ref": "#/$defs/CheckStatus"},
                                  "reason": {"anyOf": [{"$ref": "#/$defs/CheckReason"},
                                                       {"type": "null"}]}}},
                  {"$ref": "#/$defs/AnyCheck"}]}
    checks["items"] = {"$ref": "#/$defs/check"}
    schema = _one_line(_by_ref(schema, CHECK_REASON_SCHEMA, "#/$defs/CheckReason"))
    schema["$defs"]["CheckReason"] = CHECK_REASON_SCHEMA
    head = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": SCHEMA_TITLE}
    order = ("description", "type", "additionalProperties", "required", "properties", "$defs")
    return head | {k: schema[k] for k in order} | {
        k: v for k, v in schema.items() if k not in (*order, "title")}


def schema_text() -> str:
    """The published schema file's text (src/ref2va_accept/schemas/evidence.schema.json)."""
    return json.dumps(evidence_schema(), indent=2, sort_keys=False) + "\n"


# -- the event log -------------------------------------------------------------------------------

class Event(Record):
    """One line of events.jsonl (evidence.EventLog.append): its number, time, kind and
    payload, which the kind's model reads (EVENT_MODELS, section_value)."""

    at: str
    data: Any
    event: str
    seq: int


class SectionEvent(Record):
    """The payload of a `section` event: which section, and its whole value."""

    key: str
    value: Any


def looks_like_bundle(data: Any) -> bool:
    """Whether parsed JSON says it is an evidence bundle (its `schema`), before it is read."""
    return isinstance(data, Mapping) and str(data.get("schema", "")).startswith(
        "ref2va-evidence/")


# A record's model per event kind (evidence.apply); sections and notes are handled there.
EVENT_MODELS: Final[Mapping[str, Callable[[Any], Any]]] = {
    "campaign": TypeAdapter(Campaign | None).validate_python,
    "instance": Instance.model_validate,
    "audit": Cleanup.model_validate,
    "sample": Sample.model_validate,
    "media": Media.model_validate,
    "check": CHECK_ADAPTER.validate_python,
    "note": TypeAdapter(str).validate_python,
    "verdicts": TypeAdapter(list[VerdictRecord]).validate_python,
    "status": StatusChange.model_validate,
}
