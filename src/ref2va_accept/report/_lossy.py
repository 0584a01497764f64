"""The report's lossy gates: per lossy track B0's spread between seeds, then per candidate and
seed every score against B0 (its scorer and weights, the relative error and the gate's recorded
decision), the fidelity to B0 with its curves per frame, and the soundtrack against B0's."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

from ref2va_accept.evidence import (
    AudioComparisonRecord,
    BaselineVariabilityCheck,
    BaselineVariabilityData,
    Bundle,
    EvidenceBundle,
    GateError,
    LossyGateCheck,
    LossyGateData,
    LossySeed,
    NotCompared,
)
from ref2va_accept.report._cells import TABLE, cells, number

__all__ = ["audio_comparison_text", "lossy_tables_html"]


def _record(bundle: EvidenceBundle | Bundle) -> Bundle:
    return bundle.record if isinstance(bundle, EvidenceBundle) else bundle


def audio_comparison_text(cmp: AudioComparisonRecord) -> str:
    """One line of an audio comparison's record: the report's lossy section and the quality
    command print it."""
    return (f"lag {number(cmp.lag_ms, '.2f')} ms, "
            f"SNR {number(cmp.snr_db, '.2f')} dB, "
            f"SI-SDR {number(cmp.si_sdr_db, '.2f')} dB, "
            f"LSD {number(cmp.lsd_db, '.3f')} dB, "
            f"MR-STFT {number(cmp.mrstft, '.4f')}, "
            f"loudness {number(cmp.loudness_diff_lu, '+.2f')} LU, "
            f"length difference {cmp.length_mismatch_samples} samples")


def _curve_svg(values: Sequence[Any], *, cap: float, label: str) -> str:
    """A small inline line chart of a per-frame curve (identical frames drawn at ``cap``)."""
    points = [min(cap, float(v)) if isinstance(v, (int, float)) else cap for v in values]
    finite = [p for p in points if math.isfinite(p)]
    if len(finite) < 2:
        return ""
    low, high = min(finite), max(finite)
    span = (high - low) or 1.0
    width, height = 360, 60
    step = width / (len(points) - 1)
    path = " ".join(f"{i * step:.1f},{height - (p - low) / span * (height - 4) - 2:.1f}"
                    for i, p in enumerate(points))
    return (f"<svg width='{width}' height='{height}' role='img' aria-label='{html.escape(label)}'"
            " style='border:1px solid #ccc;vertical-align:middle'>"
            f"<polyline fill='none' stroke='#0969da' stroke-width='1' points='{path}'/></svg>"
            f" <small>{html.escape(label)}: {low:.2f} .. {high:.2f}</small>")


def _variability_html(check: BaselineVariabilityCheck) -> str:
    data = check.data
    spread = data if isinstance(data, BaselineVariabilityData) else None  # else shared: none
    same = {} if spread is None else spread.same_seed_spread
    other = {} if spread is None else spread.different_seed_spread
    limit = None if spread is None else spread.limit
    gated = set() if spread is None else set(spread.gated)
    # as the gate decided it, for the gated scorers
    below = {} if spread is None else spread.below_limit

    def decided(scorer: str) -> str:
        if scorer not in gated:
            return "-"  # the limit decides gated ones only
        return "yes" if below.get(scorer) is True else "no"

    rows = "".join(
        "<tr>" + cells((scorer, "gated" if scorer in gated else "reported",
                         number(same.get(scorer), ".4%"), number(other.get(scorer), ".4%"),
                         decided(scorer))) + "</tr>"
        for scorer in sorted(set(same) | set(other), key=lambda k: (k not in gated, k)))
    return (f"<h4>{html.escape(check.track)} / B0: baseline variability "
            f"{check.status.upper()}</h4><p>{html.escape(check.detail or '')}</p>"
            + (f"<table class='ref2va-variability' {TABLE}><tr>"
               + cells(("scorer", "role", "same-seed spread", "different-seed spread",
                         f"below the limit {number(limit, '.4%')}"), "th") + "</tr>" + rows
               + "</table>" if rows else ""))


# How each recorded lossy decision is shown: broken in red, the others plain.
_GATE_CELLS = {"within": "<td>within</td>", "open": "<td>open</td>",
               "broken": "<td style='color:#cf222e;font-weight:bold'>BROKEN</td>"}


def _gate_cell(decision: str) -> str:
    return _GATE_CELLS.get(decision) or cells((decision,))


def _scorer_label(error: GateError) -> str:
    """The scorer's id, and for a model-based one the weights it ran on (stand-ins said so)."""
    weights = error.weights or []
    if not weights:
        return error.scorer
    files = ", ".join(f"{w.name} {w.sha256[:12]}" for w in weights)
    stand_in = " STAND-IN weights (seeded random, not VBench's)" if any(
        w.stand_in for w in weights) else ""
    return f"{error.scorer} [{files}]{stand_in}"


def _seed_html(seed: LossySeed) -> str:
    rows = "".join(
        "<tr>" + cells((_scorer_label(e), e.kind, number(e.baseline, ".6f"),
                         number(e.candidate, ".6f"), number(e.error, ".4%")))
        + _gate_cell(e.gate) + cells((e.detail or "",)) + "</tr>"
        for e in seed.errors)
    parts = [f"<p><b>seed {html.escape(str(seed.seed))}</b></p>"]
    if seed.not_scored:
        parts.append(f"<p>not scored: {html.escape(seed.not_scored)}; the gate was failed "
                     "already, so this seed's scores could not change its verdict</p>")
    else:
        parts.append(f"<table class='ref2va-lossy' {TABLE}><tr>"
                     + cells(("scorer", "kind", "B0", "candidate", "relative error", "gate",
                              "detail"), "th") + "</tr>" + rows + "</table>")
    fidelity = seed.fidelity
    if isinstance(fidelity, NotCompared):
        parts.append(f"<p>fidelity to B0: error: {html.escape(str(fidelity.error))}</p>")
    else:
        parts.append(
            "<p>fidelity to B0: PSNR " + html.escape(
                f"{number(fidelity.psnr_db, '.2f')} dB (min frame "
                f"{number(fidelity.psnr_min_db, '.2f')} dB), SSIM "
                f"{number(fidelity.ssim_mean, '.4f')} (min frame "
                f"{number(fidelity.ssim_min, '.4f')}), "
                f"{fidelity.identical_frames}/{fidelity.frames} frames identical")
            + "<br>" + _curve_svg(fidelity.psnr_per_frame, cap=100.0,
                                  label="PSNR per frame, dB")
            + "<br>" + _curve_svg(fidelity.ssim_per_frame, cap=1.0,
                                  label="SSIM per frame") + "</p>")
    audio = seed.audio
    if isinstance(audio, NotCompared):
        parts.append(f"<p>audio against B0: error: {html.escape(str(audio.error))}</p>")
    else:
        parts.append("<p>audio against B0: " + html.escape(audio_comparison_text(audio))
                     + "</p>")
    return "".join(parts)


def _lossy_gate_html(check: LossyGateCheck) -> str:
    data = check.data if isinstance(check.data, LossyGateData) else None  # else nothing scored
    minimums = (() if data is None else
                ((data.min_psnr_db, "PSNR dB"), (data.min_ssim, "SSIM")))
    gate = (f"threshold {number(None if data is None else data.threshold, '.2%')}, "
            f"{'normalized' if data is not None and data.normalized else 'raw'} scores"
            + "".join(f", {name} at least {value}" for value, name in minimums
                      if value is not None))
    return (f"<h4>{html.escape(check.track)} / {html.escape(check.arm)}: lossy gate "
            f"{check.status.upper()}</h4><p>{html.escape(check.detail or '')}"
            f"<br><small>{html.escape(gate)}</small></p>"
            + "".join(_seed_html(seed) for seed in ([] if data is None else data.per_seed)))


def lossy_tables_html(bundle: EvidenceBundle | Bundle) -> str:
    """Per lossy track: B0's spread, then per candidate and seed every score against B0."""
    parts = []
    for check in _record(bundle).checks:
        if isinstance(check, BaselineVariabilityCheck):
            parts.append(_variability_html(check))
        elif isinstance(check, LossyGateCheck):
            parts.append(_lossy_gate_html(check))
    return ("<h3>Lossy gates</h3>" + "".join(parts)) if parts else ""
