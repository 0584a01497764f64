"""Campaign and launch-profile files: models, loading, and what a loaded campaign answers.

A campaign names everything that must not move between the baseline and its candidates: inputs,
request shape, engine and device identity, timeouts, the timing protocol and the budget. Every
load error names the file and the dotted field (or the line, for YAML), with what was expected and
what was found. `ref2va_accept.lock` freezes a loaded campaign and verifies it later.

The package, by seam:
- `files`: reading YAML strictly (a duplicate key is an error) and located error messages;
- `fields`: the strict model base, path and hash field types, track ids;
- `tracks`: a track's inputs, request shape, comparison points and lossy gate;
- `schema`: engine, devices, arms, protocol, budget and the campaign file as a whole;
- `profile`: launch profiles and their loading;
- `loaded`: `load_campaign`, `LoadedCampaign` (arms, profile refusal, paths) and placeholders.
"""

from .fields import (
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
from .files import dotted_path, read_mapping, show_value, validate_model
from .loaded import LoadedCampaign, load_campaign, unfilled_fields
from .profile import ArgValue, LaunchProfile, load_profile
from .schema import (
    LOCK_SCHEMA,
    ArmSpec,
    Budget,
    Campaign,
    DeviceSpec,
    EngineSpec,
    Protocol,
    ScorerWeights,
    TimeoutSet,
)
from .tracks import (
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
    "LaunchProfile",
    "LoadedCampaign",
    "LossyGate",
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
    "check_sha256",
    "dotted_path",
    "duration_class",
    "load_campaign",
    "load_profile",
    "quality_class",
    "read_mapping",
    "show_value",
    "track_rank",
    "unfilled_fields",
    "validate_model",
]
