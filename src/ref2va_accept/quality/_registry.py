"""Scorer identities: every number the lossy gate reports names the scorer that produced it.

A score is only comparable with another score from the same scorer id, version and weights; the
evidence therefore carries the id, the version, the kind and the sha256 of every weights file.
``kind`` keeps proxies apart from VBench: a proxy shares a dimension name's spirit, never its
label, and is gated only against B0 scored by the same proxy.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ref2va_accept.core import Ref2VAError, tree_sha256
from ref2va_accept.evidence import ScoreKind, ScoreRecord, ScoreStatus, WeightRecord, json_number
from ref2va_accept.quality._known_standins import stand_in_name

__all__ = [
    "SCORERS",
    "Kind",
    "ScorerError",
    "ScorerInfo",
    "error_score",
    "ok_score",
    "open_score",
    "scorer",
    "weight_identity",
    "with_extra",
]

# The evidence's closed sets, which the records that carry a score's kind and status name.
Kind = ScoreKind


class ScorerError(Ref2VAError):
    """A scorer cannot run: bad weights file, frames it cannot score, inconsistent inputs."""


@dataclass(frozen=True)
class ScorerInfo:
    id: str
    version: str
    kind: Kind
    dimension: str
    weights: tuple[WeightRecord, ...] = ()

    def with_weights(self, weights: tuple[WeightRecord, ...]) -> ScorerInfo:
        return ScorerInfo(self.id, self.version, self.kind, self.dimension, weights)


def _jsonable(value: Any) -> Any:
    """A score's extra figures as JSON holds them: non-finite floats spelt out, tuples as lists."""
    if isinstance(value, float):
        return json_number(float(value))  # numpy's float64 too
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _info(id_: str, kind: Kind, dimension: str, version: str = "1") -> ScorerInfo:
    return ScorerInfo(id=id_, version=version, kind=kind, dimension=dimension)


# Version strings change whenever a scorer's numbers could change: scores from two versions are
# never compared. Version 2 of the downscaled scorers: one 128-short-side analysis copy (was 256
# for the histogram, hash and midpoint warp). Version 2 of the model-based VBench dimensions:
# resized frames stay float as in VBench (no uint8 rounding); the i2v ones use VBench++'s own
# transforms and its PIL path for the reference image.
SCORERS: dict[str, ScorerInfo] = {info.id: info for info in (
    _info("vbench.temporal_flickering", "vbench", "temporal_flickering"),
    _info("vbench.subject_consistency", "vbench", "subject_consistency", "2"),
    _info("vbench.background_consistency", "vbench", "background_consistency", "2"),
    _info("vbench.motion_smoothness", "vbench", "motion_smoothness"),
    _info("vbench.dynamic_degree", "vbench", "dynamic_degree"),
    _info("vbench.aesthetic_quality", "vbench", "aesthetic_quality", "2"),
    _info("vbench.imaging_quality", "vbench", "imaging_quality", "2"),
    _info("vbench.i2v_subject", "vbench", "i2v_subject", "2"),
    _info("vbench.i2v_background", "vbench", "i2v_background", "2"),
    _info("proxy.dynamic_degree.dis_flow", "proxy", "dynamic_degree", "2"),
    _info("proxy.motion_smoothness.flow_warp", "proxy", "motion_smoothness", "2"),
    _info("proxy.subject_consistency.ssim", "proxy", "subject_consistency", "2"),
    _info("proxy.background_consistency.histogram", "proxy", "background_consistency", "2"),
    _info("proxy.imaging_quality.sharpness", "proxy", "imaging_quality"),
    _info("fidelity.psnr", "fidelity", "psnr"),
    _info("fidelity.ssim", "fidelity", "ssim"),
    _info("consistency.reference.histogram", "consistency", "reference_histogram", "2"),
    _info("consistency.reference.dhash", "consistency", "reference_dhash", "2"),
    _info("consistency.reference.first_frame_ssim", "consistency", "reference_first_frame_ssim"),
    _info("consistency.reference.first_frame_psnr", "consistency", "reference_first_frame_psnr"),
    _info("consistency.temporal.frozen_frames", "consistency", "frozen_frames"),
    _info("consistency.temporal.scene_cuts", "consistency", "scene_cuts", "2"),
    _info("consistency.temporal.consecutive_ssim", "consistency", "consecutive_ssim", "2"),
)}


def scorer(scorer_id: str) -> ScorerInfo:
    try:
        return SCORERS[scorer_id]
    except KeyError:
        raise ScorerError(f"unknown scorer id {scorer_id!r}; known: {sorted(SCORERS)}") from None


def weight_identity(path: Path) -> WeightRecord:
    """The file's basename and sha256; hashed once per (file, size, mtime) in a process, since
    a lossy track loads the same gigabyte-sized weights for every video it scores."""
    resolved = Path(path).resolve()
    if resolved.is_dir():  # DreamSim's checkpoint folder: its manifest, never cached
        sha = tree_sha256(resolved)
    else:
        stat = resolved.stat()
        sha = _sha256(resolved, stat.st_size, stat.st_mtime_ns)
    # A stand-in's bytes are one wherever they are and whatever the campaign says of them.
    return WeightRecord.of(resolved.name, sha, stand_in=stand_in_name(sha, resolved) is not None)


@functools.lru_cache(maxsize=32)
def _sha256(path: Path, size: int, mtime_ns: int) -> str:
    return tree_sha256(path)


def _score(info: ScorerInfo, value: float | None, status: ScoreStatus, detail: str,
           extra: Mapping[str, Any]) -> ScoreRecord:
    return ScoreRecord(dimension=info.dimension, kind=info.kind, scorer=info.id,
                       version=info.version, weights=list(info.weights), value=value,
                       status=status, detail=detail, extra=_jsonable(extra))


def ok_score(info: ScorerInfo, value: float, detail: str = "",
             **extra: Any) -> ScoreRecord:
    return _score(info, float(value), "ok", detail, extra)


def open_score(info: ScorerInfo, detail: str, **extra: Any) -> ScoreRecord:
    """An open check: never a value, never a pass."""
    return _score(info, None, "open", detail, extra)


def error_score(info: ScorerInfo, detail: str, **extra: Any) -> ScoreRecord:
    return _score(info, None, "error", detail, extra)


def with_extra(score: ScoreRecord, **extra: Any) -> ScoreRecord:
    """``score`` with more of its scorer's figures (how its frames were decoded, what made it)."""
    return score.model_copy(update={"extra": {**score.extra, **_jsonable(extra)}})
