"""Campaign and launch-profile files: models, loading, and what a loaded campaign answers.

A campaign names everything that must not move between the baseline and its candidates: inputs,
request shape, engine and device identity, timeouts, the timing protocol and the budget. Every
load error names the file and the dotted field (or the line, for YAML), with what was expected and
what was found. `ref2va_accept.campaign._lock` freezes a loaded campaign and verifies it later.

The package, by seam:
- `files`: reading YAML strictly (a duplicate key is an error) and located error messages;
- `fields`: the strict model base, path and hash field types, track ids;
- `tracks`: a track's inputs, request shape, comparison points and lossy gate;
- `schema`: engine, devices, arms, protocol, budget and the campaign file as a whole;
- `profile`: launch profiles and their loading;
- `loaded`: `load_campaign`, `LoadedCampaign` (arms, profile refusal, paths) and placeholders.
"""

from ref2va_accept.campaign._fields import (
    TRACK_IDS,
    DurationClass,
    RelPath,
    Sha256,
    StrictModel,
    TrackId,
    check_sha256,
    duration_class,
    quality_class,
    track_rank,
)
from ref2va_accept.campaign._files import dotted_path, read_mapping, show_value, validate_model
from ref2va_accept.campaign._fill_points import fill_points, report_lines
from ref2va_accept.campaign._h3_limits import (
    MAX_REFERENCE_AUDIO_S,
    MIN_REFERENCE_AUDIO_S,
    probe_audio,
)
from ref2va_accept.campaign._input_pins import input_checks, input_problems, problem_lines
from ref2va_accept.campaign._launch_profile import ArgValue, LaunchProfile, load_profile
from ref2va_accept.campaign._loaded import LoadedCampaign, load_campaign, unfilled_fields
from ref2va_accept.campaign._lock import (
    FreezeStatus,
    campaign_files,
    canonical_campaign,
    freeze,
    lock_path,
    scorer_weight_identities,
    verify,
)
from ref2va_accept.campaign._protocol import Protocol, TimeoutSet
from ref2va_accept.campaign._schema import (
    LOCK_SCHEMA,
    MEASURED_FIELDS,
    ArmSpec,
    Budget,
    Campaign,
    DeviceSpec,
    EngineSpec,
    OutcomeMix,
    ScorerWeights,
)
from ref2va_accept.campaign._tracks import (
    MP4_POINTS,
    ComparisonPoint,
    LossyGate,
    PinnedFile,
    RequestShape,
    TensorDtype,
    Track,
    TrackInputs,
)

__all__ = [
    "LOCK_SCHEMA",
    "MAX_REFERENCE_AUDIO_S",
    "MEASURED_FIELDS",
    "MIN_REFERENCE_AUDIO_S",
    "MP4_POINTS",
    "TRACK_IDS",
    "ArgValue",
    "ArmSpec",
    "Budget",
    "Campaign",
    "ComparisonPoint",
    "DeviceSpec",
    "DurationClass",
    "EngineSpec",
    "FreezeStatus",
    "LaunchProfile",
    "LoadedCampaign",
    "LossyGate",
    "OutcomeMix",
    "PinnedFile",
    "Protocol",
    "RelPath",
    "RequestShape",
    "ScorerWeights",
    "Sha256",
    "StrictModel",
    "TensorDtype",
    "TimeoutSet",
    "Track",
    "TrackId",
    "TrackInputs",
    "campaign_files",
    "canonical_campaign",
    "check_sha256",
    "dotted_path",
    "duration_class",
    "fill_points",
    "freeze",
    "input_checks",
    "input_problems",
    "load_campaign",
    "load_profile",
    "lock_path",
    "probe_audio",
    "problem_lines",
    "quality_class",
    "read_mapping",
    "report_lines",
    "scorer_weight_identities",
    "show_value",
    "track_rank",
    "unfilled_fields",
    "validate_model",
    "verify",
]
