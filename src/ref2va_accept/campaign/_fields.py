"""What the campaign and profile schemas share: the strict model base, field types, track ids."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath, PureWindowsPath
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict

from ref2va_accept.core import CampaignError, QualityClass, is_placeholder

TrackId = Literal["5s-lossless", "5s-lossy", "15s-lossless", "15s-lossy"]
DurationClass = Literal["5s", "15s"]
TRACK_IDS: tuple[str, ...] = get_args(TrackId)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _split_track_id(track_id: str) -> tuple[str, str]:
    if track_id not in TRACK_IDS:
        raise CampaignError(f"track id: one of {', '.join(TRACK_IDS)}, found {track_id!r}")
    duration, quality = track_id.split("-")
    return duration, quality


def duration_class(track_id: str) -> DurationClass:
    """'5s' or '15s' for a track id."""
    return "5s" if _split_track_id(track_id)[0] == "5s" else "15s"


def track_rank(track_id: str) -> int:
    """Where a track sorts in reports: the campaign's order (5 s before 15 s, lossless before
    lossy), anything else after."""
    return TRACK_IDS.index(track_id) if track_id in TRACK_IDS else len(TRACK_IDS)


def quality_class(track_id: str) -> QualityClass:
    """QualityClass.LOSSLESS ('lossless') or QualityClass.LOSSY ('lossy') for a track id."""
    return QualityClass(_split_track_id(track_id)[1])


def _check_relative_path(value: str) -> str:
    if is_placeholder(value):
        return value
    if not value:
        raise ValueError("a path relative to the campaign file, found an empty string")
    # Absolute paths would leak host layout into published evidence and break on other hosts.
    if PurePosixPath(value).is_absolute() or PureWindowsPath(value).drive:
        raise ValueError(f"a path relative to the campaign file, found absolute {value!r}")
    return value


def check_sha256(value: str) -> str:
    if is_placeholder(value) or _SHA256.match(value):
        return value
    raise ValueError(f"64 lowercase hex digits or a <FILL: ...> placeholder, found {value!r}")


RelPath = Annotated[str, AfterValidator(_check_relative_path)]
Sha256 = Annotated[str, AfterValidator(check_sha256)]


def is_env_name(name: str) -> bool:
    return bool(_ENV_NAME.match(name))


def env_violations(env: Mapping[str, str], where: str) -> list[tuple[tuple[str | int, ...], str]]:
    return [
        ((where, name), f"an environment variable name, found {name!r}")
        for name in env
        if not _ENV_NAME.match(name)
    ]


class StrictModel(BaseModel):
    # strict: a YAML "42" is not silently a seed, 3 is not silently "3" in an env value.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
