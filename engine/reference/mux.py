"""MP4 muxing of a generated video (H.264 yuv420p) and its audio (stereo AAC) with PyAV.

Determinism is part of the contract: the same frames and audio must give byte-identical MP4s. So
the encoders run single-threaded (x264's threaded lookahead and slice decisions depend on timing),
x264 without its macroblock tree (VIDEO_OPTIONS), and every stream and the container carry the
``bitexact`` flags that keep FFmpeg from writing its version or wall-clock metadata.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from fractions import Fraction
from typing import cast

import av
import numpy as np
from av.codec.context import Flags
from av.video.reformatter import VideoReformatter

from engine.reference.generator import GeneratedMedia

# What vLLM-Omni's own muxer uses (crf 18, x264's default preset), pinned to one thread, and
# without x264's macroblock-tree rate control: with it, the same frames at the campaign's 112x64
# gave other bytes (and other decoded frames: the mp4.video point) in about one encode in ten in
# a process that had encoded before (103 of 901 on one machine; 96 wide 12 of 267; 128 and 256
# wide none), an uninitialised read in its lookahead; without it, none in 1,865 at 112 and 96.
VIDEO_CODEC = "libx264"
VIDEO_OPTIONS = {"crf": "18", "preset": "medium", "threads": "1", "x264-params": "mbtree=0"}
AUDIO_CODEC = "aac"
AAC_FRAME_SAMPLES = 1024


def _frame_rate(fps: float) -> Fraction:
    return Fraction(fps).limit_denominator(10_000)


def encode_mp4(media: GeneratedMedia, check: Callable[[], None] = lambda: None) -> bytes:
    """Encode ``media`` into MP4 bytes; ``check`` is called per frame so cancellation is prompt."""
    buffer = io.BytesIO()
    rate = _frame_rate(media.fps)
    # The edit lists that trim AAC priming are written in the movie timescale (1000 by default),
    # which would round the audio duration to whole milliseconds; a timescale both the frame rate
    # and the sample rate divide keeps both stream durations exact.
    timescale = math.lcm(rate.numerator, media.sample_rate)
    options = {"fflags": "+bitexact"}
    if timescale < 2**31:
        options["movie_timescale"] = str(timescale)
    with av.open(buffer, mode="w", format="mp4", options=options) as container:
        video = cast(
            av.VideoStream,
            container.add_stream(VIDEO_CODEC, rate=rate, options=dict(VIDEO_OPTIONS)),
        )
        video.width, video.height, video.pix_fmt = media.width, media.height, "yuv420p"
        video.codec_context.thread_count = 1
        video.codec_context.flags |= Flags.bitexact
        audio_stream: av.AudioStream | None = None
        if media.audio is not None:
            audio_stream = cast(
                av.AudioStream,
                container.add_stream(AUDIO_CODEC, rate=media.sample_rate, layout="stereo"),
            )
            audio_stream.codec_context.thread_count = 1
            audio_stream.codec_context.flags |= Flags.bitexact

        audio_written = 0
        frames_written = 0
        # One converter for the whole clip: ``VideoFrame.reformat`` builds a new swscale context
        # for every frame (0.4 s of a 124-frame request under load); this one keeps its context
        # while the frames' size and format stay the same, and gives the same pixels. Its slice
        # threads must stay off: a reused context with swscale's automatic threads gave other bytes
        # for the same clip now and then while another thread churned (5 clips in 150).
        to_yuv = VideoReformatter()
        for frames_written, rgb in enumerate(media.frames, start=1):
            check()
            frame = to_yuv.reformat(av.VideoFrame.from_ndarray(rgb, format="rgb24"),
                                    format="yuv420p", threads=1)
            frame.pts = frames_written - 1
            frame.time_base = 1 / rate
            container.mux(video.encode(frame))
            if audio_stream is not None and media.audio is not None:
                # Interleave: keep the audio written up to the end of this video frame.
                until = round(frames_written * media.sample_rate / rate)
                audio_written = _encode_audio(
                    container,
                    stream=audio_stream,
                    samples=media.audio,
                    start=audio_written,
                    until=until,
                    sample_rate=media.sample_rate,
                )
        if frames_written != media.num_frames:
            raise RuntimeError(
                f"generator produced {frames_written} frames, expected {media.num_frames}"
            )
        container.mux(video.encode(None))
        if audio_stream is not None and media.audio is not None:
            _encode_audio(
                container,
                stream=audio_stream,
                samples=media.audio,
                start=audio_written,
                until=media.audio.shape[1],
                sample_rate=media.sample_rate,
                final=True,
            )
            container.mux(audio_stream.encode(None))
    return buffer.getvalue()


def _encode_audio(
    container: av.container.OutputContainer,
    *,
    stream: av.AudioStream,
    samples: np.ndarray,
    start: int,
    until: int,
    sample_rate: int,
    final: bool = False,
) -> int:
    """Encode whole AAC frames of ``samples[:, start:until]``; the tail too when ``final``."""
    until = min(until, samples.shape[1])
    position = start
    while position < until:
        size = min(AAC_FRAME_SAMPLES, until - position)
        if size < AAC_FRAME_SAMPLES and not final:
            break
        chunk = np.ascontiguousarray(samples[:, position : position + size])
        frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout="stereo")
        frame.sample_rate = sample_rate
        frame.pts = position
        frame.time_base = Fraction(1, sample_rate)
        container.mux(stream.encode(frame))
        position += size
    return position
