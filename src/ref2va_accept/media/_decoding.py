"""Decode a judged file's pictures and sound for the metrics and the bit-exact comparisons.

Video frames are decoded one at a time as RGB and audio as float32 [channels, n]; a decode error
raises :class:`MediaError` naming the file (basename only) and how far decoding got, because a
metric computed over a prefix would lie. (:func:`ref2va_accept.media._probing.probe`, by
contrast, records decode errors and keeps counting.)
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import av.container
import av.video.reformatter
import numpy as np
import numpy.typing as npt

from ref2va_accept.core import MediaContentError, MediaError
from ref2va_accept.media._container import av_reason, open_mp4

Float32Array = npt.NDArray[np.float32]

__all__ = [
    "DecodedAudio",
    "decode_audio",
    "decode_frames",
    "decoder_record",
    "iter_audio_chunks",
    "iter_video_frames",
    "keep_frame_buffers",
]


def decode_frames(container: av.container.InputContainer, stream: Any,
                  failure: Callable[[], str]) -> Iterator[Any]:
    """The decoded frames of ``stream``, one at a time; a decode error raises :class:`MediaError`
    reading ``failure()`` (where and how far decoding got), then FFmpeg's reason."""
    frames = container.decode(stream)
    while True:
        try:
            frame = next(frames)
        except StopIteration:
            return
        except (av.error.FFmpegError, ValueError) as exc:
            raise MediaContentError(f"{failure()}: {av_reason(exc)}") from None
        yield frame


# --- video ------------------------------------------------------------------------------------

# glibc mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


@functools.cache
def keep_frame_buffers() -> bool:
    """Let freed decoded frames be reused instead of returned to the kernel (glibc only);
    :func:`iter_video_frames` calls it.

    A 1344x768 RGB frame is 3 MB: by default glibc maps it fresh and unmaps it when freed (or
    trims it off the heap), so every frame page-faults its 750 pages in again, 80k faults and
    about 0.2 s of CPU for a 15 s video. Raising the mmap and trim thresholds once keeps up to
    128 MB of freed memory for reuse in this process. Returns whether it applied.
    """
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc: nothing to tune
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, 64 << 20)) and bool(mallopt(_M_TRIM_THRESHOLD,
                                                                     128 << 20))


# FFmpeg's AVColorSpace values as swscale reads them: a BT.709 tag decodes with BT.709's matrix,
# and an untagged (unspecified) stream with BT.601's, swscale's default.
_COLOUR_MATRIX = {0: "RGB", 1: "BT.709", 2: "BT.601 (untagged)", 4: "FCC", 5: "BT.601",
                  6: "BT.601", 7: "SMPTE 240M", 9: "BT.2020", 10: "BT.2020"}


def decoder_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """How :func:`iter_video_frames` turns this file's pictures into RGB: the library and its
    FFmpeg, and the colour matrix the stream's tag selects. Upstream VBench decodes with OpenCV,
    whose 4.x releases (what its numpy<2 pin gets) use BT.601 whatever the tag says."""
    with av.open(str(path)) as container:
        if not container.streams.video:
            raise MediaContentError(f"{Path(path).name}: expected a video stream, found none")
        context = container.streams.video[0].codec_context
        space = int(context.colorspace)
        tagged_range = {1: "limited", 2: "full"}.get(int(context.color_range), "unspecified")
    ffmpeg = getattr(av, "ffmpeg_version_info", None)
    return {"library": "PyAV", "pyav": av.__version__, "ffmpeg": str(ffmpeg) if ffmpeg else None,
            "to_rgb24": "swscale, one context per file",
            "colour_matrix": _COLOUR_MATRIX.get(space, f"AVColorSpace {space}"),
            # PyAV's reformat hands swscale an unspecified source range: limited (MPEG) range,
            # whatever the stream's range tag (recorded beside it) says.
            "range": "limited", "stream_range": tagged_range}


def iter_video_frames(path: str | os.PathLike[str]) -> Iterator[np.ndarray]:
    """Yield each decoded video frame as RGB uint8 (H, W, 3), one at a time.

    Unlike :func:`ref2va_accept.media._probing.probe`, a decode error raises :class:`MediaError`: a
    caller computing a metric over the frames must not silently score a prefix.
    """
    keep_frame_buffers()
    file_path = Path(path)
    container = open_mp4(file_path)
    try:
        if not container.streams.video:
            raise MediaContentError(f"{file_path.name}: expected a video stream, found none")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        # One converter for the whole file: frame.reformat() builds (and frees) a new swscale
        # context for every frame, most of the conversion's cost at small sizes; this one is
        # built on the first frame and reused while the frames' size and format hold.
        rgb = av.video.reformatter.VideoReformatter()
        index = 0

        def failure() -> str:  # built when decoding fails: the count reached by then
            return f"{file_path.name}: decode failed after {index} frames"

        for frame in decode_frames(container, stream, failure):
            index += 1
            # The same pixels as to_ndarray(format="rgb24") (swscale's unscaled converter either
            # way; test_media checks it); two slice threads take ~0.15 s off a 15 s 1344x768 video.
            yield rgb.reformat(frame, format="rgb24", threads=2).to_ndarray()
    finally:
        container.close()


# --- audio ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)  # eq on an ndarray field is ambiguous; compare fields instead
class DecodedAudio:
    samples: Float32Array  # [channels, n]
    sample_rate: int
    channels: int
    start_time_s: float | None
    duration_s: float
    codec: str
    name: str = ""  # basename of the source file, for messages; never a full path

    @classmethod
    def from_array(cls, samples: npt.ArrayLike, sample_rate: int, *,
                   start_time_s: float | None = 0.0, codec: str = "pcm",
                   name: str = "") -> DecodedAudio:
        """Wrap samples shaped [channels, n] (or [n] for mono) that did not come from a file."""
        array = np.asarray(samples, dtype=np.float32)
        if array.ndim == 1:
            array = array[np.newaxis, :]
        if array.ndim != 2:
            raise ValueError(f"expected samples shaped [channels, n], got shape {array.shape}")
        if sample_rate <= 0:
            raise ValueError(f"expected a positive sample rate, got {sample_rate}")
        return cls(array, sample_rate, array.shape[0], start_time_s,
                   array.shape[1] / sample_rate, codec, name)


def iter_audio_chunks(container: Any, name: str) -> Iterator[Float32Array]:
    """The first audio stream of an open container as float32 [channels, n] chunks, streamed.

    A decode error raises :class:`MediaError` naming ``name`` and how far decoding got.
    """
    stream = container.streams.audio[0]
    resampler: Any = None
    decoded = 0

    def failure() -> str:  # built when decoding fails: the count reached by then
        return f"{name}: audio decode failed after {decoded} samples"

    for frame in decode_frames(container, stream, failure):
        planar = [frame]
        if frame.format.name != "fltp":
            # AAC decodes to fltp already; other codecs are converted, not reinterpreted.
            resampler = resampler or av.AudioResampler(
                format="fltp", layout=frame.layout, rate=frame.sample_rate)
            planar = resampler.resample(frame)
        for part in planar:
            chunk = np.asarray(part.to_ndarray(), dtype=np.float32)
            decoded += chunk.shape[1]
            yield chunk


def decode_audio(path: str | os.PathLike[str]) -> DecodedAudio:
    """Decode the first audio stream of ``path`` into float32 [channels, n].

    Raises :class:`MediaError` (one line, basename only) when the file cannot be opened, has no
    audio stream, fails to decode, or decodes to no samples: a metric over a prefix would lie.
    """
    file_path = Path(path)
    name = file_path.name
    if not file_path.is_file():
        raise MediaError(f"{name}: expected a media file with an audio stream, found no file")
    try:
        container = av.open(str(file_path), mode="r")
    except (av.error.FFmpegError, OSError, ValueError) as exc:
        raise MediaContentError(
            f"{name}: cannot open as a media file: {av_reason(exc)}") from None
    try:
        if not container.streams.audio:
            raise MediaContentError(f"{name}: expected an audio stream, found none")
        stream = container.streams.audio[0]
        ctx = stream.codec_context
        chunks: list[Float32Array] = []
        for chunk in iter_audio_chunks(container, name):
            if chunks and chunk.shape[0] != chunks[0].shape[0]:
                raise MediaContentError(f"{name}: audio channel count changed mid-stream from "
                                        f"{chunks[0].shape[0]} to {chunk.shape[0]}")
            chunks.append(chunk)
        decoded = sum(chunk.shape[1] for chunk in chunks)
        rate = int(ctx.sample_rate or 0)
        if decoded == 0 or rate <= 0:
            raise MediaContentError(f"{name}: expected decodable audio, the {ctx.name} stream "
                                    "decoded to no samples")
        start = (float(stream.start_time * stream.time_base)
                 if stream.start_time is not None and stream.time_base is not None else None)
        samples = np.concatenate(chunks, axis=1)
        return DecodedAudio(samples, rate, samples.shape[0], start, samples.shape[1] / rate,
                            ctx.name, name)
    finally:
        container.close()
