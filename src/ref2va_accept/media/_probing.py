"""Probe a judged MP4: decode every frame and every audio sample once, and record what was found.

Every count here comes from decoding, never from the header alone: a server that writes a header
promising 124 frames and then dies mid-``mdat`` must not pass. Decoding streams frame by frame and
drops each frame at once, because a 15 s 1344x768 video decoded to RGB is more than 1 GiB.

AAC priming and padding, as measured with PyAV 18 (FFmpeg's ``mov`` demuxer and native ``aac``
encoder/decoder) on a stereo 32 kHz stream encoded from exactly N samples:

- The encoder emits one extra leading frame of priming (1024 samples). The muxer writes it as a
  packet with pts -1024 and an edit list that starts the track at 0; the demuxer marks it to be
  skipped, so the decoder drops it. The stream's ``start_time`` is 0 and the first decoded frame has
  pts 0. PyAV 18 exposes no ``initial_padding`` on the codec context; ``delay`` reads 0.
- The last packet's duration is trimmed to the true length (pts + duration of the last packet = N),
  but the decoder still returns the whole last frame, so the decoded count is ceil(N / 1024) * 1024:
  N plus 0..1023 samples of padding (N = 165333 decodes to 165888; N = 102400 decodes to 102400).

So ``AudioStream.samples_decoded`` is the plain decoded count and subtracts nothing: the
priming is already gone, and subtracting it again would make a correct file look 1024 samples
short. A file muxed without an edit list would instead show the 1024 priming samples (and a
different ``start_time``); both cases stay inside
:func:`ref2va_accept.media._expectations.audio_video_tolerance_s`, which allows two AAC frames and
nothing more.

A file that is not an MP4 makes :func:`probe` raise :class:`MediaError` (see
:func:`ref2va_accept.media._container.open_mp4`); ``check_media`` still reports ``not_mp4`` for a
probe (an `evidence.MediaProbe`) built some other way (for example loaded back from evidence).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import av

from ref2va_accept.core import file_sha256
from ref2va_accept.evidence import AudioStream, MediaProbe, VideoStream
from ref2va_accept.media._container import (
    av_reason,
    open_mp4,
    stream_fps,
    stream_seconds,
    x264_settings,
)

log = logging.getLogger(__name__)

__all__ = [
    "MediaProbe",
    "probe",
]


def probe(path: str | os.PathLike[str]) -> MediaProbe:
    """Decode every frame and every audio sample of ``path`` once, and describe what was found.

    Raises :class:`MediaError` (one line, basename only) when the file cannot be opened as an MP4.
    A decode error mid-stream does not raise: it is recorded in ``decode_errors``, that stream
    stops decoding, and the counts so far are kept, so that ``check_media`` can name both.
    """
    file_path = Path(path)
    container = open_mp4(file_path)
    try:
        size = file_path.stat().st_size
        sha = file_sha256(file_path)
        video_stream = container.streams.video[0] if container.streams.video else None
        audio_stream = container.streams.audio[0] if container.streams.audio else None
        if video_stream is not None:
            # Frame threads keep a 1344x768 x 362 decode to a few seconds; counts are unaffected.
            video_stream.thread_type = "AUTO"

        errors: list[str] = []
        frames = 0
        samples = 0
        first_video_packet = b""
        live = {s.index for s in (video_stream, audio_stream) if s is not None}
        wanted = [s for s in (video_stream, audio_stream) if s is not None]
        if wanted:
            demux = container.demux(*wanted)
            while live:
                try:
                    packet = next(demux)
                except StopIteration:
                    break
                except (av.error.FFmpegError, OSError, ValueError) as exc:
                    errors.append(f"demux: {av_reason(exc)} (after {frames} video frames)")
                    break
                if packet.stream.index not in live:
                    continue
                is_video = packet.stream.type == "video"
                if is_video and not first_video_packet:
                    first_video_packet = bytes(packet)
                try:
                    decoded = packet.decode()
                except (av.error.FFmpegError, ValueError) as exc:
                    if is_video:
                        errors.append(f"video: {av_reason(exc)} (after {frames} frames)")
                    else:
                        errors.append(f"audio: {av_reason(exc)} (after {samples} samples)")
                    live.discard(packet.stream.index)
                    continue
                for frame in decoded:
                    if is_video:
                        frames += 1
                    else:
                        samples += frame.samples  # type: ignore[union-attr]

        video = None
        if video_stream is not None:
            ctx = video_stream.codec_context
            fps = stream_fps(video_stream)
            video = VideoStream(
                codec=ctx.name,
                width=ctx.width,
                height=ctx.height,
                fps=fps,
                pix_fmt=ctx.format.name if ctx.format is not None else None,
                frames_decoded=frames,
                frames_declared=video_stream.frames or None,
                duration_s=frames / fps if fps > 0 else 0.0,
                start_time_s=stream_seconds(video_stream.start_time, video_stream.time_base),
                profile=ctx.profile,
                colour=(f"space {ctx.colorspace}, range {ctx.color_range}, "
                        f"primaries {ctx.color_primaries}, transfer {ctx.color_trc}"),
                encoder_settings=x264_settings(first_video_packet),
            )
        audio = None
        if audio_stream is not None:
            actx = audio_stream.codec_context
            rate = actx.sample_rate or 0
            layout = actx.layout
            audio = AudioStream(
                codec=actx.name,
                sample_rate=rate,
                channels=layout.nb_channels if layout is not None else 0,
                layout=layout.name if layout is not None else None,
                samples_decoded=samples,
                duration_s=samples / rate if rate > 0 else 0.0,
                start_time_s=stream_seconds(audio_stream.start_time, audio_stream.time_base),
            )
        result = MediaProbe(
            name=file_path.name,
            size_bytes=size,
            sha256=sha,
            container=container.format.name,
            video=video,
            audio=audio,
            decode_errors=tuple(errors),
        )
    finally:
        container.close()
    if result.decode_errors:
        log.warning("%s: %d decode error(s): %s", result.name, len(errors), errors[0])
    return result
