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
    from ref2va_accept.quality._audio import (
        audio_stats,
        compare_audio,
        compare_audio_files,
        decode_audio,
    )
    from ref2va_accept.quality._fidelity import compare_frames, compare_videos
    from ref2va_accept.quality._known_standins import stand_in_name
    from ref2va_accept.quality._models import (
        LoadedModel,
        amt_input,
        clip_input,
        dino_input,
        dreamsim_input,
        load_model,
        musiq_input,
        prepare_device,
        raft_input,
    )
    from ref2va_accept.quality._pipeline import (
        ScoredVideo,
        score_frames,
        score_video,
        score_video_counted,
    )
    from ref2va_accept.quality._registry import (
        SCORERS,
        ScorerError,
        ScorerInfo,
        error_score,
    )
    from ref2va_accept.quality._scoring import (
        aggregate_relative_error,
        check_comparable,
        relative_errors,
    )
    from ref2va_accept.quality._standins import make_standins
    from ref2va_accept.quality._vbench import MODEL_DIMENSIONS
    from ref2va_accept.quality._weight_names import (
        VBENCH_LAYOUT,
        WEIGHT_DIMENSIONS,
        WEIGHT_NAMES,
        unknown_weight_message,
    )

_WHERE = {
    "LoadedModel": "_models",
    "MODEL_DIMENSIONS": "_vbench",
    "SCORERS": "_registry",
    "ScoredVideo": "_pipeline",
    "ScorerError": "_registry",
    "ScorerInfo": "_registry",
    "VBENCH_LAYOUT": "_weight_names",
    "WEIGHT_DIMENSIONS": "_weight_names",
    "WEIGHT_NAMES": "_weight_names",
    "aggregate_relative_error": "_scoring",
    "amt_input": "_models",
    "audio_stats": "_audio",
    "check_comparable": "_scoring",
    "clip_input": "_models",
    "compare_audio": "_audio",
    "compare_audio_files": "_audio",
    "compare_frames": "_fidelity",
    "compare_videos": "_fidelity",
    "decode_audio": "_audio",
    "dino_input": "_models",
    "dreamsim_input": "_models",
    "error_score": "_registry",
    "load_model": "_models",
    "make_standins": "_standins",
    "musiq_input": "_models",
    "prepare_device": "_models",
    "raft_input": "_models",
    "relative_errors": "_scoring",
    "score_frames": "_pipeline",
    "score_video": "_pipeline",
    "score_video_counted": "_pipeline",
    "stand_in_name": "_known_standins",
    "unknown_weight_message": "_weight_names",
}

__all__ = [
    "MODEL_DIMENSIONS",
    "SCORERS",
    "VBENCH_LAYOUT",
    "WEIGHT_DIMENSIONS",
    "WEIGHT_NAMES",
    "LoadedModel",
    "ScoredVideo",
    "ScorerError",
    "ScorerInfo",
    "aggregate_relative_error",
    "amt_input",
    "audio_stats",
    "check_comparable",
    "clip_input",
    "compare_audio",
    "compare_audio_files",
    "compare_frames",
    "compare_videos",
    "decode_audio",
    "dino_input",
    "dreamsim_input",
    "error_score",
    "load_model",
    "make_standins",
    "musiq_input",
    "prepare_device",
    "raft_input",
    "relative_errors",
    "score_frames",
    "score_video",
    "score_video_counted",
    "stand_in_name",
    "unknown_weight_message",
]


def __getattr__(name: str) -> object:
    return load_name(__name__, _WHERE, name)
