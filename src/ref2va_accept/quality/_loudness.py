"""Integrated loudness after ITU-R BS.1770-4, the per-arm loudness the audio comparison reports.

K-weighting (a high shelf, then the RLB high-pass), 400 ms blocks with 75 % overlap, an absolute
gate at -70 LUFS and a relative gate 10 LU below the loudness of the blocks above it. The standard
publishes the K-weighting coefficients for 48 kHz only; :func:`k_weighting` derives them for any
rate from the analog prototype, as pyloudnorm and libebur128 do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import signal as sp_signal

__all__ = [
    "Biquad",
    "integrated_loudness",
    "k_weighting",
]

# ITU-R BS.1770-4, Table 1 and 2: the K-weighting pre-filter (high shelf) and the RLB high-pass,
# as published for 48 kHz only.
_BS1770_SHELF_48K = ((1.53512485958697, -2.69169618940638, 1.19839281085285),
                     (1.0, -1.69065929318241, 0.73248077421585))
_BS1770_HIGHPASS_48K = ((1.0, -2.0, 1.0), (1.0, -1.99004745483398, 0.99007225036621))
_BS1770_RATE = 48000
_BLOCK_S = 0.400
_BLOCK_STEP_S = 0.100  # 75 % overlap
_ABSOLUTE_GATE_LUFS = -70.0
_RELATIVE_GATE_LU = -10.0
_LOUDNESS_OFFSET = -0.691


@dataclass(frozen=True)
class Biquad:
    b: tuple[float, float, float]
    a: tuple[float, float, float]  # a[0] == 1


def _analog_prototype(stage: tuple[tuple[float, ...], tuple[float, ...]],
                      rate: int) -> tuple[float, float, float, float, float]:
    """Invert the prewarped bilinear transform: (f0, Q, Vh, Vb, Vl) of a digital biquad.

    The biquad is H(S) = (Vh S^2 + Vb S / Q + Vl) / (S^2 + S / Q + 1) with S = s / w0, mapped by
    S = (z - 1) / (K (z + 1)), K = tan(pi f0 / rate). Evaluating numerator and denominator at
    z = 1, z = -1 and their difference isolates each parameter.
    """
    (b0, b1, b2), (a0, a1, a2) = stage
    b0, b1, b2, a1, a2 = b0 / a0, b1 / a0, b2 / a0, a1 / a0, a2 / a0
    k = math.sqrt((1 + a1 + a2) / (1 - a1 + a2))
    k_over_q = 2 * (1 - a2) / (1 - a1 + a2)
    vh = (b0 - b1 + b2) / (1 - a1 + a2)
    vl = (b0 + b1 + b2) / (1 + a1 + a2)
    vb = (b0 - b2) / (1 - a2)
    return rate * math.atan(k) / math.pi, k / k_over_q, vh, vb, vl


def _biquad_at(f0: float, q: float, vh: float, vb: float, vl: float, rate: int) -> Biquad:
    k = math.tan(math.pi * f0 / rate)
    den = 1 + k / q + k * k
    return Biquad(
        ((vh + vb * k / q + vl * k * k) / den, 2 * (vl * k * k - vh) / den,
         (vh - vb * k / q + vl * k * k) / den),
        (1.0, 2 * (k * k - 1) / den, (1 - k / q + k * k) / den),
    )


def k_weighting(sample_rate: int) -> tuple[Biquad, Biquad]:
    """BS.1770-4's two K-weighting stages (shelf, RLB high-pass) for ``sample_rate``.

    The standard publishes coefficients for 48 kHz only. As pyloudnorm and libebur128 do, the
    analog prototype is recovered from them and mapped back with the bilinear transform at the
    actual rate, prewarped at each stage's corner; at 48 kHz this returns the published values.
    (The recovered prototype is libebur128's: shelf f0 1681.97 Hz, Q 0.70718, +3.99984 dB.)
    """
    if sample_rate <= 0:
        raise ValueError(f"expected a positive sample rate, got {sample_rate}")
    return (_biquad_at(*_analog_prototype(_BS1770_SHELF_48K, _BS1770_RATE), sample_rate),
            _biquad_at(*_analog_prototype(_BS1770_HIGHPASS_48K, _BS1770_RATE), sample_rate))


def integrated_loudness(samples: npt.ArrayLike, sample_rate: int) -> float:
    """BS.1770-4 integrated loudness in LUFS of [channels, n] (or mono [n]) samples.

    400 ms blocks with 75 % overlap, absolute gate -70 LUFS, relative gate -10 LU. Every channel
    has weight 1.0 (mono and stereo; surround weights are not needed by this suite). Input shorter
    than one block, or whose blocks all fall under the absolute gate, reads -inf.
    """
    x = np.atleast_2d(np.asarray(samples, dtype=np.float64))
    block = round(_BLOCK_S * sample_rate)
    step = round(_BLOCK_STEP_S * sample_rate)
    n = x.shape[1]
    if n < block or block <= 0:
        return -math.inf
    for stage in k_weighting(sample_rate):
        x = sp_signal.lfilter(stage.b, stage.a, x, axis=1)
    # Block mean squares from a running sum: O(n) however many blocks overlap.
    energy = np.zeros((x.shape[0], n + 1))
    np.cumsum(x * x, axis=1, out=energy[:, 1:])
    starts = np.arange(0, n - block + 1, step)
    z = (energy[:, starts + block] - energy[:, starts]) / block  # [channels, blocks]
    total = z.sum(axis=0)
    with np.errstate(divide="ignore"):
        block_lufs = _LOUDNESS_OFFSET + 10 * np.log10(total)
    above_absolute = block_lufs > _ABSOLUTE_GATE_LUFS
    if not above_absolute.any():
        return -math.inf
    relative_gate = (_LOUDNESS_OFFSET + 10 * math.log10(float(total[above_absolute].mean()))
                     + _RELATIVE_GATE_LU)
    gated = above_absolute & (block_lufs > relative_gate)
    return _LOUDNESS_OFFSET + 10 * math.log10(float(total[gated].mean()))
