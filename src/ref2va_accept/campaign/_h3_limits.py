"""What the real H3 server refuses, checked when a campaign is loaded rather than per request.

vLLM-Omni 0.30.0 answers HTTP 400 to a Ref2VA request whose reference image or audio is outside
H3's limits, and cuts a generation that runs past one of two server-side time bounds. A campaign
that would meet either on the host is refused at load (and so by `freeze` and `verify`), one line
per problem, naming the campaign file, the dotted field and the limit. Upstream names are given
beside each constant so a new release can be re-read against them.

Input files are measured the way the server sees them: audio decoded to count its samples (the
server reads the audio stream's duration with ffprobe, the container's when the stream has none;
for PCM WAV and MP3 they agree, and the bring-up compares them on the host), images read
for their format and size. A missing file, a placeholder path, and a file that no longer matches
its pinned sha256 are left to `freeze`/`verify`, which name them as missing or drifted.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import av
from PIL import Image, UnidentifiedImageError

from ref2va_accept.core import CampaignError, file_sha256, is_placeholder
from ref2va_accept.engines import engine_kind

if TYPE_CHECKING:  # campaign/loaded.py calls in here at load time; the import only serves the types
    from ref2va_accept.campaign._loaded import LoadedCampaign

logger = logging.getLogger(__name__)

ENGINE = "vLLM-Omni 0.30.0"
MIB = 1024 * 1024

# model_executor/models/minimax_h3/reference_video.py
MIN_REFERENCE_AUDIO_S = 2.0  # MINIMAX_H3_MIN_REFERENCE_DURATION
MAX_REFERENCE_AUDIO_S = 15.0  # MINIMAX_H3_MAX_REFERENCE_DURATION (also the total over all clips)
MAX_AUDIO_BYTES = 15 * MIB  # MINIMAX_H3_MAX_AUDIO_BYTES; helpers.py: ..._MAX_REFERENCE_AUDIO_BYTES
AUDIO_FORMATS = frozenset({"wav", "mp3"})  # MINIMAX_H3_AUDIO_FORMATS (ffprobe format names)
# MINIMAX_H3_AUDIO_CODECS, plus any pcm_* codec, which validate_reference_audio_files also takes.
AUDIO_CODECS = frozenset({"aac", "mp3"})
H3_FPS = 24  # MINIMAX_H3_FPS; encoder_processing.py refuses any other output fps

# entrypoints/openai/video/generation/helpers.py
MAX_IMAGE_BYTES = 30 * MIB  # MINIMAX_H3_MAX_REFERENCE_IMAGE_BYTES
MAX_VIDEO_BYTES = 50 * MIB  # MINIMAX_H3_MAX_REFERENCE_VIDEO_BYTES
MAX_REFERENCE_COUNT = 12  # MINIMAX_H3_MAX_REFERENCE_COUNT
# MINIMAX_H3_REFERENCE_IMAGE_FORMATS (Pillow format names; JPG is Pillow's "jpeg")
IMAGE_FORMATS = frozenset({"jpeg", "png", "webp", "heic", "heif"})

# model_executor/models/minimax_h3/preprocessing.py, resolve_minimax_h3_reference_image_shape
MIN_IMAGE_EDGE = 256  # literal 256 there; MINIMAX_H3_MIN_REFERENCE_DIMENSION for videos
MAX_IMAGE_EDGE = 5760  # literal 5760 there; MINIMAX_H3_MAX_REFERENCE_DIMENSION for videos
MIN_ASPECT, MAX_ASPECT = 0.4, 2.5  # width / height, literals there

# Server-side time bounds, {environment variable: default seconds}:
# - VLLM_OMNI_DLO_DP_WAVE_TIMEOUT (diffusion/executor/multiproc_executor.py,
#   _DLO_DP_WAVE_TIMEOUT_S): the timeout of every execute_model RPC to the diffusion workers, that
#   is of one whole generation; on expiry the executor shuts the worker group down (engine dead).
# - VLLM_OMNI_VIDEO_SYNC_TIMEOUT (entrypoints/openai/video/generation/helpers.py,
#   VIDEO_SYNC_TIMEOUT_S): the sync route's wait; on expiry it answers 504.
SERVER_TIME_BOUNDS: dict[str, float] = {
    "VLLM_OMNI_DLO_DP_WAVE_TIMEOUT": 600.0,
    "VLLM_OMNI_VIDEO_SYNC_TIMEOUT": 600.0,
}
_BOUND_EFFECT = {
    "VLLM_OMNI_DLO_DP_WAVE_TIMEOUT": "the generation RPC is cut and the engine shut down",
    "VLLM_OMNI_VIDEO_SYNC_TIMEOUT": "the sync route answers 504",
}

InputKind = Literal["prompt", "image", "audio"]
Problem = tuple[str, str]  # (dotted field, message)


@dataclass(frozen=True)
class AudioFacts:
    format_names: tuple[str, ...]
    codec: str
    duration_s: float


@dataclass(frozen=True)
class ImageFacts:
    format_name: str
    width: int
    height: int


def probe_audio(path: Path) -> AudioFacts:
    """Container format names, codec and duration, measured by decoding every sample."""
    with av.open(str(path), mode="r") as container:
        if not container.streams.audio:
            raise ValueError("no audio stream")
        stream = container.streams.audio[0]
        samples = 0
        rate = 0
        for frame in container.decode(stream):
            samples += frame.samples
            rate = frame.sample_rate or rate
        if rate <= 0:
            raise ValueError("no decodable audio samples")
        names = tuple(name.strip().lower() for name in container.format.name.split(","))
        # canonical_name is the codec id ffprobe reports as codec_name ("mp3", not the decoder
        # "mp3float" that codec_context.name gives)
        codec = str(stream.codec_context.codec.canonical_name).lower()
        return AudioFacts(names, codec, samples / rate)


def probe_image(path: Path) -> ImageFacts:
    """Format and size as Pillow reads them from the header (what the server's check reads)."""
    with Image.open(path) as image:
        return ImageFacts(str(image.format or "").lower(), image.width, image.height)


def check_audio(path: Path, shown: str) -> list[str]:
    """H3's standalone reference-audio limits; messages end with the file as shown."""
    problems: list[str] = []
    size = path.stat().st_size
    if size > MAX_AUDIO_BYTES:
        problems.append(
            f"H3 accepts reference audio of at most {MAX_AUDIO_BYTES // MIB} MiB "
            f"({MAX_AUDIO_BYTES} bytes, {ENGINE}), found {size} bytes ({shown})"
        )
    try:
        facts = probe_audio(path)
    except (av.FFmpegError, ValueError, OSError) as exc:
        # The decoder's own text names the absolute path; the line names the file as written.
        logger.debug("%s does not decode as audio: %s", shown, exc)
        problems.append(
            f"H3 accepts WAV or MP3 reference audio ({ENGINE}), found a file that does not "
            f"decode as audio ({shown})"
        )
        return problems
    if not AUDIO_FORMATS.intersection(facts.format_names):
        problems.append(
            f"H3 accepts WAV or MP3 reference audio ({ENGINE}), found "
            f"{', '.join(facts.format_names) or 'unknown'} ({shown})"
        )
    if facts.codec not in AUDIO_CODECS and not facts.codec.startswith("pcm_"):
        problems.append(
            f"H3 accepts reference audio coded as MP3, AAC or PCM ({ENGINE}), found "
            f"{facts.codec or 'unknown'} ({shown})"
        )
    duration = facts.duration_s
    if not (math.isfinite(duration) and MIN_REFERENCE_AUDIO_S <= duration <= MAX_REFERENCE_AUDIO_S):
        problems.append(
            f"H3 accepts reference audio of {MIN_REFERENCE_AUDIO_S:g} to "
            f"{MAX_REFERENCE_AUDIO_S:g} s ({ENGINE}), found {duration:.3f} s ({shown})"
        )
    return problems


def check_image(path: Path, shown: str) -> list[str]:
    """H3's reference-image limits; messages end with the file as shown."""
    problems: list[str] = []
    size = path.stat().st_size
    if size > MAX_IMAGE_BYTES:
        problems.append(
            f"H3 accepts reference images of at most {MAX_IMAGE_BYTES // MIB} MiB "
            f"({MAX_IMAGE_BYTES} bytes, {ENGINE}), found {size} bytes ({shown})"
        )
    try:
        facts = probe_image(path)
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        logger.debug("%s does not open as an image: %s", shown, exc)
        problems.append(
            f"H3 accepts JPG, PNG, WEBP or HEIC reference images ({ENGINE}), found a file that "
            f"does not open as an image ({shown})"
        )
        return problems
    if facts.format_name not in IMAGE_FORMATS:
        problems.append(
            f"H3 accepts JPG, PNG, WEBP or HEIC reference images ({ENGINE}), found "
            f"{facts.format_name or 'unknown'} ({shown})"
        )
    w, h = facts.width, facts.height
    if min(w, h) < MIN_IMAGE_EDGE or max(w, h) > MAX_IMAGE_EDGE:
        problems.append(
            f"H3 accepts reference images with edges of {MIN_IMAGE_EDGE} to {MAX_IMAGE_EDGE} "
            f"pixels ({ENGINE}), found {w}x{h} ({shown})"
        )
    if h <= 0 or not MIN_ASPECT <= w / h <= MAX_ASPECT:
        problems.append(
            f"H3 accepts reference images with an aspect ratio (width/height) of {MIN_ASPECT:g} "
            f"to {MAX_ASPECT:g} ({ENGINE}), found {w}x{h} ({shown})"
        )
    return problems


def check_input_file(kind: InputKind, path: Path, shown: str) -> list[str]:
    """Every H3 limit one input file breaks; a prompt has none here (freeze checks its text)."""
    if kind == "audio":
        return check_audio(path, shown)
    if kind == "image":
        return check_image(path, shown)
    return []


@dataclass(frozen=True)
class PinnedInput:
    """One pinned input of one track, as the campaign names and resolves it."""

    field: str  # dotted, e.g. tracks.5s-lossless.inputs.reference_audio
    kind: InputKind
    path: Path | None  # None for a placeholder path
    shown: str  # the path as written in the campaign
    sha256: str | None  # None for a placeholder pin


def input_problems(inputs: list[PinnedInput]) -> list[Problem]:
    """One problem per file and limit, named at the first field that uses the file.

    The tracks usually share one input set; the other fields using the same file are listed in
    the same line rather than repeating it once per track.
    """
    by_file: dict[Path, list[PinnedInput]] = {}
    for item in inputs:
        if item.path is not None:
            by_file.setdefault(item.path, []).append(item)
    problems: list[Problem] = []
    for path, users in by_file.items():
        first = users[0]
        if not path.is_file():
            continue  # freeze/verify name a missing file
        if first.sha256 is not None and file_sha256(path) != first.sha256:
            continue  # freeze/verify name the drifted file; its new bytes are not the input
        also = sorted({u.field for u in users[1:]})
        suffix = f"; also {', '.join(also)})" if also else ")"
        for message in check_input_file(first.kind, path, first.shown):
            # every message ends with "(<file>)": the other fields go inside that bracket
            problems.append((first.field, message[:-1] + suffix))
    return problems


def timeout_problems(
    request_timeouts: Mapping[str, float],
    environment: Mapping[str, str],
    profile_env: Mapping[str, str],
) -> list[Problem]:
    """A per-duration request timeout the server would cut first, for a vLLM-Omni campaign.

    The launch profile's env overrides the campaign's environment (as the launcher merges them);
    where neither sets a bound its upstream default applies. Either way a bound below request_s
    means the server ends the request before the client would, so the timeout is not what runs.
    """
    problems: list[Problem] = []
    for duration, request_s in request_timeouts.items():
        field = f"protocol.timeouts.{duration}.request_s"
        for name, default in SERVER_TIME_BOUNDS.items():
            raw = profile_env.get(name, environment.get(name))
            effect = _BOUND_EFFECT[name]
            if raw is None:
                if request_s > default:
                    problems.append(
                        (field, f"{request_s:g} s is above the server's {name} default of "
                         f"{default:g} s ({ENGINE}: {effect}); set {name} to at least "
                         f"{request_s:g} in environment")
                    )  # fmt: skip
                continue
            try:
                bound = float(raw)
            except ValueError:
                problems.append(
                    (field, f"{name} must be a number of seconds for the server to read it, "
                     f"found {raw!r}")
                )  # fmt: skip
                continue
            if bound < request_s:
                problems.append(
                    (field, f"{request_s:g} s is above the server's {name}={bound:g} s "
                     f"({ENGINE}: {effect} first); set {name} to at least {request_s:g}")
                )  # fmt: skip
    return problems


_KIND_BY_INPUT: dict[str, InputKind] = {
    "prompt": "prompt",
    "reference_image": "image",
    "reference_audio": "audio",
}


def campaign_problems(campaign: LoadedCampaign) -> list[Problem]:
    """Every input limit the campaign's files break, and, for vLLM-Omni, every timeout the
    server would cut first. The reference engine enforces the same input limits, so the CI
    campaign is held to them too; its own time bounds are not upstream's, so no timeout check."""
    inputs: list[PinnedInput] = []
    for field, pinned in campaign.pinned_inputs():
        name = field.rsplit(".", 1)[-1]
        placeholder_path = is_placeholder(pinned.path)
        inputs.append(
            PinnedInput(
                field=field,
                kind=_KIND_BY_INPUT[name],
                path=None if placeholder_path else campaign.resolve(pinned.path),
                shown=pinned.path,
                sha256=None if is_placeholder(pinned.sha256) else pinned.sha256,
            )
        )
    problems = input_problems(inputs)
    model = campaign.model
    if engine_kind(model.engine.kind).server_side_timeouts:
        try:
            profile_env: Mapping[str, str] = campaign.profile(model.baseline).env
        except CampaignError:
            profile_env = {}  # a broken B0 profile is named by freeze; its env cannot count
        timeouts: dict[str, float] = {
            str(d): t.request_s for d, t in model.protocol.timeouts.items()
        }
        problems += timeout_problems(timeouts, model.environment, profile_env)
    return problems


def problem_lines(display: str, problems: list[Problem]) -> Iterator[str]:
    """One line per problem: the campaign as given, the dotted field, the message."""
    for field, message in problems:
        yield f"{display}: {field}: {message}"
