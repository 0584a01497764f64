"""VBench dimensions, by VBench's own definitions (Vchitect/VBench, ``vbench/*.py``).

``temporal_flickering`` needs no model and is exact here. The other dimensions apply VBench's
formulas to features from local TorchScript models (see :mod:`models` for the conventions); a
dimension whose models are not given is an open check with a detail naming what is missing.
The formulas are pure functions over per-frame numbers so they can be checked by hand.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ref2va_accept.evidence import ScoreRecord
from ref2va_accept.quality import _models as models
from ref2va_accept.quality._frames import FrameBatch, FrameMetric, FrameView
from ref2va_accept.quality._imageops import U8
from ref2va_accept.quality._provenance import Recorded, made_with
from ref2va_accept.quality._registry import (
    ScorerError,
    ScorerInfo,
    error_score,
    ok_score,
    open_score,
    scorer,
)

__all__ = [
    "MODEL_DIMENSIONS",
    "TemporalFlickering",
    "clamped_cosine",
    "consistency_score",
    "dynamic_interval",
    "dynamic_verdict",
    "flicker_score",
    "i2v_score",
    "top5_flow_magnitude",
    "vbench_metrics",
]

F64 = npt.NDArray[np.float64]

# Which local models each model-based dimension needs, and whether it needs the reference image.
MODEL_DIMENSIONS: dict[str, tuple[tuple[str, ...], bool]] = {
    "subject_consistency": (("dino_vitb16",), False),
    "background_consistency": (("clip_vitb32",), False),
    "motion_smoothness": (("amt_s",), False),
    "dynamic_degree": (("raft",), False),
    "aesthetic_quality": (("clip_vitl14", "laion_aesthetic"), False),
    "imaging_quality": (("musiq_spaq",), False),
    "i2v_subject": (("dino_vitb16",), True),
    "i2v_background": (("dreamsim",), True),
}
# VBench++ I2V weights: 0.4 * max c(image, frame) + 0.3 * mean + 0.3 * min c(consecutive).
I2V_WEIGHTS = (0.4, 0.3, 0.3)


# ---- formulas -------------------------------------------------------------------------------

def flicker_score(maes: Sequence[float]) -> float:
    """(255 - mean over consecutive pairs of the mean absolute pixel difference) / 255."""
    if not maes:
        raise ScorerError("temporal_flickering needs at least 2 frames")
    return (255.0 - math.fsum(maes) / len(maes)) / 255.0


def clamped_cosine(a: F64, b: F64) -> float:
    """VBench's c = max(0, cosine) on L2-normalised features."""
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    denom = max(float(np.linalg.norm(a)), 1e-12) * max(float(np.linalg.norm(b)), 1e-12)
    return max(0.0, float(np.dot(a, b)) / denom)


def consistency_score(to_prev: Sequence[float], to_first: Sequence[float]) -> float:
    """Mean over i >= 1 of (c(f_{i-1}, f_i) + c(f_0, f_i)) / 2 (subject/background)."""
    if not to_prev or len(to_prev) != len(to_first):
        raise ScorerError("consistency needs at least 2 frames")
    return math.fsum((p + f) / 2 for p, f in zip(to_prev, to_first, strict=True)) / len(to_prev)


def i2v_score(to_image: Sequence[float], consecutive: Sequence[float]) -> float:
    if not to_image or not consecutive:
        raise ScorerError("i2v dimensions need at least 2 frames")
    w_max, w_mean, w_min = I2V_WEIGHTS
    return (w_max * max(to_image) + w_mean * math.fsum(consecutive) / len(consecutive)
            + w_min * min(consecutive))


def top5_flow_magnitude(flow: npt.NDArray[Any]) -> float:
    """Mean of the top 5% flow magnitudes of a [2, H, W] flow (VBench ``get_score``)."""
    u, v = np.asarray(flow[0], np.float64), np.asarray(flow[1], np.float64)
    rad = np.sqrt(u * u + v * v).ravel()
    cut = int(rad.size * 0.05)
    if cut == 0:
        return 0.0  # VBench would take the mean of nothing (NaN); a 1-pixel flow is not motion
    top = np.partition(rad, rad.size - cut)[rad.size - cut:]
    return float(np.mean(top))


def dynamic_interval(fps: float) -> int:
    """VBench samples every max(1, round(fps / 8)) frames (every frame at 4 fps and below)."""
    return max(1, round(fps / 8))


def dynamic_verdict(pair_scores: Sequence[float], n_sampled: int, min_side: int) -> bool:
    """VBench ``check_move``: dynamic once round(4 * N / 16) pairs exceed 6 * min(H, W) / 256.

    N is the number of sampled frames; Python's round (half to even) as VBench uses it. The count
    is checked after each pair, so a count threshold of 0 makes any video with a pair dynamic.
    """
    threshold = 6.0 * (min_side / 256.0)
    count_num = round(4 * (n_sampled / 16.0))
    count = 0
    for value in pair_scores:
        if value > threshold:
            count += 1
        if count >= count_num:
            return True
    return False


# ---- the model-free dimension ---------------------------------------------------------------

class TemporalFlickering:
    """All frames, exact: VBench computes the same mean absolute difference in float32."""

    def __init__(self) -> None:
        self.info = scorer("vbench.temporal_flickering")
        self.maes: list[float] = []

    def update(self, view: FrameView) -> None:
        if view.mae_to_prev is not None:
            self.maes.append(view.mae_to_prev)

    def finish(self) -> list[ScoreRecord]:
        if not self.maes:
            return [error_score(self.info, "needs at least 2 frames")]
        return [ok_score(self.info, flicker_score(self.maes), pairs=len(self.maes))]


# ---- model-based dimensions -----------------------------------------------------------------

def _normalized(vec: npt.NDArray[Any]) -> F64:
    v = np.asarray(vec, np.float64).ravel()
    return np.asarray(v / max(float(np.linalg.norm(v)), 1e-12))


# Frames per network call where VBench batches a video's frames (background_consistency encodes
# a whole video at once, aesthetic_quality 32 frames at a time): 8 costs CLIP ViT-B/32 0.58 of
# its batch-1 CPU time on one thread and more buys nothing (docs/benchmarks.md), and the frames
# waiting for their batch stay few (a scorer streams a video; it never holds it whole).
BATCH_FRAMES = 8


class FeatureConsistency:
    """subject_consistency (DINO, frame by frame as VBench runs it) and background_consistency
    (CLIP ViT-B/32, BATCH_FRAMES frames per call: VBench encodes the whole video at once)."""

    def __init__(self, info: ScorerInfo, model: models.LoadedModel,
                 preprocess: Callable[[U8], Any], batch: int = 1) -> None:
        self.info, self.model, self.preprocess = info, model, preprocess
        self.waiting = FrameBatch(batch)
        self.first: F64 | None = None
        self.prev: F64 | None = None
        self.to_prev: list[float] = []
        self.to_first: list[float] = []

    def update(self, view: FrameView) -> None:
        if self.waiting.add(view.index, self.preprocess(view.rgb)):
            self._run()

    def _run(self) -> None:
        for out in self.waiting.run(self.model):
            feat = _normalized(out)
            if self.first is None:
                self.first = feat
            else:
                assert self.prev is not None
                self.to_prev.append(clamped_cosine(self.prev, feat))
                self.to_first.append(clamped_cosine(self.first, feat))
            self.prev = feat

    def finish(self) -> list[ScoreRecord]:
        if self.waiting.inputs:
            self._run()
        if not self.to_prev:
            return [error_score(self.info, "needs at least 2 frames")]
        return [ok_score(self.info, consistency_score(self.to_prev, self.to_first))]


class AestheticQuality:
    """CLIP ViT-L/14 features through the LAION head, BATCH_FRAMES frames per call (VBench: 32)."""

    def __init__(self, info: ScorerInfo, clip: models.LoadedModel,
                 head: models.LoadedModel) -> None:
        self.info, self.clip, self.head = info, clip, head
        self.waiting = FrameBatch(BATCH_FRAMES)
        self.features = FrameBatch(BATCH_FRAMES)
        self.scores: list[float] = []

    def update(self, view: FrameView) -> None:
        if self.waiting.add(view.index, models.clip_input(view.rgb)):
            self._run()

    def _run(self) -> None:
        import torch  # noqa: PLC0415 - only reached when the models were loaded

        first = self.waiting.first
        for i, out in enumerate(self.waiting.run(self.clip)):
            feat = _normalized(out).astype(np.float32)
            self.features.add(first + i, torch.from_numpy(feat[None]))
        self.scores += [float(s.ravel()[0]) for s in self.features.run(self.head)]

    def finish(self) -> list[ScoreRecord]:
        if self.waiting.inputs:
            self._run()
        if not self.scores:
            return [error_score(self.info, "no frames")]
        return [ok_score(self.info, math.fsum(self.scores) / len(self.scores) / 10.0)]


class ImagingQuality:
    def __init__(self, info: ScorerInfo, musiq: models.LoadedModel) -> None:
        self.info, self.musiq = info, musiq
        self.scores: list[float] = []

    def update(self, view: FrameView) -> None:
        self.scores.append(float(self.musiq(models.musiq_input(view.rgb)).ravel()[0]))

    def finish(self) -> list[ScoreRecord]:
        if not self.scores:
            return [error_score(self.info, "no frames")]
        return [ok_score(self.info, math.fsum(self.scores) / len(self.scores) / 100.0)]


class MotionSmoothness:
    """AMT-S predicts each odd frame from its even neighbours; (255 - mean MAE) / 255."""

    def __init__(self, info: ScorerInfo, amt: models.LoadedModel) -> None:
        self.info, self.amt = info, amt
        self.even: U8 | None = None
        self.odd: U8 | None = None
        self.maes: list[float] = []

    def update(self, view: FrameView) -> None:
        if view.index % 2 == 1:
            self.odd = view.rgb
            return
        if self.even is not None and self.odd is not None:
            (in0, pads), (in1, _) = models.amt_input(self.even), models.amt_input(view.rgb)
            mid = models.unpad(self.amt(in0, in1), pads)[0]
            # AMT's tensor2img: scale, clip, truncate to uint8.
            pred = np.clip(np.transpose(mid, (1, 2, 0)) * 255.0, 0, 255).astype(np.uint8)
            diff = np.abs(pred.astype(np.int16) - self.odd.astype(np.int16))
            self.maes.append(float(np.mean(diff, dtype=np.float64)))
        self.even, self.odd = view.rgb, None

    def finish(self) -> list[ScoreRecord]:
        if not self.maes:
            return [error_score(self.info, "needs at least 3 frames")]
        return [ok_score(self.info, (255.0 - math.fsum(self.maes) / len(self.maes)) / 255.0,
                         predicted_frames=len(self.maes))]


class DynamicDegree:
    """RAFT on frames sampled every round(fps/8); 1.0 when the video is dynamic, else 0.0."""

    def __init__(self, info: ScorerInfo, raft: models.LoadedModel, fps: float) -> None:
        self.info, self.raft = info, raft
        self.interval = dynamic_interval(fps)
        self.prev: Any = None
        self.n_sampled = 0
        self.min_side = 0
        self.pair_scores: list[float] = []

    def update(self, view: FrameView) -> None:
        if view.index % self.interval:
            return
        frame, _ = models.raft_input(view.rgb)
        self.n_sampled += 1
        self.min_side = min(view.height, view.width)
        if self.prev is not None:
            # Magnitudes are taken over the padded flow, as VBench does.
            self.pair_scores.append(top5_flow_magnitude(self.raft(self.prev, frame)[0]))
        self.prev = frame

    def finish(self) -> list[ScoreRecord]:
        if not self.n_sampled:
            return [error_score(self.info, "no frames")]
        dynamic = dynamic_verdict(self.pair_scores, self.n_sampled, self.min_side)
        return [ok_score(self.info, 1.0 if dynamic else 0.0, sampled_frames=self.n_sampled,
                         interval=self.interval, pair_scores=list(self.pair_scores))]


class I2VConsistency:
    """i2v_subject (DINO) and i2v_background (DreamSim) against the reference image.

    Every frame, the first included, is compared with the reference; the reference goes through
    VBench++'s PIL transform at its own size (VBench++ crops references to the video's aspect
    ratio when it prepares its data, not in the scorer).
    """

    def __init__(self, info: ScorerInfo, model: models.LoadedModel,
                 preprocess: Callable[[U8], Any], preprocess_image: Callable[[U8], Any],
                 reference: U8) -> None:
        self.info, self.model, self.preprocess = info, model, preprocess
        self.preprocess_image = preprocess_image
        self.reference = reference
        self.image_feat: F64 | None = None
        self.prev: F64 | None = None
        self.to_image: list[float] = []
        self.consecutive: list[float] = []

    def update(self, view: FrameView) -> None:
        if self.image_feat is None:
            self.image_feat = _normalized(self.model(self.preprocess_image(self.reference)))
        feat = _normalized(self.model(self.preprocess(view.rgb)))
        self.to_image.append(clamped_cosine(self.image_feat, feat))
        if self.prev is not None:
            self.consecutive.append(clamped_cosine(self.prev, feat))
        self.prev = feat

    def finish(self) -> list[ScoreRecord]:
        if not self.consecutive:
            return [error_score(self.info, "needs at least 2 frames")]
        return [ok_score(self.info, i2v_score(self.to_image, self.consecutive))]


def _build(dimension: str, loaded: Mapping[str, models.LoadedModel], fps: float,
           reference: U8 | None) -> FrameMetric:
    names, needs_reference = MODEL_DIMENSIONS[dimension]
    return Recorded(_build_metric(dimension, loaded, fps, reference),
                    made_with(dimension, [loaded[n] for n in names], needs_reference))


def _build_metric(dimension: str, loaded: Mapping[str, models.LoadedModel], fps: float,
                  reference: U8 | None) -> FrameMetric:
    info = scorer(f"vbench.{dimension}")
    names, _ = MODEL_DIMENSIONS[dimension]
    info = info.with_weights(tuple(loaded[n].identity for n in names))
    if dimension == "subject_consistency":
        return FeatureConsistency(info, loaded["dino_vitb16"], models.dino_input)
    if dimension == "background_consistency":
        return FeatureConsistency(info, loaded["clip_vitb32"], models.clip_input,
                                  batch=BATCH_FRAMES)
    if dimension == "aesthetic_quality":
        return AestheticQuality(info, loaded["clip_vitl14"], loaded["laion_aesthetic"])
    if dimension == "imaging_quality":
        return ImagingQuality(info, loaded["musiq_spaq"])
    if dimension == "motion_smoothness":
        return MotionSmoothness(info, loaded["amt_s"])
    if dimension == "dynamic_degree":
        return DynamicDegree(info, loaded["raft"], fps)
    assert reference is not None
    if dimension == "i2v_subject":
        return I2VConsistency(info, loaded["dino_vitb16"], models.dino_i2v_input,
                              models.dino_i2v_image, reference)
    return I2VConsistency(info, loaded["dreamsim"], models.dreamsim_input,
                          models.dreamsim_image, reference)


def vbench_metrics(weights: Mapping[str, Path] | None, *, fps: float, reference: U8 | None,
                   pins: Mapping[str, str] | None = None,
                   stand_ins: frozenset[str] = frozenset(), device: str = "cpu"
                   ) -> tuple[list[FrameMetric], list[ScoreRecord]]:
    """The VBench metrics to run, and the dimensions that are open (or broken) and why.

    A weights file whose sha256 differs from its pin in ``pins`` is refused: its dimensions are
    in error, naming both hashes. The files named in ``stand_ins`` are seeded stand-ins: their
    identities (and so every score made with them) say so.
    """
    weights = dict(weights or {})
    pins = dict(pins or {})
    unknown = sorted(set(weights) - set(models.MODEL_NAMES))
    if unknown:
        raise ScorerError(f"unknown weights name(s) {', '.join(unknown)}; "
                          f"expected among {', '.join(models.MODEL_NAMES)}")
    metrics: list[FrameMetric] = [TemporalFlickering()]
    closed: list[ScoreRecord] = []
    loaded: dict[str, models.LoadedModel] = {}
    failed: dict[str, str] = {}
    unusable = None
    if any(n in weights for n in models.MODEL_NAMES):
        try:
            models.prepare_device(device)
        except ScorerError as exc:
            unusable = str(exc)
    for dimension, (names, needs_reference) in MODEL_DIMENSIONS.items():
        info = scorer(f"vbench.{dimension}")
        # A file, or for DreamSim a folder (is_file() kept i2v_background open for good).
        missing = [n for n in names if n not in weights or not Path(weights[n]).exists()]
        if missing:
            what = ", ".join(
                f"{n} (not found: {Path(weights[n]).name})" if n in weights else f"{n} (not given)"
                for n in missing)
            made = [n for n in missing if n in stand_ins]
            hint = (f"; {', '.join(made)} {'is a stand-in' if len(made) == 1 else 'are stand-ins'}"
                    ": `ref2va-accept scorers standins FOLDER` writes the pinned file(s)"
                    if made else "")
            closed.append(open_score(info, f"weights missing: {what}; nothing is downloaded"
                                           + hint))
            continue
        if needs_reference and reference is None:
            closed.append(open_score(info, "needs the reference image (--reference)"))
            continue
        if unusable is not None:  # no model of this dimension could run where it was asked to
            closed.append(error_score(info, unusable))
            continue
        for name in names:
            if name not in loaded and name not in failed:
                try:
                    model = models.load_model(name, Path(weights[name]),
                                              stand_in=name in stand_ins, device=device)
                except ScorerError as exc:
                    failed[name] = str(exc)
                    continue
                pinned = pins.get(name)
                if pinned is not None and model.identity.sha256 != pinned.lower():
                    failed[name] = (f"{name}: {model.identity.name} has sha256 "
                                    f"{model.identity.sha256[:12]}..., the campaign pins "
                                    f"{pinned[:12]}...; not scored with other weights")
                else:
                    loaded[name] = model
        broken = [failed[n] for n in names if n in failed]
        if broken:
            closed.append(error_score(info, "; ".join(broken)))
            continue
        try:
            metrics.append(_build(dimension, loaded, fps, reference))
        except ScorerError as exc:
            closed.append(error_score(info, str(exc)))
    return metrics, closed
