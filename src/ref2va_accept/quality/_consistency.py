"""Reference and temporal consistency without weights.

Against the reference image (resized to the frame size): colour-histogram correlation and dHash
similarity for every frame, and SSIM/PSNR of the first frame (meaningful where the reference is
meant to be the first frame). Temporal: frozen frames, scene cuts, consecutive-frame SSIM.
"""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

from ref2va_accept.core import MediaError
from ref2va_accept.evidence import ScoreRecord
from ref2va_accept.quality import _imageops as imageops
from ref2va_accept.quality._frames import FrameMetric, FrameView
from ref2va_accept.quality._imageops import F32, U8
from ref2va_accept.quality._registry import error_score, ok_score, scorer

__all__ = [
    "FROZEN_MAE",
    "SCENE_CUT_CORRELATION",
    "ReferenceConsistency",
    "TemporalConsistency",
    "consistency_metrics",
    "load_reference_image",
]

# A pair whose mean absolute difference is at most half a code value is a repeated frame: H.264
# noise on a truly repeated frame stays below that, while any visible motion is well above it.
FROZEN_MAE = 0.5
# Consecutive frames of one shot keep their colour distribution (correlation near 1); a cut to a
# new shot drops it far lower.
SCENE_CUT_CORRELATION = 0.5


def load_reference_image(path: Path) -> U8:
    """The reference image as VBench++ reads it (``Image.open`` in its i2v dimensions): PIL, with
    no EXIF orientation applied, so an EXIF-rotated JPEG keeps its stored size (OpenCV's imread,
    used before, turned a 1344x768 one into 768x1344). Converted to RGB (VBench++ would feed a
    grey or RGBA image as is, which its transforms do not take)."""
    path = Path(path)
    if not path.is_file():
        raise MediaError(f"{path.name}: reference image not found")
    try:
        with Image.open(path) as image:
            rgb = np.asarray(image.convert("RGB"), np.uint8)
    except (UnidentifiedImageError, OSError) as exc:
        raise MediaError(f"{path.name}: cannot read as an image (expected PNG or JPEG): "
                         f"{' '.join(str(exc).split())}") from None
    return np.ascontiguousarray(rgb)


class ReferenceConsistency:
    def __init__(self, reference: U8) -> None:
        self.reference = reference
        self.ref_full: U8 | None = None
        self.ref_hist: F32 | None = None
        self.ref_hash = 0
        self.hist: list[float] = []
        self.hash_dist: list[int] = []
        self.first_ssim: float | None = None
        self.first_psnr: float | None = None

    def _prepare(self, view: FrameView) -> None:
        h, w = view.height, view.width
        rh, rw = self.reference.shape[:2]
        shrink = rh * rw > h * w
        ref = np.asarray(cv2.resize(self.reference, (w, h), interpolation=(
            cv2.INTER_AREA if shrink else cv2.INTER_CUBIC)), np.uint8)
        small = imageops.resize_short_side(ref, imageops.ANALYSIS_SHORT_SIDE)
        self.ref_full, self.ref_hist = ref, imageops.rgb_histogram(small)
        self.ref_hash = imageops.dhash(small)
        self.first_ssim = imageops.ssim(imageops.luma(ref), imageops.luma(view.rgb))
        self.first_psnr = imageops.psnr_from_mse(imageops.mse(ref, view.rgb))

    def update(self, view: FrameView) -> None:
        if self.ref_hist is None:
            self._prepare(view)
        assert self.ref_hist is not None
        self.hist.append(imageops.hist_correlation(self.ref_hist, view.histogram))
        self.hash_dist.append(imageops.hamming(self.ref_hash, imageops.dhash(view.small_rgb)))

    def finish(self) -> list[ScoreRecord]:
        infos = [scorer(f"consistency.reference.{n}")
                 for n in ("histogram", "dhash", "first_frame_ssim", "first_frame_psnr")]
        if not self.hist or self.first_ssim is None or self.first_psnr is None:
            return [error_score(info, "no frames") for info in infos]
        n = len(self.hist)
        return [
            ok_score(infos[0], math.fsum(self.hist) / n, minimum=min(self.hist),
                     first=self.hist[0]),
            ok_score(infos[1], 1.0 - sum(self.hash_dist) / (64.0 * n),
                     detail="1 - mean dHash Hamming distance / 64",
                     max_distance=max(self.hash_dist), first_distance=self.hash_dist[0]),
            ok_score(infos[2], self.first_ssim),
            ok_score(infos[3], self.first_psnr, detail="dB; inf when identical"),
        ]


class TemporalConsistency:
    def __init__(self) -> None:
        self.maes: list[float] = []
        self.ssims: list[float] = []
        self.cuts: list[int] = []

    def update(self, view: FrameView) -> None:
        if view.prev is None:
            return
        assert view.mae_to_prev is not None and view.ssim_to_prev is not None
        assert view.hist_corr_to_prev is not None
        self.maes.append(view.mae_to_prev)
        self.ssims.append(view.ssim_to_prev)
        if view.hist_corr_to_prev < SCENE_CUT_CORRELATION:
            self.cuts.append(view.index)

    def finish(self) -> list[ScoreRecord]:
        frozen, cuts, cssim = (scorer(f"consistency.temporal.{n}")
                               for n in ("frozen_frames", "scene_cuts", "consecutive_ssim"))
        if not self.maes:
            return [error_score(info, "needs at least 2 frames") for info in (frozen, cuts, cssim)]
        flags = [m <= FROZEN_MAE for m in self.maes]
        longest = run = 0
        for flag in flags:
            run = run + 1 if flag else 0
            longest = max(longest, run)
        worst = int(np.argmin(self.ssims))
        return [
            ok_score(frozen, float(sum(flags)), detail=f"pairs with MAE <= {FROZEN_MAE}",
                     identical=sum(m == 0.0 for m in self.maes), longest_run=longest,
                     pairs=len(flags)),
            ok_score(cuts, float(len(self.cuts)),
                     detail=f"histogram correlation < {SCENE_CUT_CORRELATION}",
                     at_frames=self.cuts[:50]),
            ok_score(cssim, math.fsum(self.ssims) / len(self.ssims), minimum=self.ssims[worst],
                     minimum_at_frame=worst + 1),
        ]


def consistency_metrics(reference: U8 | None) -> list[FrameMetric]:
    metrics: list[FrameMetric] = [TemporalConsistency()]
    if reference is not None:
        metrics.insert(0, ReferenceConsistency(reference))
    return metrics
