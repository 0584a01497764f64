"""Relative error between a candidate and B0, per dimension and aggregated, and the precondition
that both arms were produced alike.

e = |s_c - s_b| / |s_b|, two-sided: a rise is a deviation too. A dimension that is open or in
error on either side gives an open relative error, never 0. Aggregates follow VBench's totals:
per-dimension (score - min) / (max - min) when ``normalized``, then the weighted mean (weights 1,
dynamic degree 0.5); when the reduced set holds both VBench++ I2V dimensions and quality
dimensions, the total is the mean of the two weighted means, as VBench++ computes its I2V total.
(VBench++'s quality score leaves temporal flickering out; a campaign that gates it keeps it in
the quality part, where VBench's T2V quality score has it.) VBench dimensions aggregate among
VBench dimensions only and proxies among proxies only; fidelity and consistency scores get
per-dimension errors and no aggregate.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any

from ref2va_accept.evidence import RelativeError, ScoreRecord
from ref2va_accept.media import MediaProbe
from ref2va_accept.quality._registry import Kind

__all__ = [
    "DIMENSION_WEIGHTS",
    "I2V_DIMENSIONS",
    "NORMALIZE_RANGE",
    "aggregate_relative_error",
    "check_comparable",
    "normalize",
    "relative_error",
    "relative_errors",
]

# VBench scripts/constant.py: NORMALIZE_DIC and NORMALIZE_DIC_I2V ("Min"/"Max" per dimension),
# DIM_WEIGHT and DIM_WEIGHT_I2V (1 except dynamic degree 0.5 and camera motion 0.1).
NORMALIZE_RANGE: dict[str, tuple[float, float]] = {
    "subject_consistency": (0.1462, 1.0),
    "background_consistency": (0.2615, 1.0),
    "temporal_flickering": (0.6293, 1.0),
    "motion_smoothness": (0.706, 0.9975),
    "dynamic_degree": (0.0, 1.0),
    "aesthetic_quality": (0.0, 1.0),
    "imaging_quality": (0.0, 1.0),
    "i2v_subject": (0.1462, 1.0),
    "i2v_background": (0.2615, 1.0),
    "camera_motion": (0.0, 1.0),
}
DIMENSION_WEIGHTS: dict[str, float] = {"dynamic_degree": 0.5, "camera_motion": 0.1}
# VBench++'s I2V score (scripts/cal_i2v_final_score.py); its total is the plain mean of the
# quality score (the other dimensions) and the I2V score, each a weighted mean of its own.
I2V_DIMENSIONS = frozenset({"i2v_subject", "i2v_background", "camera_motion"})
_AGGREGATED_KINDS: tuple[Kind, ...] = ("vbench", "proxy")


def normalize(dimension: str, value: float, kind: Kind) -> float:
    """VBench's min-max normalisation; proxies and unlisted dimensions are already 0..1."""
    if kind != "vbench" or dimension not in NORMALIZE_RANGE:
        return value
    low, high = NORMALIZE_RANGE[dimension]
    return (value - low) / (high - low)


def relative_error(candidate: float, baseline: float) -> float:
    if candidate == baseline:  # also inf == inf: a PSNR identical on both sides did not move
        return 0.0
    if baseline == 0.0:
        return 0.0 if candidate == 0.0 else math.inf
    return abs(candidate - baseline) / abs(baseline)


def _value(score: ScoreRecord, normalized: bool) -> float:
    assert score.value is not None
    value = float(score.value)  # a record's figure: "inf", "-inf" and "nan" are floats too
    return normalize(score.dimension, value, score.kind) if normalized else value


def _why_open(cand: ScoreRecord | None, base: ScoreRecord | None) -> str | None:
    for side, score in (("candidate", cand), ("baseline", base)):
        if score is None:
            return f"no {side} score"
        if score.status != "ok" or score.value is None:
            return f"{side} is {score.status}: {score.detail}"
    assert cand is not None and base is not None
    if (cand.version, cand.weights) != (base.version, base.weights):
        return "the two arms were scored by different scorer versions or weights"
    return None


def _figure(score: ScoreRecord | None) -> float | None:
    return None if score is None or score.value is None else float(score.value)


def aggregate_relative_error(candidate: Sequence[ScoreRecord], baseline: Sequence[ScoreRecord], *,
                             kind: Kind, normalized: bool,
                             dimensions: Collection[str] | None = None) -> RelativeError:
    """The weighted (normalised) mean of one kind's dimensions, compared two-sided.

    ``dimensions`` is the reduced set the campaign freezes; by default every dimension of that
    kind that either arm reported. One open member makes the aggregate open: a mean over fewer
    dimensions than frozen would be a different number.
    """
    cand = {s.scorer: s for s in candidate if s.kind == kind}
    base = {s.scorer: s for s in baseline if s.kind == kind}
    ids = sorted(set(cand) | set(base))
    if dimensions is not None:
        ids = [i for i in ids if (cand.get(i) or base[i]).dimension in dimensions]
        found = {(cand.get(i) or base[i]).dimension for i in ids}
        absent = sorted(set(dimensions) - found)
    else:
        absent = []
    name = f"{kind}.aggregate"
    problems = [f"{d}: no score on either side" for d in absent]
    for i in ids:
        why = _why_open(cand.get(i), base.get(i))
        if why:
            problems.append(f"{i}: {why}")
    if problems or not ids:
        return RelativeError(scorer=name, dimension="aggregate", kind=kind, candidate=None,
                             baseline=None, error=None, status="open",
                             detail="; ".join(problems) or f"no {kind} dimensions")
    parts = [part for part in ([i for i in ids if cand[i].dimension not in I2V_DIMENSIONS],
                               [i for i in ids if cand[i].dimension in I2V_DIMENSIONS]) if part]
    agg_c = math.fsum(_weighted_mean(cand, part, normalized) for part in parts) / len(parts)
    agg_b = math.fsum(_weighted_mean(base, part, normalized) for part in parts) / len(parts)
    detail = (f"weighted mean of {len(ids)} dimensions" if len(parts) == 1 else
              f"mean of the quality score ({len(parts[0])} dimensions) and the I2V score "
              f"({len(parts[1])} dimensions), VBench++'s I2V total")
    return RelativeError(scorer=name, dimension="aggregate", kind=kind, candidate=agg_c,
                         baseline=agg_b, error=relative_error(agg_c, agg_b), status="ok",
                         detail=detail)


def _weighted_mean(scores: dict[str, ScoreRecord], ids: Sequence[str], normalized: bool) -> float:
    weights = [DIMENSION_WEIGHTS.get(scores[i].dimension, 1.0) for i in ids]
    total = math.fsum(w * _value(scores[i], normalized) for w, i in zip(weights, ids, strict=True))
    return total / math.fsum(weights)


def relative_errors(candidate: Sequence[ScoreRecord], baseline: Sequence[ScoreRecord], *,
                    normalized: bool) -> list[RelativeError]:
    """Per-dimension errors (matched by scorer id), then one aggregate per VBench/proxy kind."""
    cand = {s.scorer: s for s in candidate}
    base = {s.scorer: s for s in baseline}
    ordered = list(cand) + [i for i in base if i not in cand]
    out: list[RelativeError] = []
    for scorer_id in ordered:
        c, b = cand.get(scorer_id), base.get(scorer_id)
        ref = c or b
        assert ref is not None
        why = _why_open(c, b)
        if why:
            out.append(RelativeError(scorer=scorer_id, dimension=ref.dimension, kind=ref.kind,
                                     candidate=_figure(c), baseline=_figure(b), error=None,
                                     status="open", detail=why))
            continue
        assert c is not None and b is not None
        vc, vb = _value(c, normalized), _value(b, normalized)
        out.append(RelativeError(scorer=scorer_id, dimension=ref.dimension, kind=ref.kind,
                                 candidate=vc, baseline=vb, error=relative_error(vc, vb),
                                 status="ok", detail=""))
    for kind in _AGGREGATED_KINDS:
        if any(s.kind == kind for s in (*candidate, *baseline)):
            out.append(aggregate_relative_error(candidate, baseline, kind=kind,
                                                normalized=normalized))
    # A NaN error is no error of 0 and no error above the threshold: nothing was compared, so
    # the dimension is open (max(0.0, nan) is 0.0, and nan < threshold is False).
    return [_open_if_nan(e) for e in out]


def _open_if_nan(error: RelativeError) -> RelativeError:
    if error.error is None or not math.isnan(error.error):
        return error
    return error.model_copy(update={
        "error": None, "status": "open",
        "detail": f"relative error is not a number (candidate {error.candidate!r}, "
                  f"B0 {error.baseline!r})"})


def _settings_diff(a: str | None, b: str | None, name_a: str, name_b: str) -> str:
    """Name what differs between two x264 option strings ("x264 core N: k=v k=v ...")."""
    if a is None or b is None:
        return (f"{name_a if a is None else name_b} carries no x264 options, "
                f"{name_b if a is None else name_a} does")
    head_a, _, opts_a = a.partition(": ")
    head_b, _, opts_b = b.partition(": ")
    parsed_a = dict(item.partition("=")[::2] for item in opts_a.split())
    parsed_b = dict(item.partition("=")[::2] for item in opts_b.split())
    diffs = [f"{key} {parsed_a.get(key, '(absent)')} vs {parsed_b.get(key, '(absent)')}"
             for key in sorted(set(parsed_a) | set(parsed_b))
             if parsed_a.get(key) != parsed_b.get(key)]
    if head_a != head_b:
        diffs.insert(0, f"{head_a} vs {head_b}")
    return f"{name_a} vs {name_b}: " + ", ".join(diffs)


def check_comparable(meta_a: MediaProbe, meta_b: MediaProbe, *,
                     fps_tolerance: float = 1e-3) -> list[str]:
    """Why two arms' outputs may not be compared at all; empty when they may.

    Frame count, fps, resolution and encoder settings (codec, profile, pixel format, colour
    description, x264's options string) must match: re-encoding alone moved flicker by over 1%
    in one test, so a mismatch is a failed precondition.
    """
    a, b = meta_a.video, meta_b.video
    if a is None or b is None:
        return [f"{m.name}: no video stream" for m in (meta_a, meta_b) if m.video is None]
    problems: list[str] = []
    pairs: list[tuple[str, Any, Any]] = [
        ("frame count", a.frames_decoded, b.frames_decoded),
        ("resolution", f"{a.width}x{a.height}", f"{b.width}x{b.height}"),
        ("video codec", a.codec, b.codec),
        ("pixel format", a.pix_fmt, b.pix_fmt),
    ]
    pairs += [("codec profile", a.profile, b.profile), ("colour description", a.colour, b.colour)]
    for what, va, vb in pairs:
        if va != vb:
            problems.append(f"{what} differs: {meta_a.name} has {va}, {meta_b.name} has {vb}")
    if a.encoder_settings != b.encoder_settings:
        differ = _settings_diff(a.encoder_settings, b.encoder_settings, meta_a.name, meta_b.name)
        problems.append(f"encoder settings differ: {differ}")
    if abs(a.fps - b.fps) > fps_tolerance:
        problems.append(f"fps differs: {meta_a.name} has {a.fps:g}, {meta_b.name} has {b.fps:g}")
    if (meta_a.audio is None) != (meta_b.audio is None):
        problems.append(f"audio stream present in only one of {meta_a.name}, {meta_b.name}")
    elif meta_a.audio is not None and meta_b.audio is not None:
        aa, ab = meta_a.audio, meta_b.audio
        for what, va, vb in (("audio codec", aa.codec, ab.codec),
                             ("sample rate", aa.sample_rate, ab.sample_rate),
                             ("channels", aa.channels, ab.channels)):
            if va != vb:
                problems.append(f"{what} differs: {meta_a.name} has {va}, "
                                f"{meta_b.name} has {vb}")
    for meta in (meta_a, meta_b):
        if meta.decode_errors:
            problems.append(f"{meta.name}: decode errors: {'; '.join(meta.decode_errors)}")
    return problems
