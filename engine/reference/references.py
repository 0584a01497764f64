"""Decoding of uploaded reference images and audio (PyAV), in the shapes the generator wants."""

from __future__ import annotations

import io
from dataclasses import dataclass

import av
import numpy as np

# H3's audio rate: the generator works at it so reference audio needs no further resampling.
AUDIO_SAMPLE_RATE = 32_000
# Guards against decompression bombs, like the real server's decoder pixel limit.
MAX_REFERENCE_PIXELS = 64 * 1024 * 1024


class ReferenceDecodeError(ValueError):
    """An upload that PyAV could not turn into an image or an audio clip."""


@dataclass(frozen=True)
class ReferenceImage:
    """An uploaded image, decoded to RGB; ``payload`` is kept for hashing into the seed."""

    filename: str
    payload: bytes
    rgb: np.ndarray  # (H, W, 3) uint8
    format_name: str  # FFmpeg's demuxer name, e.g. "png_pipe"


@dataclass(frozen=True)
class ReferenceAudio:
    """An uploaded audio clip, decoded to float32 stereo at :data:`AUDIO_SAMPLE_RATE`.

    ``format_names``, ``codec`` and ``duration_s`` describe the file as sent (what vLLM-Omni's
    ffprobe reads for H3's limits); the duration counts the decoded source samples.
    """

    filename: str
    payload: bytes
    samples: np.ndarray  # (2, N) float32 in [-1, 1]
    format_names: tuple[str, ...] = ()
    codec: str = ""
    duration_s: float = 0.0


def decode_image(payload: bytes, filename: str) -> ReferenceImage:
    """Decode the first frame of an image file (PNG, JPEG, WebP...) to RGB."""
    try:
        with av.open(io.BytesIO(payload), mode="r") as container:
            if not container.streams.video:
                raise ReferenceDecodeError(f"Invalid uploaded image reference: {filename}")
            stream = container.streams.video[0]
            if stream.width * stream.height > MAX_REFERENCE_PIXELS:
                raise ReferenceDecodeError(
                    f"Invalid uploaded image reference: {filename}; "
                    "image exceeds the decoder pixel limit."
                )
            for frame in container.decode(stream):
                rgb = np.ascontiguousarray(frame.to_ndarray(format="rgb24"))
                return ReferenceImage(filename, payload, rgb, container.format.name)
    except ReferenceDecodeError:
        raise
    except (av.FFmpegError, ValueError, IndexError) as exc:
        raise ReferenceDecodeError(f"Invalid uploaded image reference: {filename}") from exc
    raise ReferenceDecodeError(f"Invalid uploaded image reference: {filename}")


def decode_audio(payload: bytes, filename: str) -> ReferenceAudio:
    """Decode an audio file (WAV, MP3...) and resample it to stereo float at 32 kHz."""
    resampler = av.AudioResampler(format="fltp", layout="stereo", rate=AUDIO_SAMPLE_RATE)
    chunks: list[np.ndarray] = []
    source_seconds = 0.0
    try:
        with av.open(io.BytesIO(payload), mode="r") as container:
            if not container.streams.audio:
                raise ReferenceDecodeError(f"Invalid uploaded audio reference: {filename}")
            stream = container.streams.audio[0]
            format_names = tuple(n.strip().lower() for n in container.format.name.split(","))
            # the codec id ffprobe reports ("mp3"), not the decoder's name ("mp3float")
            codec = str(stream.codec_context.codec.canonical_name).lower()
            for frame in container.decode(stream):
                if frame.sample_rate:
                    source_seconds += frame.samples / frame.sample_rate
                frame.pts = None  # the resampler re-times; source timestamps may be absent
                chunks.extend(out.to_ndarray() for out in resampler.resample(frame))
            chunks.extend(out.to_ndarray() for out in resampler.resample(None))
    except ReferenceDecodeError:
        raise
    except (av.FFmpegError, ValueError, IndexError) as exc:
        raise ReferenceDecodeError(f"Invalid uploaded audio reference: {filename}") from exc
    if not chunks:
        raise ReferenceDecodeError(f"Uploaded audio reference has no samples: {filename}")
    samples = np.concatenate(chunks, axis=1).astype(np.float32, copy=False)
    return ReferenceAudio(
        filename, payload, np.clip(samples, -1.0, 1.0), format_names, codec, source_seconds
    )
