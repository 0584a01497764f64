"""Scorer identities: every number the lossy gate reports names the scorer that produced it.

A score is only comparable with another score from the same scorer id, version and weights; the
evidence therefore carries the id, the version, the kind and the sha256 of every weights file.
``kind`` keeps proxies apart from VBench: a proxy shares a dimension name's spirit, never its
label, and is gated only against B0 scored by the same proxy.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ref2va_accept.core import Ref2VAError, tree_sha256
from ref2va_accept.evidence import ScoreKind, ScoreStatus
from ref2va_accept.quality._known_standins import stand_in_name

__all__ = [
    "SCORERS",
    "Kind",
    "Score",
    "ScorerError",
    "ScorerInfo",
    "WeightIdentity",
    "error_score",
    "json_number",
    "ok_score",
    "open_score",
    "scorer",
    "weight_identity",
]

# The evidence's closed sets, which the records that carry a score's kind and status name.
Kind = ScoreKind


class ScorerError(Ref2VAError):
    """A scorer cannot run: bad weights file, frames it cannot score, inconsistent inputs."""


@dataclass(frozen=True)
class WeightIdentity:
    name: str  # the file's basename: evidence must not leak the host's directory layout
    sha256: str
    stand_in: bool = False  # seeded random weights in the official format, not the real model
    # The campaign marks it `stand_in: true`; a stand-in recognised by its bytes alone is not.
    declared: bool = False

    def to_dict(self) -> dict[str, Any]:
        record: dict[str, Any] = {"name": self.name, "sha256": self.sha256}
        if self.stand_in:
            record["stand_in"] = True
            record["declared"] = self.declared
        return record


@dataclass(frozen=True)
class ScorerInfo:
    id: str
    version: str
    kind: Kind
    dimension: str
    weights: tuple[WeightIdentity, ...] = ()

    def with_weights(self, weights: tuple[WeightIdentity, ...]) -> ScorerInfo:
        return ScorerInfo(self.id, self.version, self.kind, self.dimension, weights)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "version": self.version, "kind": self.kind,
                "dimension": self.dimension, "weights": [w.to_dict() for w in self.weights]}


def json_number(value: float | None) -> float | str | None:
    """JSON has no infinity or NaN; reports spell them out rather than emit invalid JSON."""
    if value is None or math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


@dataclass(frozen=True)
class Score:
    dimension: str
    scorer: ScorerInfo
    value: float | None
    status: ScoreStatus
    detail: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> Kind:
        return self.scorer.kind

    def to_dict(self) -> dict[str, Any]:
        # "kind" sits at top level so that no report can show a proxy under a VBench heading.
        return {"dimension": self.dimension, "kind": self.scorer.kind, "scorer": self.scorer.id,
                "version": self.scorer.version,
                "weights": [w.to_dict() for w in self.scorer.weights],
                "value": json_number(self.value), "status": self.status, "detail": self.detail,
                "extra": {k: _jsonable(v) for k, v in self.extra.items()}}


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        return json_number(value)
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


def weight_identity(path: Path) -> WeightIdentity:
    """The file's basename and sha256; hashed once per (file, size, mtime) in a process, since
    a lossy track loads the same gigabyte-sized weights for every video it scores."""
    resolved = Path(path).resolve()
    if resolved.is_dir():  # DreamSim's checkpoint folder: its manifest, never cached
        sha = tree_sha256(resolved)
    else:
        stat = resolved.stat()
        sha = _sha256(resolved, stat.st_size, stat.st_mtime_ns)
    # A stand-in's bytes are one wherever they are and whatever the campaign says of them.
    return WeightIdentity(name=resolved.name, sha256=sha,
                          stand_in=stand_in_name(sha, resolved) is not None)


@functools.lru_cache(maxsize=32)
def _sha256(path: Path, size: int, mtime_ns: int) -> str:
    return tree_sha256(path)


def ok_score(info: ScorerInfo, value: float, detail: str = "",
             **extra: Any) -> Score:
    return Score(info.dimension, info, float(value), "ok", detail, extra)


def open_score(info: ScorerInfo, detail: str, **extra: Any) -> Score:
    """An open check: never a value, never a pass."""
    return Score(info.dimension, info, None, "open", detail, extra)


def error_score(info: ScorerInfo, detail: str, **extra: Any) -> Score:
    return Score(info.dimension, info, None, "error", detail, extra)
