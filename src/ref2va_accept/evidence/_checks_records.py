"""The evidence's checks, typed: a union discriminated by their `name`, one class per check of
the vocabulary (e.g. LatencyRatioCheck), each with its own typed `data`.

``Bundle.checks_of(LatencyRatioCheck)`` gives one kind. Where a writer leaves a check's data
empty on some path (a request that failed before anything was compared), its data is that
kind's model or :class:`NoData`. A check records only a validity or defect reason of the
vocabulary (`CheckReason`). Its writer builds it with :func:`new_check` (or its class), and it
is validated then (`_checks.CheckRecord`'s rules, its data's record). The latency check's data
is in `_latency_records`, the lossy gate's figures in `_media_records`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, TypeAlias, cast, get_args

from pydantic import Field, TypeAdapter, model_validator

from ref2va_accept.core import Check, CheckStatus, Reason, check_name
from ref2va_accept.evidence._base import JsonNumber, Number, Record, Timestamp
from ref2va_accept.evidence._checks import CHECK_REASON_SCHEMA, CheckReason, CheckRecord
from ref2va_accept.evidence._closed_sets import DeviceKind, DivergenceKind
from ref2va_accept.evidence._host_records import IdentityRow
from ref2va_accept.evidence._latency_records import LatencyData, LatencyInterval, LatencyStopped
from ref2va_accept.evidence._media_records import (
    LossyGateData,
    NotCompared,
    ScoreRecord,
    WeightRecord,
)
from ref2va_accept.evidence._point_records import PointRecord

__all__ = [
    "CHECK_ADAPTER",
    "CHECK_CLASSES",
    "CHECK_REASON_SCHEMA",
    "AnyCheck",
    "B0MediaCheck",
    "BaselineDeterminismData",
    "BaselineVariabilityCheck",
    "BaselineVariabilityData",
    "CheckReason",
    "CheckRecord",
    "CleanupCheck",
    "DiffPicture",
    "EnabledPathAuditCheck",
    "LatencyRatioCheck",
    "LocalizationCheck",
    "LocalizedFigures",
    "LosslessGateCheck",
    "LosslessGateData",
    "LossyGateCheck",
    "NoData",
    "ScorerWeightsCheck",
    "WarmupDemonstrationCheck",
    "WarmupDemonstrationData",
    "check_record",
    "new_check",
]


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


class UnobservedRequest(Record):
    track: str
    kind: str


class GateInstancesServed(Record):
    """The data of a B0 check with nothing compared (its requests failed) that still names the
    tracks its gate instances served (judging.mark_shared): all the lossless and lossy gate data
    share."""

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
    # The seeds whose second B0 output was the first's bytes, scored once on a scorer that
    # repeats itself (judging/_lossy.py); absent when every output was scored.
    same_bytes_scored_once: list[int] | None = None


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


class HostIdentityData(Record):
    rows: list[IdentityRow]


class DeviceMemoryReleaseData(Record):
    instance: str
    waited_s: Number
    held_mb: dict[str, Number]


class InputProblem(Record):
    """A track input that is missing or not its pinned bytes (built by
    campaign.input_problems)."""

    track: str
    field: str
    path: str  # relative to the campaign, as pinned
    expected_sha256: str
    found_sha256: str | None  # None when the file could not be read
    unreadable: str | None  # why it could not be read

    def line(self, tracks: Sequence[str] = ()) -> str:
        """One line: the track (or `tracks`, sharing the same problem), the field, the path, and
        both full hashes (or why the file could not be read)."""
        tracks = tuple(tracks) or (self.track,)
        named = f"track{'s' if len(tracks) > 1 else ''} {', '.join(tracks)}"
        where = f"{named}: inputs.{self.field}: {self.path}"
        if self.found_sha256 is None:
            return f"{where}: {self.unreadable}; pinned sha256 {self.expected_sha256}"
        return f"{where}: pinned sha256 {self.expected_sha256}, found {self.found_sha256}"


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


class DivergenceRecord(Record):
    """Where the candidate's capture log first parts from B0's, as the evidence records it
    (judging.localize._capture.Divergence, its calls named by their labels)."""

    kind: DivergenceKind
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
    """Where the output differs, binned (built by judging.localize.diff_map)."""

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
    stopped: bool | None = Field(default=None, description=(
        "the engine stopped the request on purpose once its capture and points were written "
        "(capture.stop; its answer is then not an MP4)"))
    latency_s: Number | None = None
    dump_dir: str | None = None
    reused: bool | None = None


class LocalizationData(Record):
    """What the localization pass found (built by judging.localize._result.Localization.record)."""

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
    level1: DivergenceRecord | None
    level2: DivergenceRecord | None
    figures: LocalizedFigures | NotCompared | None
    inputs_equal: bool | None
    picture: DiffPicture | None
    picture_of: str
    requests: list[LocalizeRequest]


# -- checks --------------------------------------------------------------------------------------

class B0MediaCheck(CheckRecord[Literal[Check.B0_MEDIA], MediaCheckData]):
    pass


class CandidateMediaCheck(CheckRecord[Literal[Check.CANDIDATE_MEDIA], MediaCheckData]):
    pass


class CleanupCheck(CheckRecord[Literal[Check.CLEANUP], CleanupCheckData]):
    pass


class BaselineDeterminismCheck(CheckRecord[Literal[Check.BASELINE_DETERMINISM],
                                           BaselineDeterminismData | GateInstancesServed]):
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
                                           BaselineVariabilityData | GateInstancesServed]):
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
    # A passed one carries the latency interval's typed result in its data (CheckRecord's
    # rule), `latency` reads it, and the data's `verdict` is that result's.

    @model_validator(mode="after")
    def _verdict_of_its_interval(self) -> LatencyRatioCheck:
        data, interval = self.data, self.latency
        if (isinstance(data, LatencyData) and interval is not None
                and data.verdict is not interval.verdict):
            raise ValueError(f"check {self.track}/{self.arm}/{self.name}: a passed latency_ratio "
                             f"check's verdict is its interval's ({interval.verdict.value!r})")
        return self

    @property
    def latency(self) -> LatencyInterval | None:
        return self.data.interval if isinstance(self.data, LatencyData) else None


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


# Each check of the vocabulary's record, by its name.
CHECK_CLASSES: dict[Check, type[CheckRecord[Any, Any]]] = {
    get_args(kind.model_fields["name"].annotation)[0]: kind
    for kind in get_args(get_args(AnyCheck)[0])}


def new_check(track: str, arm: str, name: Check | str, status: CheckStatus | str,
              reason: Reason | str | None = None, detail: str = "",
              data: Mapping[str, Any] | Record | None = None) -> AnyCheck:
    """A check as its writer builds it: the record its `name` selects, validated now (a name,
    status or reason outside the vocabulary, or `data` that is not the check's, is a ValueError
    here). `data`: the check's typed data, or a mapping of it (none: `{}`)."""
    kind = CHECK_CLASSES[check_name(name)]
    given = {} if data is None else dict(data) if isinstance(data, Mapping) else data
    return cast("AnyCheck", kind.model_validate({
        "track": track, "arm": arm, "name": name, "status": status, "reason": reason,
        "detail": detail, "data": given}))


def check_record(check: Mapping[str, Any] | CheckRecord[Any, Any]) -> AnyCheck:
    """A check as the evidence records it, typed: one already typed as it is, a mapping of the
    recorded form (a check of evidence.json) read into its record."""
    if isinstance(check, CheckRecord):
        return cast("AnyCheck", check)
    return CHECK_ADAPTER.validate_python(json.loads(json.dumps(dict(check))))
