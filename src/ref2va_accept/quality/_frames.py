"""One decoded frame, seen by every metric in the single streaming pass.

Each metric needs a different view of the same frame (full RGB for flicker, a downscaled copy for
the proxies, a histogram, a gray flow input). A view computes each on first use and caches it, so
two metrics that need the same thing pay once; the pass keeps only the current and previous views,
so memory stays at two frames plus what each metric keeps by design (a batched network keeps the
preprocessed frames of one batch: FrameBatch).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Protocol

import cv2
import numpy as np

from ref2va_accept.evidence import ScoreRecord
from ref2va_accept.quality import _imageops as imageops
from ref2va_accept.quality._imageops import F32, U8
from ref2va_accept.quality._registry import ScorerError

__all__ = ["Batched", "FrameBatch", "FrameMetric", "FrameView", "FramesFailed", "failed_on"]


class FramesFailed(Exception):
    """A model failed on the frames its message names (a batch: "frames 8-15: ValueError: ..."):
    that dimension is in error, the others go on."""


def failed_on(frames: str, exc: BaseException) -> str:
    """What a dimension's error says when a metric failed on ``frames`` ("frame 12",
    "frames 8-15"): the exception's type and its message on one line."""
    return f"{frames}: {type(exc).__name__}: {' '.join(str(exc).split())}"


class FrameView:
    def __init__(self, index: int, rgb: U8, prev: FrameView | None) -> None:
        if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
            raise ScorerError(f"frame {index}: expected RGB uint8 (H, W, 3), "
                              f"got {rgb.dtype} {rgb.shape}")
        if prev is not None and prev.rgb.shape != rgb.shape:
            raise ScorerError(f"frame {index}: size {rgb.shape[1]}x{rgb.shape[0]} differs from "
                              f"frame {prev.index}: {prev.rgb.shape[1]}x{prev.rgb.shape[0]}")
        self.index: int = index
        self.rgb: U8 = rgb
        self.prev: FrameView | None = prev
        if prev is not None:
            prev.prev = None  # keep two frames alive, not the whole video

    @property
    def height(self) -> int:
        return int(self.rgb.shape[0])

    @property
    def width(self) -> int:
        return int(self.rgb.shape[1])

    @cached_property
    def gray(self) -> U8:
        return np.asarray(cv2.cvtColor(self.rgb, cv2.COLOR_RGB2GRAY), np.uint8)

    @cached_property
    def small_rgb(self) -> U8:
        return imageops.resize_short_side(self.rgb, imageops.ANALYSIS_SHORT_SIDE)

    @cached_property
    def small_ssim(self) -> imageops.SsimStats:
        # Float32 luma at the analysis resolution: the proxies compare these numbers only with
        # themselves (B0 under the same proxy) and structure survives the resize; fidelity SSIM
        # stays float64 at full resolution.
        return imageops.ssim_stats(self.small_gray.astype(np.float32))

    @cached_property
    def small_gray(self) -> U8:
        return np.asarray(cv2.cvtColor(self.small_rgb, cv2.COLOR_RGB2GRAY), np.uint8)

    @cached_property
    def histogram(self) -> F32:
        return imageops.rgb_histogram(self.small_rgb)

    @cached_property
    def mae_to_prev(self) -> float | None:
        return None if self.prev is None else imageops.mae(self.prev.rgb, self.rgb)

    @cached_property
    def ssim_to_prev(self) -> float | None:
        return None if self.prev is None else imageops.ssim_pair(self.prev.small_ssim,
                                                                   self.small_ssim)

    @cached_property
    def hist_corr_to_prev(self) -> float | None:
        if self.prev is None:
            return None
        return imageops.hist_correlation(self.prev.histogram, self.histogram)


class FrameMetric(Protocol):
    """A metric fed once per frame, in order, that reports its scores at the end."""

    def update(self, view: FrameView) -> None: ...

    def finish(self) -> list[ScoreRecord]: ...


class Batched(Protocol):
    """A network that runs several frames in one call (models.LoadedModel)."""

    def each(self, inputs: list[Any]) -> list[F32]: ...


class FrameBatch:
    """Preprocessed frames waiting for one network call, from frame ``first`` on."""

    def __init__(self, size: int) -> None:
        self.size, self.first = size, 0
        self.inputs: list[Any] = []

    def add(self, index: int, x: Any) -> bool:
        """Keep ``x``; True once the batch is full."""
        if not self.inputs:
            self.first = index
        self.inputs.append(x)
        return len(self.inputs) >= self.size

    def run(self, model: Batched) -> list[F32]:
        """Each kept frame's output, from one call of ``model``; the batch is empty after it. A
        model's own failure is FramesFailed naming the frames (ScorerError goes through)."""
        inputs, self.inputs = self.inputs, []
        try:
            return model.each(inputs)
        except ScorerError:
            raise
        except Exception as exc:
            last = self.first + len(inputs) - 1
            frames = f"frame {last}" if len(inputs) == 1 else f"frames {self.first}-{last}"
            raise FramesFailed(failed_on(frames, exc)) from exc
