"""Image operations shared by the metric families, all on RGB uint8 (H, W, 3) frames.

SSIM is Wang et al. (2004): 11x11 Gaussian window, sigma 1.5, K1 = 0.01, K2 = 0.03, L = 255,
on BT.601 luma in float64, averaged over the "valid" region (the window fully inside the image),
as the reference MATLAB implementation does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from ref2va_accept.quality._registry import ScorerError

__all__ = [
    "ANALYSIS_SHORT_SIDE",
    "SsimStats",
    "dhash",
    "hamming",
    "hist_correlation",
    "luma",
    "mae",
    "mse",
    "psnr_from_mse",
    "resize_short_side",
    "rgb_histogram",
    "ssim",
    "ssim_pair",
    "ssim_stats",
]

U8 = npt.NDArray[np.uint8]
F64 = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]

# Proxies work on one downscaled copy (1344x768 -> 224x128): what they measure (structure, colour,
# coarse motion) survives the resize, and the flow they use runs at this size anyway. A 448x256
# copy cost 0.55 s more CPU per 15 s video (area resize by 3, midpoint warps four times the pixels)
# and changed no gate decision on the reference engine, whose frames are smaller than this.
ANALYSIS_SHORT_SIDE = 128
_SSIM_WIN, _SSIM_SIGMA = 11, 1.5
_C1, _C2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
_HIST_BINS = 8


def resize_short_side(frame: U8, short_side: int) -> U8:
    """Area-downscale so the short side is ``short_side``; never upscales.

    When the size shrinks by a whole factor (1344x768 -> 224x128 is 6), its factors of two go
    first as exact halvings (OpenCV's vectorised 2x2 path), then one area resize by the rest: the
    same box average as one area resize by 6 up to the rounding of the intermediate uint8 image,
    in half the time.
    """
    h, w = frame.shape[:2]
    if min(h, w) <= short_side:
        return frame
    scale = short_side / min(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    factor = h // size[1]
    if (size[0] * factor, size[1] * factor) == (w, h):
        while factor % 2 == 0:
            h, w, factor = h // 2, w // 2, factor // 2
            frame = np.asarray(cv2.resize(frame, (w, h), interpolation=cv2.INTER_AREA), np.uint8)
    if (w, h) == size:
        return frame
    return np.asarray(cv2.resize(frame, size, interpolation=cv2.INTER_AREA), np.uint8)


def luma(frame: U8) -> F64:
    """BT.601 luma in float64 (the Y of Wang et al.'s SSIM on colour images)."""
    rgb = frame.astype(np.float64)
    return np.asarray(0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2])


def mae(a: U8, b: U8) -> float:
    """Mean absolute difference over all pixels and channels, exact in float64.

    OpenCV's L1 norm of two uint8 arrays sums the exact |a - b| as integers (exact below 2**53),
    so this equals VBench's float mean without its float32 rounding, at memory speed.
    """
    if a.shape != b.shape:
        raise ScorerError(f"frame sizes differ: {a.shape} vs {b.shape}")
    return float(cv2.norm(a, b, cv2.NORM_L1)) / float(a.size)


def mse(a: U8 | F64, b: U8 | F64) -> float:
    if a.shape != b.shape:
        raise ScorerError(f"frame sizes differ: {a.shape} vs {b.shape}")
    diff = a.astype(np.float64) - b.astype(np.float64)
    flat = diff.ravel()
    return float(np.dot(flat, flat) / flat.size)


def psnr_from_mse(value: float, peak: float = 255.0) -> float:
    return math.inf if value == 0 else 10.0 * math.log10(peak * peak / value)


def _blur(x: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.floating[Any]]:
    return np.asarray(cv2.GaussianBlur(x, (_SSIM_WIN, _SSIM_WIN), _SSIM_SIGMA,
                                       borderType=cv2.BORDER_REFLECT_101))


@dataclass(frozen=True)
class SsimStats:
    """One image's local statistics, computed once and reused for every pair it is in."""

    image: npt.NDArray[np.floating[Any]]
    mu: npt.NDArray[np.floating[Any]]
    mu_sq: npt.NDArray[np.floating[Any]]
    var: npt.NDArray[np.floating[Any]]


def ssim_stats(image: npt.NDArray[np.floating[Any]]) -> SsimStats:
    if min(image.shape[:2]) < _SSIM_WIN:
        raise ScorerError(f"SSIM needs images of at least {_SSIM_WIN}x{_SSIM_WIN}, "
                          f"got {image.shape[1]}x{image.shape[0]}")
    mu = _blur(image)
    mu_sq = mu * mu
    return SsimStats(image, mu, mu_sq, _blur(image * image) - mu_sq)


def ssim_pair(a: SsimStats, b: SsimStats) -> float:
    if a.image.shape != b.image.shape:
        raise ScorerError(f"image sizes differ: {a.image.shape} vs {b.image.shape}")
    # The same expression order for a == b makes SSIM(x, x) exactly 1.0.
    mu_ab = a.mu * b.mu
    cov = _blur(a.image * b.image) - mu_ab
    num = (2 * mu_ab + _C1) * (2 * cov + _C2)
    den = (a.mu_sq + b.mu_sq + _C1) * (a.var + b.var + _C2)
    m = _SSIM_WIN // 2
    return float(np.mean((num / den)[m:-m, m:-m], dtype=np.float64))


def ssim(a: F64, b: F64) -> float:
    """SSIM of two single-channel images in [0, 255], in their dtype (float64 for fidelity)."""
    if a.shape != b.shape:
        raise ScorerError(f"image sizes differ: {a.shape} vs {b.shape}")
    return ssim_pair(ssim_stats(a), ssim_stats(b))


def rgb_histogram(frame: U8) -> F32:
    """A normalised 8x8x8 RGB histogram: coarse enough to ignore noise, fine enough for colour."""
    hist = cv2.calcHist([frame], [0, 1, 2], None, [_HIST_BINS] * 3, [0, 256] * 3)
    # A column vector: compareHist would read an (8, 8, 8) array as an 8-channel 8x8 image.
    hist = np.asarray(hist, np.float32).reshape(-1, 1)
    return np.asarray(hist / max(float(hist.sum()), 1.0), np.float32)


def hist_correlation(a: F32, b: F32) -> float:
    """Pearson correlation of two histograms; 1.0 for two constant-colour frames of one colour."""
    value = float(cv2.compareHist(a, b, cv2.HISTCMP_CORREL))
    return value if math.isfinite(value) else 0.0


def dhash(frame: U8, size: int = 8) -> int:
    """Difference hash: 64 bits of horizontal brightness gradients on a 9x8 thumbnail."""
    gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
    small = cv2.resize(gray, (size + 1, size), interpolation=cv2.INTER_AREA)
    bits = (small[:, 1:] > small[:, :-1]).flatten()
    return int(sum(1 << i for i, bit in enumerate(bits) if bit))


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()
