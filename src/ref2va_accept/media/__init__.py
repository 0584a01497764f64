"""Read, probe, check and decode the judged MP4 files.

- :mod:`~ref2va_accept.media._container`: open an MP4 (one-line errors naming the file by basename)
  and read what its streams declare.
- :mod:`~ref2va_accept.media._probing`: decode everything once and record the counts found
  (:class:`MediaProbe`), including what AAC priming and padding look like through PyAV.
- :mod:`~ref2va_accept.media._expectations`: the problems a probe shows against a
  :class:`MediaExpectation` (:class:`MediaProblem`).
- :mod:`~ref2va_accept.media._decoding`: video frames as RGB and audio as float32, streamed, for the
  metrics and the bit-exact comparisons.

This package needs PyAV and numpy only: importing it never loads OpenCV or scipy.
"""

from __future__ import annotations

from ref2va_accept.media._container import av_reason, open_mp4, x264_settings
from ref2va_accept.media._decoding import (
    DecodedAudio,
    decode_audio,
    decode_frames,
    decoder_record,
    iter_audio_chunks,
    iter_video_frames,
    keep_frame_buffers,
)
from ref2va_accept.media._expectations import (
    AAC_FRAME_SAMPLES,
    FPS_TOLERANCE,
    FrameCount,
    MediaExpectation,
    MediaProblem,
    audio_video_tolerance_s,
    check_media,
)
from ref2va_accept.media._probing import MediaProbe, probe

__all__ = [
    "AAC_FRAME_SAMPLES",
    "FPS_TOLERANCE",
    "DecodedAudio",
    "FrameCount",
    "MediaExpectation",
    "MediaProbe",
    "MediaProblem",
    "audio_video_tolerance_s",
    "av_reason",
    "check_media",
    "decode_audio",
    "decode_frames",
    "decoder_record",
    "iter_audio_chunks",
    "iter_video_frames",
    "keep_frame_buffers",
    "open_mp4",
    "probe",
    "x264_settings",
]
