"""Quality metrics of the lossy gate: VBench dimensions, labelled proxies, fidelity to B0,
reference and temporal consistency, and the relative error between two arms.

Every score names its scorer (id, version, kind, weights sha256): see :mod:`registry`.

Its names load when first used (core.load_name): campaign code that reads the scorer
weights' names does not load OpenCV and scipy through this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ref2va_accept.core import load_name

if TYPE_CHECKING:
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

_WHERE = {
    "FidelityReport": "fidelity",
    "RelativeError": "scoring",
    "SCORERS": "registry",
    "Score": "registry",
    "ScorerError": "registry",
    "ScorerInfo": "registry",
    "WeightIdentity": "registry",
    "aggregate_relative_error": "scoring",
    "check_comparable": "scoring",
    "compare_frames": "fidelity",
    "compare_videos": "fidelity",
    "relative_errors": "scoring",
    "score_frames": "pipeline",
    "score_video": "pipeline",
}

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


def __getattr__(name: str) -> object:
    return load_name(__name__, _WHERE, name)
