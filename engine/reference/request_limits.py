"""H3's upload and reference limits, and the request's frame count and size resolution.

The upload limits and reference count follow vLLM-Omni 0.30.0's video helpers; the reference
limits (image edges and aspect, audio length, size, format and codec) are the ones the real server
checks when its encoder stage prepares the request, checked here with upstream's messages.
"""

from __future__ import annotations

import math
from typing import Any

from engine.reference.errors import bad_request, invalid_field
from engine.reference.references import ReferenceAudio, ReferenceImage

MIB = 1024 * 1024
# H3's per-kind upload limits and reference count (vLLM-Omni's video helpers).
MAX_IMAGE_BYTES = 30 * MIB
MAX_VIDEO_BYTES = 50 * MIB
MAX_AUDIO_BYTES = 15 * MIB
MAX_REFERENCE_COUNT = 12
# H3's reference limits at encode time (model_executor/models/minimax_h3/: reference_video.py for
# audio, preprocessing.py for images, encoder_processing.py for the per-kind counts).
MIN_REFERENCE_AUDIO_S, MAX_REFERENCE_AUDIO_S = 2.0, 15.0
MAX_REFERENCE_AUDIO_TOTAL_S = 15.0
AUDIO_FORMATS = frozenset({"wav", "mp3"})  # container names, as ffprobe (and PyAV) report them
AUDIO_CODECS = frozenset({"aac", "mp3"})  # plus any pcm_*
MIN_IMAGE_EDGE, MAX_IMAGE_EDGE = 256, 5760
MIN_IMAGE_ASPECT, MAX_IMAGE_ASPECT = 0.4, 2.5
MAX_IMAGE_REFERENCES, MAX_AUDIO_REFERENCES = 9, 3
# H3 Ref2VA's default canvas (16:9) and a 5 s clip when neither frames nor a duration is given.
DEFAULT_WIDTH, DEFAULT_HEIGHT = 1344, 768
DEFAULT_SECONDS = 5.0


def check_h3_reference_limits(
    images: tuple[ReferenceImage, ...], audios: tuple[ReferenceAudio, ...]
) -> None:
    """H3's encoder-stage checks, in upstream's order and words (OmniClientError -> 400)."""
    if len(images) > MAX_IMAGE_REFERENCES:
        raise bad_request(f"ref2va accepts at most {MAX_IMAGE_REFERENCES} image references")
    if len(audios) > MAX_AUDIO_REFERENCES:
        raise bad_request(
            f"ref2va accepts at most {MAX_AUDIO_REFERENCES} standalone audio references"
        )
    for image in images:
        height, width = image.rgb.shape[:2]
        if not MIN_IMAGE_ASPECT <= width / height <= MAX_IMAGE_ASPECT:
            raise bad_request(
                f"reference image aspect ratio must be in [0.4, 2.5], got {width}x{height}"
            )
        if min(width, height) < MIN_IMAGE_EDGE or max(width, height) > MAX_IMAGE_EDGE:
            raise bad_request(
                f"reference image dimensions must be in [256, 5760] pixels, got {width}x{height}"
            )
    total = 0.0
    for index, audio in enumerate(audios):
        if len(audio.payload) > MAX_AUDIO_BYTES:
            raise bad_request(f"reference audio {index} exceeds the 15 MiB size limit")
        if not AUDIO_FORMATS.intersection(audio.format_names):
            formats = ", ".join(audio.format_names) or "unknown"
            raise bad_request(f"reference audio {index} must be WAV or MP3, got {formats}")
        if audio.codec not in AUDIO_CODECS and not audio.codec.startswith("pcm_"):
            raise bad_request(
                f"reference audio {index} must use MP3 or PCM audio, got {audio.codec or 'unknown'}"
            )
        duration = audio.duration_s
        if not (
            math.isfinite(duration) and MIN_REFERENCE_AUDIO_S <= duration <= MAX_REFERENCE_AUDIO_S
        ):
            raise bad_request(
                f"reference audio {index} duration must be in [2, 15] seconds, got {duration:.3f}"
            )
        total += duration
    if total > MAX_REFERENCE_AUDIO_TOTAL_S:
        raise bad_request("reference audio must be at most 15 seconds in total")


def resolve_num_frames(
    num_frames: int | None, seconds: str | None, fps: float, extra_params: dict[str, Any]
) -> int:
    if num_frames is not None:
        return num_frames
    duration = extra_params.get("duration")
    if duration is not None:
        # H3 recipes ask for their clip length through extra_params (15 s -> 362 frames at 24 fps).
        if isinstance(duration, bool) or not isinstance(duration, int | float):
            raise bad_request("extra_params.duration must be a number of seconds.")
        if not math.isfinite(duration) or duration <= 0:
            raise bad_request("extra_params.duration must be a positive, finite number.")
        return max(1, int(float(duration) * fps))
    if seconds is not None:
        return int(float(seconds) * fps)
    return int(DEFAULT_SECONDS * fps)


def resolve_size(size: str | None, width: int | None, height: int | None) -> tuple[int, int]:
    if size is not None:
        w_text, _, h_text = size.partition("x")
        width, height = int(w_text), int(h_text)
    elif width is None and height is None:
        return DEFAULT_WIDTH, DEFAULT_HEIGHT
    elif width is None or height is None:
        raise bad_request("width and height must be given together.")
    if width < 1 or height < 1:
        raise invalid_field(f"width and height must be positive, got {width}x{height}.")
    if width % 2 or height % 2:
        # yuv420p subsamples chroma by two; the real pipeline also needs even latent canvases.
        raise bad_request(f"width and height must be even, got {width}x{height}.")
    return width, height
