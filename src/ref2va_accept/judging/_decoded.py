"""Bit-exact comparison of decoded MP4 output: the `mp4.video` and `mp4.audio` points.

Both files are decoded in lockstep, frame by frame, so a 15 s 1344x768 video is never held whole;
the comparison semantics are those of the tensors package (tensors._streaming.StreamingComparison).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ref2va_accept.evidence import PointRecord
from ref2va_accept.media import iter_audio_chunks, iter_video_frames, open_mp4
from ref2va_accept.tensors import DumpComparison, Status, StreamingComparison

log = logging.getLogger(__name__)


def _audio_chunks(path: Path) -> Iterator[npt.NDArray[np.float32]]:
    """Decoded audio as float32 [channels, samples], one decoded frame at a time."""
    container = open_mp4(path)
    try:
        yield from iter_audio_chunks(container, path.name)
    finally:
        container.close()


def _streams(path: Path) -> tuple[bool, int | None]:
    """Whether ``path`` has a video stream, and its audio channel count (None: no audio)."""
    container = open_mp4(path)
    try:
        audio = container.streams.audio
        channels = audio[0].codec_context.layout.nb_channels if audio else None
        return bool(container.streams.video), channels
    finally:
        container.close()


def _video_point(path_a: Path, path_b: Path) -> PointRecord:
    stream = StreamingComparison("mp4.video", "U8")
    frames_a, frames_b = iter_video_frames(path_a), iter_video_frames(path_b)
    count = [0, 0]
    frame_shape: list[tuple[int, ...]] = [(0, 0, 3), (0, 0, 3)]
    live = [True, True]
    while any(live):
        pair: list[npt.NDArray[Any] | None] = [None, None]
        for side, frames in enumerate((frames_a, frames_b)):
            if live[side]:
                pair[side] = next(frames, None)
                live[side] = pair[side] is not None
        frame_a, frame_b = pair
        for side, frame in enumerate(pair):
            if frame is not None:
                count[side] += 1
                frame_shape[side] = frame.shape
        if frame_a is not None and frame_b is not None and frame_a.shape == frame_b.shape:
            stream.add(frame_a[None], frame_b[None])
    shapes = [(count[s], *frame_shape[s]) for s in (0, 1)]
    if shapes[0] == shapes[1] and count[0] == 0:
        return PointRecord.of("mp4.video", "equal", "U8", "U8", shapes[0], shapes[1])
    return stream.result(shapes[0], shapes[1])


def _paired_audio(
    chunks_a: Iterable[npt.NDArray[np.float32]], chunks_b: Iterable[npt.NDArray[np.float32]],
    stream: StreamingComparison,
) -> tuple[int, int]:
    """Feed equal-length runs of both sides to ``stream``; the total samples of each side."""
    iters = [iter(chunks_a), iter(chunks_b)]
    empty = np.empty((0, 0), np.float32)
    pending = [empty, empty]
    totals = [0, 0]
    while True:
        for side in (0, 1):
            while pending[side].shape[1] == 0:
                chunk = next(iters[side], None)
                if chunk is None:
                    break
                pending[side] = chunk
        run = min(pending[0].shape[1], pending[1].shape[1])
        if run == 0:  # one side has ended
            break
        # Decoders may cut frames differently on each side; compare sample runs, not frames.
        stream.add(pending[0][:, :run], pending[1][:, :run])
        totals = [totals[0] + run, totals[1] + run]
        pending = [pending[0][:, run:], pending[1][:, run:]]
    for side in (0, 1):
        totals[side] += pending[side].shape[1] + sum(c.shape[1] for c in iters[side])
    return totals[0], totals[1]


def compare_decoded_mp4(a_path: str | os.PathLike[str],
                        b_path: str | os.PathLike[str]) -> DumpComparison:
    """Compare the decoded output of two MP4 files: ``mp4.video`` then ``mp4.audio``.

    Video: RGB uint8 frames [frames, height, width, 3], decoded in lockstep; a different frame
    count is a shape mismatch naming both shapes. Audio: float32 [channels, samples].
    Raises :class:`MediaError` when a file cannot be opened or decoded.
    """
    path_a, path_b = Path(a_path), Path(b_path)
    (video_a, channels_a), (video_b, channels_b) = _streams(path_a), _streams(path_b)
    points: list[PointRecord] = []
    if video_a and video_b:
        points.append(_video_point(path_a, path_b))
    else:
        status: Status = "missing_in_a" if not video_a else "missing_in_b"
        points.append(PointRecord.of("mp4.video", status, None, None, None, None))
    if channels_a is None or channels_b is None:
        status = "missing_in_a" if channels_a is None else "missing_in_b"
        points.append(PointRecord.of("mp4.audio", status, None, None, None, None))
    elif channels_a != channels_b:
        # Count both sides' samples anyway, so that the report shows both true shapes.
        length_a = sum(c.shape[1] for c in _audio_chunks(path_a))
        length_b = sum(c.shape[1] for c in _audio_chunks(path_b))
        points.append(PointRecord.of("mp4.audio", "shape_mismatch", "F32", "F32",
                                      (channels_a, length_a), (channels_b, length_b)))
    else:
        stream = StreamingComparison("mp4.audio", "F32", axis=1)
        length_a, length_b = _paired_audio(_audio_chunks(path_a), _audio_chunks(path_b), stream)
        points.append(stream.result((channels_a, length_a), (channels_b, length_b)))
    return DumpComparison.of(points)
