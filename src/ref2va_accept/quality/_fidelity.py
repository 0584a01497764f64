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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ref2va_accept.media import iter_video_frames
from ref2va_accept.quality import _imageops as imageops
from ref2va_accept.quality._imageops import U8
from ref2va_accept.quality._registry import Score, ScorerError, json_number, ok_score, scorer

__all__ = ["FidelityReport", "compare_frames", "compare_videos"]


@dataclass(frozen=True)
class FidelityReport:
    frames: int
    mse_per_frame: tuple[float, ...]
    psnr_per_frame: tuple[float, ...]  # inf where the frames are identical
    ssim_per_frame: tuple[float, ...]
    psnr_db: float  # from the mean MSE; inf only when all frames are identical
    psnr_min_db: float
    ssim_mean: float
    ssim_min: float
    identical_frames: int

    @property
    def all_identical(self) -> bool:
        return self.identical_frames == self.frames

    def to_scores(self) -> list[Score]:
        return [
            ok_score(scorer("fidelity.psnr"), self.psnr_db,
                     detail="dB from the mean MSE over frames; inf when all frames are identical",
                     minimum=self.psnr_min_db, identical_frames=self.identical_frames,
                     all_identical=self.all_identical),
            ok_score(scorer("fidelity.ssim"), self.ssim_mean, minimum=self.ssim_min),
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "frames": self.frames, "psnr_db": json_number(self.psnr_db),
            "psnr_min_db": json_number(self.psnr_min_db), "ssim_mean": self.ssim_mean,
            "ssim_min": self.ssim_min, "identical_frames": self.identical_frames,
            "all_identical": self.all_identical,
            "psnr_per_frame": [json_number(v) for v in self.psnr_per_frame],
            "ssim_per_frame": list(self.ssim_per_frame),
        }


def compare_frames(candidate: Iterable[U8], baseline: Iterable[U8]) -> FidelityReport:
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
    psnrs = tuple(imageops.psnr_from_mse(m) for m in mses)
    return FidelityReport(
        frames=len(mses), mse_per_frame=tuple(mses), psnr_per_frame=psnrs,
        ssim_per_frame=tuple(ssims), psnr_db=imageops.psnr_from_mse(math.fsum(mses) / len(mses)),
        psnr_min_db=min(psnrs), ssim_mean=math.fsum(ssims) / len(ssims), ssim_min=min(ssims),
        identical_frames=sum(m == 0.0 for m in mses))


def compare_videos(candidate: str | os.PathLike[str],
                   baseline: str | os.PathLike[str]) -> FidelityReport:
    """Decode both MP4s in lockstep; never more than one frame of each is held."""
    try:
        return compare_frames(iter_video_frames(candidate), iter_video_frames(baseline))
    except ScorerError as exc:
        raise ScorerError(f"{Path(candidate).name} vs {Path(baseline).name}: {exc}") from None
