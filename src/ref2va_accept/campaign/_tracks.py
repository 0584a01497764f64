"""The tracks of a campaign: pinned inputs, the request shape, comparison points, the lossy gate.

A track is one (duration, quality) cell of the campaign; its id is the key it sits under, and the
rules that depend on that id (frame count, points for lossless, a gate for lossy) are in
`track_violations`, which the campaign's own validator runs for every track.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import Field, PrivateAttr, model_validator

from ref2va_accept.campaign._fields import (
    DurationClass,
    RelPath,
    Sha256,
    StrictModel,
    duration_class,
    quality_class,
)
from ref2va_accept.campaign._files import RuleViolations, raise_violations
from ref2va_accept.campaign._h3_limits import H3_FPS
from ref2va_accept.core import CampaignError, QualityClass, is_placeholder

# H3 snaps frame counts up to 17n+5; at 24 fps these are the counts the tracks are defined by.
_TRACK_DURATION_S: dict[str, float] = {"5s": 5.0, "15s": 15.0}
_TRACK_FRAMES: dict[str, int] = {"5s": 124, "15s": 362}

_MIME_BY_SUFFIX = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".wav": "audio/wav",
    ".txt": "text/plain",
}


class PinnedFile(StrictModel):
    path: RelPath
    sha256: Sha256
    mime: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _infer_mime(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("mime") is None:
            path = data.get("path")
            if isinstance(path, str) and not is_placeholder(path):
                suffix = PurePosixPath(path).suffix.lower()
                if suffix not in _MIME_BY_SUFFIX:
                    known = ", ".join(sorted(_MIME_BY_SUFFIX))
                    raise RuleViolations(
                        [
                            (
                                ("mime",),
                                f"set mime; it is inferred only for {known}, found {suffix!r}",
                            )
                        ]
                    )
                return {**data, "mime": _MIME_BY_SUFFIX[suffix]}
        return data


class TrackInputs(StrictModel):
    prompt: PinnedFile
    reference_image: PinnedFile
    reference_audio: PinnedFile | None = None

    @model_validator(mode="after")
    def _kinds(self) -> TrackInputs:
        wanted = {"prompt": "text/", "reference_image": "image/", "reference_audio": "audio/"}
        violations: list[tuple[tuple[str | int, ...], str]] = []
        for name, prefix in wanted.items():
            pinned: PinnedFile | None = getattr(self, name)
            if pinned is not None and pinned.mime is not None:
                if not pinned.mime.startswith(prefix):
                    violations.append(((name, "mime"), f"a {prefix}* file, found {pinned.mime!r}"))
        raise_violations(violations)
        return self


class RequestShape(StrictModel):
    width: int
    height: int
    fps: int = H3_FPS
    num_inference_steps: int = Field(default=50, gt=0)
    flow_shift: float = Field(gt=0)
    guidance_scale: float | None = None
    negative_prompt: str | None = None
    seeds: list[int] = Field(min_length=1)
    generate_sound: bool = True
    extra_params: dict[str, Any]

    @model_validator(mode="after")
    def _shape(self) -> RequestShape:
        violations: list[tuple[tuple[str | int, ...], str]] = []
        for name in ("width", "height"):
            value = getattr(self, name)
            if value <= 0 or value % 2:
                violations.append(((name,), f"a positive even number of pixels, found {value}"))
        if self.fps != H3_FPS:
            violations.append((("fps",), f"H3 outputs {H3_FPS} fps, found {self.fps}"))
        seen: set[int] = set()
        for i, seed in enumerate(self.seeds):
            if seed in seen:
                violations.append((("seeds", i), f"unique seeds, found {seed} again"))
            seen.add(seed)
        task = self.extra_params.get("task", "<missing>")
        if task != "ref2va":
            violations.append((("extra_params", "task"), f"'ref2va', found {task!r}"))
        raise_violations(violations)
        return self


# The dtypes a safetensors dump can hold, plus what the MP4 decodes to.
TensorDtype = Literal[
    "F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2",
    "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL",
]  # fmt: skip
MP4_POINTS = ("mp4.video", "mp4.audio")
_POINT_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


class ComparisonPoint(StrictModel):
    """One named tensor a lossless candidate must reproduce bit for bit (docs/quality.md)."""

    name: str
    # diagnostics: written by the engine for requests that ask (request-owned dumps);
    # mp4: decoded by the judge from the returned MP4 (mp4.video frames, mp4.audio samples).
    source: Literal["diagnostics", "mp4"]
    dtype: TensorDtype
    # A placeholder until the host has seen the real engine write the point.
    shape: list[int] | str

    @model_validator(mode="after")
    def _shape(self) -> ComparisonPoint:
        violations: list[tuple[tuple[str | int, ...], str]] = []
        if not _POINT_NAME.match(self.name):
            violations.append((("name",), f"a point name [a-z0-9_.-], found {self.name!r}"))
        if self.source == "mp4" and self.name not in MP4_POINTS:
            violations.append(
                (("name",), f"an mp4 point is one of {', '.join(MP4_POINTS)}, found {self.name!r}")
            )
        if isinstance(self.shape, str) and not is_placeholder(self.shape):
            violations.append(
                (("shape",), f"a list of sizes or a <FILL: ...>, found {self.shape!r}")
            )
        if isinstance(self.shape, list) and any(size < 0 for size in self.shape):
            violations.append((("shape",), f"non-negative sizes, found {self.shape}"))
        raise_violations(violations)
        return self


class LossyGate(StrictModel):
    """How a lossy track is judged (docs/quality.md).

    The relative score error against B0, on the same seeds.
    """

    # Two-sided relative error per gated dimension must stay below this (0.01 = 1%).
    threshold: float = Field(default=0.01, gt=0, lt=1)
    # VBench's min-max normalization magnifies changes; whether the gate uses it is frozen here.
    normalized: bool = False
    # The dimensions that decide (scorer ids, e.g. vbench.temporal_flickering or
    # proxy.dynamic_degree.farneback); every other score is reported beside them.
    gated: list[str] = Field(min_length=1)
    # Also gate the aggregate over the gated dimensions of each kind (VBench, proxy).
    gate_aggregate: bool = True
    # B0's same-seed spread must be below this fraction of the threshold, or the track is
    # inconclusive (baseline_variability_too_high): the gate only decides where B0 leaves room.
    variability_fraction: float = Field(default=0.25, gt=0, le=1)
    # Fidelity to B0 (same seed), gated only when frozen here: every seed's PSNR (dB, from the
    # mean MSE over frames) and mean SSIM must reach these. Unset, fidelity is reported only.
    min_psnr_db: float | None = Field(default=None, gt=0)
    min_ssim: float | None = Field(default=None, gt=-1, le=1)


class Track(StrictModel):
    duration_s: float
    num_frames: int
    request: RequestShape
    inputs: TrackInputs
    # Lossless tracks only: the frozen points, in pipeline order (the first divergence is named
    # in this order).
    comparison_points: list[ComparisonPoint] = []
    # Lossy tracks only.
    lossy_gate: LossyGate | None = None
    # The id is the key the track sits under in the campaign, which sets it after validation;
    # the helpers below need it because lossless/lossy is not a property of the numbers.
    _track_id: str | None = PrivateAttr(default=None)

    @property
    def track_id(self) -> str:
        if self._track_id is None:
            raise CampaignError("track: validated outside a campaign, so its id is unknown")
        return self._track_id

    @property
    def duration_class(self) -> DurationClass:
        return duration_class(self.track_id)

    @property
    def quality_class(self) -> QualityClass:
        return quality_class(self.track_id)


def track_violations(track_id: str, track: Track) -> list[tuple[tuple[str | int, ...], str]]:
    cls = duration_class(track_id)
    seconds, frames = _TRACK_DURATION_S[cls], _TRACK_FRAMES[cls]
    out: list[tuple[tuple[str | int, ...], str]] = []
    if track.duration_s != seconds:
        out.append(
            (("tracks", track_id, "duration_s"), f"a {seconds:g} s track lasts {seconds:g} s, "
             f"found {track.duration_s:g}")
        )  # fmt: skip
    if track.num_frames != frames:
        out.append(
            (("tracks", track_id, "num_frames"), f"a {seconds:g} s track has {frames} frames "
             f"(H3 snaps to 17n+5), found {track.num_frames}")
        )  # fmt: skip
    points = [point.name for point in track.comparison_points]
    if quality_class(track_id) == "lossless" and not points:
        out.append(
            (("tracks", track_id, "comparison_points"),
             "at least one point for a lossless track (bit-exactness needs something to compare)")
        )  # fmt: skip
    if quality_class(track_id) == "lossy" and track.lossy_gate is None:
        out.append((("tracks", track_id, "lossy_gate"), "a lossy gate for a lossy track"))
    if quality_class(track_id) == "lossless" and track.lossy_gate is not None:
        out.append((("tracks", track_id, "lossy_gate"), "none for a lossless track"))
    if quality_class(track_id) == "lossy" and points:
        out.append(
            (("tracks", track_id, "comparison_points"),
             f"none for a lossy track (it is judged by scores), found {points}")
        )  # fmt: skip
    for name in sorted({n for n in points if points.count(n) > 1}):
        out.append((("tracks", track_id, "comparison_points"), f"unique names, {name!r} twice"))
    duration = track.request.extra_params.get("duration")
    if duration is not None and duration != seconds:
        out.append(
            (("tracks", track_id, "request", "extra_params", "duration"),
             f"the track duration {seconds:g}, found {duration!r}")
        )  # fmt: skip
    return out
