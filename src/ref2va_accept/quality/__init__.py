"""Quality metrics of the lossy gate: VBench dimensions, labelled proxies, fidelity to B0,
reference and temporal consistency, and the relative error between two arms.

Every score names its scorer (id, version, kind, weights sha256): see :mod:`registry`.
"""

from __future__ import annotations

from ref2va_accept.quality.fidelity import FidelityReport, compare_frames, compare_videos
from ref2va_accept.quality.pipeline import score_frames, score_video
from ref2va_accept.quality.registry import (
    SCORERS,
    Score,
    ScorerError,
    ScorerInfo,
    WeightIdentity,
)
from ref2va_accept.quality.scoring import (
    RelativeError,
    aggregate_relative_error,
    check_comparable,
    relative_errors,
)

__all__ = [
    "SCORERS",
    "FidelityReport",
    "RelativeError",
    "Score",
    "ScorerError",
    "ScorerInfo",
    "WeightIdentity",
    "aggregate_relative_error",
    "check_comparable",
    "compare_frames",
    "compare_videos",
    "relative_errors",
    "score_frames",
    "score_video",
]
