"""Every CPU-computable metric (and every model-based one whose weights are given) in ONE pass.

The decoded 15 s 1344x768 video is over 1 GiB as uint8, so frames are streamed: each metric keeps
only what its definition needs (the previous frame, the first frame's features, the even frame
before an odd one, the sampled frame before this one).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ref2va_accept.core import MediaContentError
from ref2va_accept.evidence import ScoreRecord
from ref2va_accept.media import decoder_record, iter_video_frames, open_mp4
from ref2va_accept.quality import _consistency as consistency
from ref2va_accept.quality import _proxies as proxies
from ref2va_accept.quality import _vbench as vbench
from ref2va_accept.quality._frames import FramesFailed, FrameView, failed_on
from ref2va_accept.quality._imageops import U8
from ref2va_accept.quality._registry import (
    SCORERS,
    ScorerError,
    error_score,
    open_score,
    with_extra,
)

log = logging.getLogger(__name__)

__all__ = ["ScoredVideo", "score_frames", "score_video", "score_video_counted", "video_fps"]

_ORDER = {scorer_id: i for i, scorer_id in enumerate(SCORERS)}


def score_frames(frames: Iterable[U8], *, fps: float, reference_image: U8 | None = None,
                 weights: Mapping[str, Path] | None = None,
                 weight_pins: Mapping[str, str] | None = None,
                 include_proxies: bool = True,
                 stand_ins: frozenset[str] = frozenset(), device: str = "cpu") -> list[ScoreRecord]:
    """Score RGB uint8 frames in order; the result lists every dimension, open ones included.
    Every model runs on ``device`` (cpu, npu:N or cuda:N), and its scores' ``made_with`` say so.

    ``weight_pins`` maps a weights name to the sha256 the campaign pinned for it: a file that
    hashes otherwise puts its dimensions in error rather than scoring with other weights.
    """
    if not fps > 0:
        raise ScorerError(f"fps must be positive, got {fps}")
    metrics, scores = vbench.vbench_metrics(weights, fps=fps, reference=reference_image,
                                            pins=weight_pins, stand_ins=stand_ins,
                                            device=device)
    if include_proxies:
        metrics += proxies.proxy_metrics(fps)
    metrics += consistency.consistency_metrics(reference_image)
    if reference_image is None:
        scores += [open_score(info, "needs the reference image (--reference)")
                   for info in SCORERS.values() if info.id.startswith("consistency.reference.")]
    failed: dict[int, str] = {}
    prev: FrameView | None = None
    count = 0
    for index, rgb in enumerate(frames):
        view = FrameView(index, rgb, prev)
        for slot, metric in enumerate(metrics):
            if slot in failed:
                continue
            try:
                metric.update(view)
            except ScorerError:
                raise
            except FramesFailed as exc:  # a batch of frames, named in its message
                failed[slot] = str(exc)
                log.warning("%s failed: %s", metric.info.id, failed[slot])  # type: ignore[attr-defined]
            except Exception as exc:  # a model's own failure closes that dimension only
                if not hasattr(metric, "info"):
                    raise
                failed[slot] = failed_on(f"frame {index}", exc)
                log.warning("%s failed: %s", metric.info.id, failed[slot])
        prev, count = view, index + 1
    if count == 0:
        raise ScorerError("no frames to score (the video decoded to zero frames)")
    for slot, metric in enumerate(metrics):
        if slot not in failed:
            try:  # a batched metric runs its last frames here
                scores += metric.finish()
                continue
            except FramesFailed as exc:
                failed[slot] = str(exc)
        scores.append(error_score(metric.info, failed[slot]))  # type: ignore[attr-defined]
    return sorted(scores, key=lambda s: _ORDER.get(s.scorer, len(_ORDER)))


def prefetched(frames: Iterable[U8], depth: int = 3) -> Iterator[U8]:
    """Decode on a helper thread while the caller scores: FFmpeg and OpenCV release the GIL, so
    decoding and scoring overlap on two cores. At most ``depth`` frames wait in the queue; an
    error in decoding is re-raised in the caller, after the frames decoded before it."""
    handoff: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for frame in frames:
                while not stop.is_set():
                    try:
                        handoff.put(("frame", frame), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            handoff.put(("end", None))
        except BaseException as exc:  # handed to the consumer, which re-raises it
            handoff.put(("error", exc))

    worker = threading.Thread(target=produce, name="decode-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            kind, item = handoff.get()
            if kind == "end":
                return
            if kind == "error":
                raise item
            yield item
    finally:
        stop.set()
        while worker.is_alive():
            try:
                handoff.get_nowait()
            except queue.Empty:
                worker.join(timeout=0.05)


def _declared(path: str | os.PathLike[str]) -> tuple[float, int | None]:
    """The video stream's average frame rate and declared frame count, from the container."""
    file_path = Path(path)
    name = file_path.name
    with open_mp4(file_path) as container:  # one-line MediaError / MediaContentError
        if not container.streams.video:
            raise MediaContentError(f"{name}: expected a video stream, found none")
        stream = container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate
        declared = stream.frames or None
    if not rate:
        raise MediaContentError(f"{name}: the video stream declares no frame rate")
    return float(rate), declared


def video_fps(path: str | os.PathLike[str]) -> float:
    """The video stream's average frame rate, from the container (no decoding)."""
    return _declared(path)[0]


@dataclass(frozen=True)
class ScoredVideo:
    """A video's scores and how many frames they cover: decoded, and what the container declares
    (None when it declares none). Scores over fewer frames than declared are a prefix's."""

    scores: list[ScoreRecord]
    frames_decoded: int
    frames_declared: int | None


def score_video_counted(path: str | os.PathLike[str], *, reference_image: Path | None = None,
                        weights: Mapping[str, Path] | None = None,
                        weight_pins: Mapping[str, str] | None = None,
                        include_proxies: bool = True,
                        stand_ins: frozenset[str] = frozenset(),
                        device: str = "cpu") -> ScoredVideo:
    """Decode ``path`` once and score it (see :func:`score_frames`), counting the frames."""
    reference = consistency.load_reference_image(reference_image) if reference_image else None
    fps, declared = _declared(path)
    decoded = 0

    def counted(frames: Iterable[U8]) -> Iterator[U8]:
        nonlocal decoded
        for frame in frames:
            decoded += 1
            yield frame

    try:
        scores = score_frames(counted(prefetched(iter_video_frames(path))), fps=fps,
                              reference_image=reference, weights=weights,
                              weight_pins=weight_pins, include_proxies=include_proxies,
                              stand_ins=stand_ins, device=device)
    except ScorerError as exc:
        raise ScorerError(f"{Path(path).name}: {exc}") from None
    # Every score says how its frames were decoded (the colour matrix moves flicker by ~0.07%).
    decoded_with = decoder_record(path)
    scores = [with_extra(s, decoded_with=decoded_with)
              for s in scores]
    return ScoredVideo(scores, decoded, declared)


def score_video(path: str | os.PathLike[str], *, reference_image: Path | None = None,
                weights: Mapping[str, Path] | None = None,
                weight_pins: Mapping[str, str] | None = None,
                include_proxies: bool = True,
                stand_ins: frozenset[str] = frozenset(), device: str = "cpu") -> list[ScoreRecord]:
    """Decode ``path`` once and score it (see :func:`score_frames`)."""
    return score_video_counted(path, reference_image=reference_image, weights=weights,
                               weight_pins=weight_pins, include_proxies=include_proxies,
                               stand_ins=stand_ins, device=device).scores
