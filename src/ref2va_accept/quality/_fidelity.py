"""Fidelity of a candidate to B0 (same seed): per-frame PSNR and SSIM, streamed in lockstep.

PSNR is float64 over RGB. An identical frame has infinite PSNR; the video's PSNR is computed from
the mean MSE over frames (one number that stays finite unless every frame is identical, and then
is ``inf`` with ``all_identical`` set), never as the mean of per-frame dB values, which one
identical frame would make infinite. SSIM is :func:`imageops.ssim` on full-resolution luma.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path

from ref2va_accept.evidence import FidelityFigures, JsonNumber
from ref2va_accept.media import iter_video_frames
from ref2va_accept.quality import _imageops as imageops
from ref2va_accept.quality._imageops import U8
from ref2va_accept.quality._registry import ScorerError

__all__ = ["compare_frames", "compare_videos"]


def compare_frames(candidate: Iterable[U8], baseline: Iterable[U8]) -> FidelityFigures:
    mses: list[float] = []
    ssims: list[float] = []
    cand_iter, base_iter = iter(candidate), iter(baseline)
    while True:
        cand, base = next(cand_iter, None), next(base_iter, None)
        if cand is None and base is None:
            break
        if cand is None or base is None:
            longer = "baseline" if cand is None else "candidate"
            raise ScorerError(f"frame counts differ: the {longer} has more than {len(mses)} "
                              "frames, the other exactly that many; fidelity needs equal counts")
        if cand.shape != base.shape:
            raise ScorerError(f"frame {len(mses)}: candidate is {cand.shape}, "
                              f"baseline is {base.shape}")
        mses.append(imageops.mse(cand, base))
        ssims.append(imageops.ssim(imageops.luma(cand), imageops.luma(base)))
    if not mses:
        raise ScorerError("no frames to compare")
    psnrs: list[JsonNumber] = [imageops.psnr_from_mse(m) for m in mses]
    identical = sum(m == 0.0 for m in mses)
    return FidelityFigures(
        frames=len(mses), psnr_db=imageops.psnr_from_mse(math.fsum(mses) / len(mses)),
        psnr_min_db=min(psnrs), ssim_mean=math.fsum(ssims) / len(ssims), ssim_min=min(ssims),
        identical_frames=identical, all_identical=identical == len(mses),
        psnr_per_frame=psnrs, ssim_per_frame=ssims)


def compare_videos(candidate: str | os.PathLike[str],
                   baseline: str | os.PathLike[str]) -> FidelityFigures:
    """Decode both MP4s in lockstep; never more than one frame of each is held."""
    try:
        return compare_frames(iter_video_frames(candidate), iter_video_frames(baseline))
    except ScorerError as exc:
        raise ScorerError(f"{Path(candidate).name} vs {Path(baseline).name}: {exc}") from None
