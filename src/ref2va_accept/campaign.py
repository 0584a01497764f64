"""Campaign and launch-profile files: models, loading, freezing and verifying.

A campaign names everything that must not move between the baseline and its candidates: inputs,
request shape, engine and device identity, timeouts, the timing protocol and the budget. `freeze`
writes a lock beside the campaign before any candidate outcome is seen; `verify` reports, field by
field and file by file, anything that moved since. Every load error names the file and the dotted
field, with what was expected and what was found.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import re
import sys
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from ref2va_accept import h3_limits
from ref2va_accept.device_memory import MemoryRelease
from ref2va_accept.errors import CampaignError
from ref2va_accept.h3_limits import H3_FPS
from ref2va_accept.identity import SourcePin, pin_violations
from ref2va_accept.placeholder import is_placeholder

logger = logging.getLogger(__name__)

TrackId = Literal["5s-lossless", "5s-lossy", "15s-lossless", "15s-lossy"]
DurationClass = Literal["5s", "15s"]
QualityClass = Literal["lossless", "lossy"]
TRACK_IDS: tuple[str, ...] = get_args(TrackId)
_M = TypeVar("_M", bound=BaseModel)

# H3 snaps frame counts up to 17n+5; at 24 fps these are the counts the tracks are defined by.
_TRACK_DURATION_S: dict[str, float] = {"5s": 5.0, "15s": 15.0}
_TRACK_FRAMES: dict[str, int] = {"5s": 124, "15s": 362}

LOCK_SCHEMA = "ref2va-lock/1"
_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_FLAG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MIME_BY_SUFFIX = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".wav": "audio/wav",
    ".txt": "text/plain",
}
# Form fields that define the matched request; an arm overriding one would no longer be matched
# (a step-count change is a scope change, not a candidate).
_MATCHED_FIELDS = frozenset(
    {
        "prompt", "model", "seed", "seconds", "size", "width", "height", "num_frames", "fps",
        "aspect_ratio", "short_edge", "num_inference_steps", "guidance_scale", "flow_shift",
        "negative_prompt", "generate_sound", "extra_params", "input_reference",
        "input_references", "image_reference", "audio_reference", "video_reference",
    }
)  # fmt: skip


def _split_track_id(track_id: str) -> tuple[str, str]:
    if track_id not in TRACK_IDS:
        raise CampaignError(f"track id: one of {', '.join(TRACK_IDS)}, found {track_id!r}")
    duration, quality = track_id.split("-")
    return duration, quality


def duration_class(track_id: str) -> DurationClass:
    """'5s' or '15s' for a track id."""
    return "5s" if _split_track_id(track_id)[0] == "5s" else "15s"


def quality_class(track_id: str) -> QualityClass:
    """'lossless' or 'lossy' for a track id."""
    return "lossless" if _split_track_id(track_id)[1] == "lossless" else "lossy"


class _RuleViolations(ValueError):
    """Cross-field rule failures of one model, each with its location inside that model.

    Pydantic keeps the raised exception in the error context, so the loader can expand these into
    one line per violation with the full dotted path instead of one opaque model-level message.
    """

    def __init__(self, violations: list[tuple[tuple[str | int, ...], str]]) -> None:
        super().__init__("; ".join(f"{dotted_path(loc)}: {msg}" for loc, msg in violations))
        self.violations = violations


def _raise_violations(violations: list[tuple[tuple[str | int, ...], str]]) -> None:
    if violations:
        raise _RuleViolations(violations)


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


class StrictModel(BaseModel):
    # strict: a YAML "42" is not silently a seed, 3 is not silently "3" in an env value.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


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
                    raise _RuleViolations(
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
        _raise_violations(violations)
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
        _raise_violations(violations)
        return self


# The dtypes a safetensors dump can hold, plus what the MP4 decodes to.
TensorDtype = Literal[
    "F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2",
    "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL",
]  # fmt: skip
MP4_POINTS = ("mp4.video", "mp4.audio")
_POINT_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


class ComparisonPoint(StrictModel):
    """One named tensor a lossless candidate must reproduce bit for bit (quality.md)."""

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
        _raise_violations(violations)
        return self


class LossyGate(StrictModel):
    """How a lossy track is judged (quality.md): relative score error against B0, same seeds."""

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


class ScorerWeights(StrictModel):
    """A model file a VBench scorer reads from the host's disk; never downloaded."""

    path: str
    sha256: str


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


class TimeoutSet(StrictModel):
    request_s: float = Field(gt=0)
    connect_s: float = Field(default=10, gt=0)


class Protocol(StrictModel):
    warmups: int = Field(ge=0)
    repeats: int = Field(ge=1)
    ordering: Literal["AB", "ABBA", "ABA"]
    order_seed: int
    pause_s: float = Field(default=0, ge=0)
    timeouts: dict[DurationClass, TimeoutSet]
    # A' (B0 re-measured after the candidate) may move its median by at most this fraction of
    # A's; beyond it the run drifted and is not evaluable.
    drift_tolerance: float = Field(default=0.10, gt=0, lt=1)
    # The decision: the distribution-free ratio interval of protocol.md, at this confidence per
    # end, against this target ratio (0.5 = a 50% latency reduction).
    decision_rule: Literal["ratio-interval-moses/1"] = "ratio-interval-moses/1"
    target_ratio: float = Field(default=0.5, gt=0, lt=1)
    confidence: float = Field(default=0.95, gt=0.5, lt=1)
    # Caching probe (MLPerf TEST04 idea): this many requests with fresh distinct seeds on the
    # candidate's instance; its repeated identical requests must not be >10% faster. 0 = off.
    caching_probe_requests: int = Field(default=2, ge=0)
    # Seconds one request is expected to take per duration class (the host's preflight medians);
    # only live progress reads them, to estimate the remaining time. Optional: without them the
    # estimate comes from the run's own finished requests.
    expected_request_s: dict[DurationClass, Annotated[float, Field(gt=0)]] | None = None

    @model_serializer(mode="wrap")
    def _absent_stays_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Frozen like the rest when given; when not, left out of the dump (and so of the lock's
        # canonical form), so that campaigns frozen before the field existed do not drift.
        data: dict[str, Any] = handler(self)
        if self.expected_request_s is None:
            data.pop("expected_request_s", None)
        return data


class Budget(StrictModel):
    max_candidates: int = Field(default=12, ge=0)
    max_wall_hours: float = Field(default=16, gt=0)
    max_logical_device_hours: float = Field(default=64, gt=0)


class EngineSpec(StrictModel):
    kind: Literal["reference", "vllm-omni"]
    model: str
    command: list[str] | None = Field(default=None, min_length=1)
    workdir: RelPath = "."
    # Structured: which fields an engine kind needs is in identity.PIN_FIELDS; the preflight
    # compares each with the host before the first engine starts.
    source_pin: SourcePin
    startup_timeout_s: float = Field(gt=0)
    shutdown_grace_s: float = Field(default=30, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _pin_for_kind(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "source_pin" in data:
            kind = data.get("kind")
            _raise_violations([(("source_pin", *loc), msg) for loc, msg in
                               pin_violations(kind if isinstance(kind, str) else "",
                                              data["source_pin"])])
        return data

    def resolved_command(self) -> list[str]:
        """The executable prefix; the default stays out of the frozen file so it is host-neutral."""
        if self.command is not None:
            return list(self.command)
        if self.kind == "reference":
            return [sys.executable, "-m", "engine.reference"]
        return ["vllm"]


class DeviceSpec(StrictModel):
    kind: Literal["none", "npu", "cuda"]
    visible: list[int] = []
    visibility_env: str | None = None
    # The wait for device memory to return to idle after each instance (device_memory.py).
    memory_release: MemoryRelease = MemoryRelease()

    @model_validator(mode="after")
    def _consistent(self) -> DeviceSpec:
        violations: list[tuple[tuple[str | int, ...], str]] = []
        if self.kind == "none":
            if self.visible:
                violations.append((("visible",), f"no devices for kind none, found {self.visible}"))
        else:
            if self.visibility_env is None:
                violations.append(
                    (("visibility_env",), f"an env var name for kind {self.kind}, found none")
                )
            elif not _ENV_NAME.match(self.visibility_env):
                violations.append(
                    (("visibility_env",), f"an env var name, found {self.visibility_env!r}")
                )
            if not self.visible:
                violations.append((("visible",), f"device ids for kind {self.kind}, found none"))
        for i, dev in enumerate(self.visible):
            if dev < 0 or self.visible.index(dev) != i:
                violations.append((("visible", i), f"unique non-negative ids, found {dev}"))
        _raise_violations(violations)
        return self


class ArmSpec(StrictModel):
    id: str
    profile: RelPath
    request: dict[str, str | int | float | bool] = {}
    tracks: list[TrackId] | None = None
    description: str = ""

    @model_validator(mode="after")
    def _shape(self) -> ArmSpec:
        violations: list[tuple[tuple[str | int, ...], str]] = []
        if not _SLUG.match(self.id):
            violations.append((("id",), f"a slug [a-z0-9][a-z0-9._-]*, found {self.id!r}"))
        for key in self.request:
            if key in _MATCHED_FIELDS:
                violations.append(
                    (("request", key), "a field the matched request does not fix (the track "
                     f"sets it for every arm), found {key!r}")
                )  # fmt: skip
        _raise_violations(violations)
        return self


def _env_violations(env: Mapping[str, str], where: str) -> list[tuple[tuple[str | int, ...], str]]:
    return [
        ((where, name), f"an environment variable name, found {name!r}")
        for name in env
        if not _ENV_NAME.match(name)
    ]


class Campaign(StrictModel):
    schema_version: Literal[1]
    name: str
    description: str = ""
    engine: EngineSpec
    devices: DeviceSpec
    environment: dict[str, str] = {}
    baseline: ArmSpec
    candidates: list[ArmSpec] = []
    tracks: dict[TrackId, Track] = Field(min_length=1)
    protocol: Protocol
    budget: Budget
    # Model files of the VBench scorers by name (dino_vitb16, clip_vitb32, ...), on the host's
    # disk; a scorer whose weights are absent leaves its dimension open.
    scorer_weights: dict[str, ScorerWeights] = {}

    @model_validator(mode="after")
    def _rules(self) -> Campaign:
        violations = _env_violations(self.environment, "environment")
        if self.baseline.id != "b0":
            violations.append((("baseline", "id"), f"'b0', found {self.baseline.id!r}"))
        ids: set[str] = set()
        for i, arm in enumerate(self.candidates):
            if arm.id == "b0" or arm.id in ids:
                why = "the baseline's id" if arm.id == "b0" else "an id used earlier"
                violations.append((("candidates", i, "id"), f"a unique id, found {why} {arm.id!r}"))
            ids.add(arm.id)
        if len(self.candidates) > self.budget.max_candidates:
            violations.append(
                (("candidates",), f"at most {self.budget.max_candidates} candidates "
                 f"(budget.max_candidates), found {len(self.candidates)}")
            )  # fmt: skip
        for track_id, track in self.tracks.items():
            violations.extend(_track_violations(track_id, track))
        used = sorted({duration_class(t) for t in self.tracks})
        missing = [d for d in used if d not in self.protocol.timeouts]
        if missing:
            violations.append(
                (("protocol", "timeouts"), f"a timeout set for each duration class the tracks use "
                 f"({', '.join(used)}), found none for {', '.join(missing)}")
            )  # fmt: skip
        if self.baseline.tracks is not None:
            absent = [t for t in self.tracks if t not in self.baseline.tracks]
            if absent:
                violations.append(
                    (("baseline", "tracks"), "every campaign track (B0 is the matched baseline of "
                     f"each), found {self.baseline.tracks}, missing {', '.join(absent)}")
                )  # fmt: skip
        for loc, arm in [(("baseline",), self.baseline)] + [
            (("candidates", i), a) for i, a in enumerate(self.candidates)
        ]:
            for j, track_id in enumerate(arm.tracks or []):
                if track_id not in self.tracks:
                    violations.append(
                        ((*loc, "tracks", j), f"a track of this campaign ({', '.join(self.tracks)})"
                         f", found {track_id!r}")
                    )  # fmt: skip
        _raise_violations(violations)
        for track_id, track in self.tracks.items():
            track._track_id = track_id
        return self

    def arms(self) -> list[ArmSpec]:
        return [self.baseline, *self.candidates]


def _track_violations(track_id: str, track: Track) -> list[tuple[tuple[str | int, ...], str]]:
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


ArgValue = bool | int | float | str | list[Any] | dict[str, Any]


class LaunchProfile(StrictModel):
    name: str
    description: str = ""
    declared: Literal["baseline", "lossless", "lossy"]
    engine: Literal["reference", "vllm-omni"]
    args: dict[str, ArgValue] = {}
    # Values may name ${workdir}: the campaign's engine workdir, made absolute at launch (a worker
    # extension imported from the checkout needs it on PYTHONPATH whatever the host's layout).
    env: dict[str, str] = {}
    # Set on a profile whose flags the campaign's pinned engine does not have yet (e.g. an option
    # that only a later vLLM-Omni source has): what it needs, in words. Such a profile is shipped
    # so the direction is on record, and refused wherever it would start or be frozen.
    needs_source: str | None = None

    @model_validator(mode="after")
    def _names(self) -> LaunchProfile:
        violations = _env_violations(self.env, "env")
        for flag in self.args:
            if not _FLAG.match(flag):
                violations.append(
                    (("args", flag), f"a flag name without leading dashes, found {flag!r}")
                )
        _raise_violations(violations)
        return self

    def cli_args(self) -> list[str]:
        """The flags in file order: true -> bare flag, false -> omitted, containers -> JSON."""
        out: list[str] = []
        for flag, value in self.args.items():
            if value is True:
                out.append(f"--{flag}")
            elif value is False:
                continue
            elif isinstance(value, (dict, list)):
                out += [f"--{flag}", json.dumps(value, sort_keys=True, separators=(",", ":"))]
            else:
                out += [f"--{flag}", str(value)]
        return out


# --------------------------------------------------------------------------- loading


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys: PyYAML would silently keep the last one."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})",
                key_node.start_mark,
            )  # fmt: skip
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_mapping(path: Path, display: str) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CampaignError(f"{display}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CampaignError(f"{display}: cannot read: {exc}") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no object tags
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown line"
        raise CampaignError(f"{display}: {where}: invalid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise CampaignError(f"{display}: invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        found = "an empty file" if data is None else type(data).__name__
        raise CampaignError(f"{display}: top level: a mapping of keys, found {found}")
    return data


def dotted_path(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part != "[key]":
            out += f".{part}" if out else str(part)
    return out or "top level"


def _unwrap(annotation: Any) -> Any:
    while get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        annotation = models[0] if models else args[0]
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _model_at(root: type[BaseModel], loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The model class at a location, to list its keys when an unknown one arrives."""
    annotation: Any = root
    for part in loc:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if not isinstance(part, str) or part not in annotation.model_fields:
                return None
            annotation = annotation.model_fields[part].annotation
        elif get_origin(annotation) in (list, dict):
            annotation = get_args(annotation)[-1]
        else:
            return None
    annotation = _unwrap(annotation)
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def show_value(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    text = repr(text) if isinstance(value, str) else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_lines(display: str, root: type[BaseModel], exc: ValidationError) -> list[str]:
    lines: list[str] = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        inner = err.get("ctx", {}).get("error")
        if isinstance(inner, _RuleViolations):
            lines += [
                f"{display}: {dotted_path(loc + sub)}: {msg}" for sub, msg in inner.violations
            ]
            continue
        if err["type"] == "extra_forbidden":
            parent = _model_at(root, loc[:-1])
            allowed = ", ".join(parent.model_fields) if parent else "a key of the schema"
            msg = f"unknown key, expected one of: {allowed}; found {loc[-1]!r}"
        elif err["type"] == "missing":
            msg = "required, found nothing"
        elif isinstance(inner, Exception):
            msg = str(inner)
        else:
            msg = f"{err['msg']}, found {show_value(err['input'])}"
            if is_placeholder(err["input"]):
                msg += " (a <FILL: ...> placeholder is allowed only where text is expected)"
        lines.append(f"{display}: {dotted_path(loc)}: {msg}")
    return lines


def validate_model(model: type[_M], data: dict[str, Any], display: str) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise CampaignError("\n".join(_error_lines(display, model, exc))) from None


def _load_profile(path: Path, display: str) -> LaunchProfile:
    return validate_model(LaunchProfile, _read_mapping(path, display), display)


def load_profile(path: str | os.PathLike[str]) -> LaunchProfile:
    """Load and validate one launch profile; errors name the path as given."""
    return _load_profile(Path(path), os.fspath(path))


@dataclass(frozen=True)
class LoadedCampaign:
    """A validated campaign and where it lives (every relative path is relative to `path`)."""

    path: Path
    model: Campaign
    _profiles: dict[str, LaunchProfile] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def folder(self) -> Path:
        return Path(os.path.abspath(self.path)).parent

    def resolve(self, rel: str) -> Path:
        return Path(os.path.normpath(self.folder / rel))

    def display(self, rel: str) -> str:
        """A campaign-relative path as the user would type it (relative if the campaign was)."""
        return os.path.normpath(os.path.join(os.fspath(self.path.parent), rel))

    def engine_workdir(self) -> Path:
        return self.resolve(self.model.engine.workdir)

    def arms_for(self, track_id: str) -> list[ArmSpec]:
        if track_id not in self.model.tracks:
            raise CampaignError(
                f"{self.path}: tracks: a track of this campaign "
                f"({', '.join(self.model.tracks)}), found {track_id!r}"
            )
        entering = [a for a in self.model.candidates if a.tracks is None or track_id in a.tracks]
        return [self.model.baseline, *entering]

    def profile(self, arm: ArmSpec) -> LaunchProfile:
        # ids are unique and only the baseline is b0, so the id says which role the arm plays
        role = "baseline" if arm.id == "b0" else "candidate"
        if is_placeholder(arm.profile):
            where = "baseline" if role == "baseline" else f"candidate {arm.id!r}"
            raise CampaignError(f"{self.path}: {where}: profile: unfilled {arm.profile}")
        display = self.display(arm.profile)
        if arm.profile not in self._profiles:
            self._profiles[arm.profile] = _load_profile(self.resolve(arm.profile), display)
        prof = self._profiles[arm.profile]
        if prof.engine != self.model.engine.kind:
            raise CampaignError(
                f"{display}: engine: {self.model.engine.kind!r} (the campaign's engine), "
                f"found {prof.engine!r}"
            )
        if role == "baseline" and prof.declared != "baseline":
            raise CampaignError(f"{display}: declared: 'baseline' for B0, found {prof.declared!r}")
        if role == "candidate" and prof.declared == "baseline":
            raise CampaignError(
                f"{display}: declared: 'lossless' or 'lossy' for candidate {arm.id!r}, "
                "found 'baseline'"
            )
        if prof.needs_source is not None:
            raise CampaignError(
                f"{display}: needs_source: this profile cannot run on the campaign's engine "
                f"source; it needs {prof.needs_source}"
            )
        return prof

    def pinned_inputs(self) -> Iterator[tuple[str, PinnedFile]]:
        """(track-relative dotted location, pin) for every input of every track."""
        for track_id, track in self.model.tracks.items():
            for name in ("prompt", "reference_image", "reference_audio"):
                pinned = getattr(track.inputs, name)
                if pinned is not None:
                    yield f"tracks.{track_id}.inputs.{name}", pinned


def load_campaign(path: str | os.PathLike[str]) -> LoadedCampaign:
    """Load and validate a campaign file. Placeholders load fine; they only block freezing."""
    display = os.fspath(path)
    model = validate_model(Campaign, _read_mapping(Path(path), display), display)
    loaded = LoadedCampaign(path=Path(path), model=model)
    # What the real server would refuse (input limits, its own time bounds) is a load error too.
    problems = h3_limits.campaign_problems(loaded)
    if problems:
        raise CampaignError("\n".join(h3_limits.problem_lines(display, problems)))
    return loaded


# --------------------------------------------------------------------------- placeholders


def _placeholders(value: Any, loc: tuple[str | int, ...] = ()) -> Iterator[str]:
    if isinstance(value, dict):
        for key in value:
            yield from _placeholders(value[key], (*loc, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _placeholders(item, (*loc, i))
    elif is_placeholder(value):
        yield dotted_path(loc)


def unfilled_fields(campaign: LoadedCampaign) -> list[str]:
    """Dotted paths of `<FILL: ...>` values, the campaign's then its profiles' (`profile P: x`)."""
    found = list(_placeholders(campaign.model.model_dump(mode="json")))
    seen: set[str] = set()
    for arm in campaign.model.arms():
        if is_placeholder(arm.profile) or arm.profile in seen:
            continue
        seen.add(arm.profile)
        rel = posixpath.normpath(arm.profile)
        try:
            prof = _load_profile(campaign.resolve(arm.profile), campaign.display(arm.profile))
        except CampaignError:
            continue  # a broken profile is reported by freeze and by profile(), not here
        found += [f"profile {rel}: {p}" for p in _placeholders(prof.model_dump(mode="json"))]
    return found
