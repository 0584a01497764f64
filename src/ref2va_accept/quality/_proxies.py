"""Model-free stand-ins for VBench dimensions, for machines without the weights.

Each is labelled ``proxy`` (scorer kind and id) and is only ever compared with B0 scored by the
same proxy: the numbers are not VBench numbers. They keep VBench's formula shapes so they react to
the same failures (lost motion, jitter, identity drift, colour drift, blur), and they work on one
downscaled copy (short side 128; VBench's models see 224..512 px inputs), except sharpness, which
needs the full resolution to see fine-scale blur.
"""

from __future__ import annotations

import functools
import math

import cv2
import numpy as np
import numpy.typing as npt

from ref2va_accept.evidence import ScoreRecord
from ref2va_accept.quality import _imageops as imageops
from ref2va_accept.quality._frames import FrameMetric, FrameView
from ref2va_accept.quality._imageops import U8
from ref2va_accept.quality._registry import error_score, ok_score, scorer
from ref2va_accept.quality._vbench import (
    consistency_score,
    dynamic_interval,
    dynamic_verdict,
    top5_flow_magnitude,
)

__all__ = [
    "SHARPNESS_HALF_POINT",
    "DenseFlow",
    "FlowDynamicDegree",
    "FlowWarpSmoothness",
    "HistogramBackgroundConsistency",
    "SharpnessQuality",
    "SsimSubjectConsistency",
    "midpoint_prediction",
    "proxy_metrics",
    "sharpness",
]

F32 = npt.NDArray[np.float32]
# Laplacian variance at which the sharpness proxy reads 0.5: v / (v + 200) maps [0, inf) to [0, 1)
# and stays sensitive across the range natural 1344x768 frames span (about 50..2000).
SHARPNESS_HALF_POINT = 200.0


class DenseFlow:
    """DIS optical flow (OpenCV, "fast" preset): dense flow a -> b, (H, W, 2) in pixels.

    Chosen over Farneback: on 224x128 frames it is about 7x faster, and Farneback at its usual
    settings lost most of a 7 px/frame motion that DIS (and RAFT) recover.
    """

    def __init__(self) -> None:
        self._dis = cv2.DISOpticalFlow_create(  # type: ignore[attr-defined]
            cv2.DISOPTICAL_FLOW_PRESET_FAST)

    def __call__(self, a: U8, b: U8) -> F32:
        return np.asarray(self._dis.calc(a, b, None), np.float32)


@functools.lru_cache(maxsize=4)
def _pixel_grid(h: int, w: int) -> tuple[F32, F32]:
    gx, gy = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    gx.flags.writeable = gy.flags.writeable = False  # shared between calls
    return gx, gy


def midpoint_prediction(before: U8, after: U8, flow: F32) -> U8:
    """The frame halfway between ``before`` and ``after`` under linear motion.

    ``flow`` is before -> after at any resolution; it is rescaled to the images. Each pixel of the
    midpoint is fetched half a flow back from ``before`` and half a flow on from ``after``, and the
    two are averaged, the usual backward-warping approximation of frame interpolation.
    """
    h, w = before.shape[:2]
    if flow.shape[:2] != (h, w):
        sx, sy = w / flow.shape[1], h / flow.shape[0]
        flow = np.asarray(cv2.resize(flow, (w, h), interpolation=cv2.INTER_LINEAR), np.float32)
        flow[..., 0] *= sx
        flow[..., 1] *= sy
    gx, gy = _pixel_grid(h, w)
    half = 0.5 * flow
    from_before = cv2.remap(before, gx - half[..., 0], gy - half[..., 1], cv2.INTER_LINEAR,
                            borderMode=cv2.BORDER_REPLICATE)
    from_after = cv2.remap(after, gx + half[..., 0], gy + half[..., 1], cv2.INTER_LINEAR,
                           borderMode=cv2.BORDER_REPLICATE)
    return np.asarray(cv2.addWeighted(from_before, 0.5, from_after, 0.5, 0.0), np.uint8)


def sharpness(gray: U8) -> float:
    """Normalised Laplacian variance in [0, 1): blur lowers it, detail and noise raise it."""
    lap = cv2.Laplacian(gray, cv2.CV_16S, ksize=3)
    _, std = cv2.meanStdDev(lap)
    var = float(std[0, 0]) ** 2
    return var / (var + SHARPNESS_HALF_POINT)


class FlowDynamicDegree:
    """VBench's dynamic_degree logic (sampling, top-5% magnitude, threshold) on DIS flow.

    The flow runs at the analysis size (short side 128) and the threshold is 6 * min(H, W) / 256 of
    that image, so threshold and magnitudes scale together.
    """

    def __init__(self, fps: float) -> None:
        self.info = scorer("proxy.dynamic_degree.dis_flow")
        self.flow = DenseFlow()
        self.interval = dynamic_interval(fps)
        self.prev: U8 | None = None
        self.n_sampled = 0
        self.min_side = 0
        self.pair_scores: list[float] = []

    def update(self, view: FrameView) -> None:
        if view.index % self.interval:
            return
        gray = view.small_gray
        self.n_sampled += 1
        self.min_side = min(gray.shape[:2])
        if self.prev is not None:
            self.pair_scores.append(top5_flow_magnitude(
                np.moveaxis(self.flow(self.prev, gray), -1, 0)))
        self.prev = gray

    def finish(self) -> list[ScoreRecord]:
        if not self.n_sampled:
            return [error_score(self.info, "no frames")]
        dynamic = dynamic_verdict(self.pair_scores, self.n_sampled, self.min_side)
        threshold = 6.0 * self.min_side / 256.0
        return [ok_score(self.info, 1.0 if dynamic else 0.0, sampled_frames=self.n_sampled,
                         interval=self.interval, threshold=threshold,
                         pairs_over_threshold=sum(s > threshold for s in self.pair_scores),
                         pairs_needed=round(4 * (self.n_sampled / 16.0)))]


class FlowWarpSmoothness:
    """Odd frames predicted from even neighbours (as VBench's AMT-S does) by flow warping."""

    def __init__(self) -> None:
        self.info = scorer("proxy.motion_smoothness.flow_warp")
        self.flow = DenseFlow()
        self.even: FrameView | None = None
        self.odd: U8 | None = None
        self.maes: list[float] = []

    def update(self, view: FrameView) -> None:
        if view.index % 2 == 1:
            self.odd = view.small_rgb
            return
        if self.even is not None and self.odd is not None:
            flow = self.flow(self.even.small_gray, view.small_gray)
            pred = midpoint_prediction(self.even.small_rgb, view.small_rgb, flow)
            self.maes.append(imageops.mae(pred, self.odd))
        self.even, self.odd = view, None

    def finish(self) -> list[ScoreRecord]:
        if not self.maes:
            return [error_score(self.info, "needs at least 3 frames")]
        return [ok_score(self.info, (255.0 - math.fsum(self.maes) / len(self.maes)) / 255.0,
                         predicted_frames=len(self.maes))]


class SsimSubjectConsistency:
    """(c(f_{i-1}, f_i) + c(f_0, f_i)) / 2 with c = max(0, SSIM) on downscaled luma."""

    def __init__(self) -> None:
        self.info = scorer("proxy.subject_consistency.ssim")
        self.first: imageops.SsimStats | None = None
        self.to_prev: list[float] = []
        self.to_first: list[float] = []

    def update(self, view: FrameView) -> None:
        if self.first is None:
            self.first = view.small_ssim
            return
        assert view.ssim_to_prev is not None
        self.to_prev.append(max(0.0, view.ssim_to_prev))
        self.to_first.append(max(0.0, imageops.ssim_pair(self.first, view.small_ssim)))

    def finish(self) -> list[ScoreRecord]:
        if not self.to_prev:
            return [error_score(self.info, "needs at least 2 frames")]
        return [ok_score(self.info, consistency_score(self.to_prev, self.to_first))]


class HistogramBackgroundConsistency:
    """The same formula shape with c = max(0, colour-histogram correlation)."""

    def __init__(self) -> None:
        self.info = scorer("proxy.background_consistency.histogram")
        self.first: F32 | None = None
        self.to_prev: list[float] = []
        self.to_first: list[float] = []

    def update(self, view: FrameView) -> None:
        if self.first is None:
            self.first = view.histogram
            return
        assert view.hist_corr_to_prev is not None
        self.to_prev.append(max(0.0, view.hist_corr_to_prev))
        self.to_first.append(max(0.0, imageops.hist_correlation(self.first, view.histogram)))

    def finish(self) -> list[ScoreRecord]:
        if not self.to_prev:
            return [error_score(self.info, "needs at least 2 frames")]
        return [ok_score(self.info, consistency_score(self.to_prev, self.to_first))]


class SharpnessQuality:
    """No-reference quality: mean normalised Laplacian variance at full resolution.

    Full resolution because blur from an approximation is a fine-scale loss; sampled every
    round(fps/8) frames like dynamic degree, since sharpness changes slowly.
    """

    def __init__(self, fps: float) -> None:
        self.info = scorer("proxy.imaging_quality.sharpness")
        self.interval = dynamic_interval(fps)
        self.values: list[float] = []

    def update(self, view: FrameView) -> None:
        if view.index % self.interval == 0:
            self.values.append(sharpness(view.gray))

    def finish(self) -> list[ScoreRecord]:
        if not self.values:
            return [error_score(self.info, "no frames")]
        return [ok_score(self.info, math.fsum(self.values) / len(self.values),
                         sampled_frames=len(self.values), minimum=min(self.values))]


def proxy_metrics(fps: float) -> list[FrameMetric]:
    return [FlowDynamicDegree(fps), FlowWarpSmoothness(), SsimSubjectConsistency(),
            HistogramBackgroundConsistency(), SharpnessQuality(fps)]
