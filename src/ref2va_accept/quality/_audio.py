"""Audio of a candidate against B0's audio for the same seed (docs/quality.md, "Audio").

Both soundtracks are decoded whole (15 s of stereo 32 kHz is under 4 MB as float32), aligned by
the cross-correlation lag found within +/-100 ms, truncated to their common length, and compared
with SNR, SI-SDR, log-spectral distance and a multi-resolution STFT distance. Each arm also gets
its own statistics: BS.1770-4 integrated loudness, sample peak, clipping and silence ratios.

Lengths: AAC priming and end padding move the decoded sample count by up to two AAC frames (see
:mod:`ref2va_accept.media._probing` for what PyAV 18 actually shows), so a length difference of up
to 2 * 1024 samples is expected and anything beyond is reported as outside the slack. The metrics
are still computed on the common length, so a gate can show both the length problem and how the
rest compares.

Decoding lives in :mod:`ref2va_accept.media._decoding` and loudness in
:mod:`ref2va_accept.quality._loudness`; their names are re-exported here for existing callers.

Conventions: the baseline is the reference in every ratio (SNR, SI-SDR, spectral convergence), a
positive lag means the candidate's content arrives later than the baseline's, and values that are
infinite by definition (identical signals) are +inf, never a crash or a clamp.
"""

from __future__ import annotations

import logging
import math
import os

import numpy as np
import numpy.typing as npt
from scipy import fft as sp_fft
from scipy import signal as sp_signal

from ref2va_accept.core import MediaError
from ref2va_accept.evidence import AudioComparisonRecord, AudioStatsRecord
from ref2va_accept.media import AAC_FRAME_SAMPLES, DecodedAudio, decode_audio
from ref2va_accept.quality._loudness import Biquad, integrated_loudness, k_weighting

log = logging.getLogger(__name__)

AUDIO_SCORER_VERSION = "1"
SCORER_LAG = "audio.lag"
SCORER_SNR = "audio.snr"
SCORER_SI_SDR = "audio.si_sdr"
SCORER_LSD = "audio.lsd"
SCORER_MRSTFT = "audio.mrstft"
SCORER_LOUDNESS = "audio.loudness"
SCORER_PEAK = "audio.peak"
SCORER_CLIPPING = "audio.clipping"
SCORER_SILENCE = "audio.silence"
SCORER_LENGTH = "audio.length"
AUDIO_SCORER_IDS = (
    SCORER_LAG, SCORER_SNR, SCORER_SI_SDR, SCORER_LSD, SCORER_MRSTFT, SCORER_LOUDNESS,
    SCORER_PEAK, SCORER_CLIPPING, SCORER_SILENCE, SCORER_LENGTH,
)

AAC_LENGTH_SLACK_SAMPLES = 2 * AAC_FRAME_SAMPLES
LAG_SEARCH_S = 0.100
CLIP_LEVEL = 0.999
SILENCE_FRAME_S = 0.020
SILENCE_DBFS = -60.0
LSD_FFT = 2048
LSD_POWER_FLOOR = 1e-10  # -100 dB: keeps silent bins finite without masking the noise floor
MRSTFT_FFTS = (512, 1024, 2048)
MRSTFT_MAG_FLOOR = 1e-7  # the clamp of Yamamoto et al. (Parallel WaveGAN) on |STFT|

Float64Array = npt.NDArray[np.float64]

__all__ = [
    "AAC_LENGTH_SLACK_SAMPLES",
    "AUDIO_SCORER_IDS",
    "AUDIO_SCORER_VERSION",
    "SCORER_CLIPPING",
    "SCORER_LAG",
    "SCORER_LENGTH",
    "SCORER_LOUDNESS",
    "SCORER_LSD",
    "SCORER_MRSTFT",
    "SCORER_PEAK",
    "SCORER_SILENCE",
    "SCORER_SI_SDR",
    "SCORER_SNR",
    "Biquad",
    "DecodedAudio",
    "audio_stats",
    "compare_audio",
    "compare_audio_files",
    "decode_audio",
    "integrated_loudness",
    "k_weighting",
]


# --- per-arm statistics -----------------------------------------------------------------------


def _db(ratio: float) -> float:
    if ratio <= 0:
        return -math.inf
    return 10 * math.log10(ratio)


def audio_stats(audio: DecodedAudio) -> AudioStatsRecord:
    """Loudness, sample peak, clipping and silence of one arm's soundtrack."""
    x = audio.samples.astype(np.float64)
    n = x.shape[1]
    magnitude = np.abs(x)
    peak = float(magnitude.max()) if x.size else 0.0
    frame = max(1, round(SILENCE_FRAME_S * audio.sample_rate))
    if n == 0:
        silence = math.nan
    else:
        # Full 20 ms frames only; input shorter than one frame is judged as one frame.
        frames = max(1, n // frame)
        usable = x[:, : frames * frame] if n >= frame else x
        mean_square = (usable * usable).reshape(x.shape[0], frames, -1).mean(axis=(0, 2))
        threshold = 10 ** (SILENCE_DBFS / 10)  # on mean square: RMS below -60 dBFS
        silence = float(np.mean(mean_square < threshold))
    return AudioStatsRecord(
        sample_rate=audio.sample_rate,
        channels=audio.channels,
        samples=n,
        duration_s=n / audio.sample_rate,
        start_time_s=audio.start_time_s,
        loudness_lufs=integrated_loudness(x, audio.sample_rate),
        peak_dbfs=_db(peak * peak),
        clipping_ratio=float(np.mean(magnitude >= CLIP_LEVEL)) if x.size else math.nan,
        silence_ratio=silence,
    )


# --- comparison against B0 --------------------------------------------------------------------


def _find_lag(candidate: Float64Array, baseline: Float64Array,
              max_lag: int) -> tuple[int, float]:
    """Lag in [-max_lag, max_lag] maximizing |cross-correlation| summed over channels.

    Summing per-channel correlations (rather than correlating a mono downmix) keeps channels in
    opposite phase from cancelling. Ties, including all-silent input, resolve to lag 0.
    """
    n_c, n_b = candidate.shape[1], baseline.shape[1]
    size = sp_fft.next_fast_len(n_c + n_b - 1, real=True)
    spectrum = sp_fft.rfft(candidate, size, axis=1) * np.conj(sp_fft.rfft(baseline, size, axis=1))
    corr = sp_fft.irfft(spectrum.sum(axis=0), size)
    max_lag = min(max_lag, n_c - 1, n_b - 1)
    lags = np.arange(-max_lag, max_lag + 1)
    window = corr[lags % size]  # negative lags wrap to the end of the circular result
    best = int(np.argmax(np.abs(window)))
    zero = max_lag
    if abs(window[zero]) >= abs(window[best]) * (1 - 1e-12):
        best = zero
    energy = math.sqrt(float(np.sum(candidate**2)) * float(np.sum(baseline**2)))
    peak = float(window[best]) / energy if energy > 0 else 0.0
    return int(lags[best]), peak


def _energy_ratio_db(reference: float, error: float) -> float:
    if error == 0:
        return math.inf
    return _db(reference / error)


def _snr_db(candidate: Float64Array, baseline: Float64Array) -> float:
    return _energy_ratio_db(float(np.sum(baseline**2)), float(np.sum((candidate - baseline)**2)))


def _si_sdr_db(candidate: Float64Array, baseline: Float64Array) -> float:
    """Scale-invariant SDR (Le Roux et al. 2019), no mean removal.

    One scale for all channels, so a candidate exact in one channel and broken in the other reads
    finite. The scale may be negative, so an inverted copy reads +inf here: SNR and the sign of
    ``lag_peak_correlation`` are what show an inversion.
    """
    reference_energy = float(np.sum(baseline**2))
    if reference_energy == 0:
        return math.inf if not np.any(candidate) else -math.inf
    alpha = float(np.sum(candidate * baseline)) / reference_energy
    target = alpha * baseline
    return _energy_ratio_db(float(np.sum(target**2)), float(np.sum((candidate - target)**2)))


def _stft_magnitude(x: Float64Array, n_fft: int, hop: int) -> Float64Array:
    """|STFT| [channels, frames, bins], Hann window, no centering, zero-padded to whole frames."""
    n = x.shape[1]
    frames = 1 + max(0, math.ceil((n - n_fft) / hop))
    padded = np.zeros((x.shape[0], n_fft + (frames - 1) * hop))
    padded[:, :n] = x
    windows = np.lib.stride_tricks.sliding_window_view(padded, n_fft, axis=1)[:, ::hop]
    window = sp_signal.get_window("hann", n_fft)
    return np.asarray(np.abs(sp_fft.rfft(windows * window, axis=2)), dtype=np.float64)


def _lsd_db(candidate: Float64Array, baseline: Float64Array) -> float:
    """Mean over frames and channels of the RMS over bins of the power difference in dB."""
    cand = _stft_magnitude(candidate, LSD_FFT, LSD_FFT // 4)
    base = _stft_magnitude(baseline, LSD_FFT, LSD_FFT // 4)
    diff = 10 * np.log10(cand**2 + LSD_POWER_FLOOR) - 10 * np.log10(base**2 + LSD_POWER_FLOOR)
    return float(np.mean(np.sqrt(np.mean(diff**2, axis=2))))


def _mrstft(candidate: Float64Array, baseline: Float64Array) -> tuple[float, float]:
    """Mean over FFT sizes of (spectral convergence, mean |log|B| - log|C||), hop n_fft / 4."""
    convergence: list[float] = []
    log_l1: list[float] = []
    for n_fft in MRSTFT_FFTS:
        cand = _stft_magnitude(candidate, n_fft, n_fft // 4)
        base = _stft_magnitude(baseline, n_fft, n_fft // 4)
        error = float(np.linalg.norm(base - cand))
        reference = float(np.linalg.norm(base))
        if error == 0:
            convergence.append(0.0)
        else:
            convergence.append(error / reference if reference > 0 else math.inf)
        log_l1.append(float(np.mean(np.abs(
            np.log(np.maximum(base, MRSTFT_MAG_FLOOR))
            - np.log(np.maximum(cand, MRSTFT_MAG_FLOOR))))))
    return float(np.mean(convergence)), float(np.mean(log_l1))


def _loudness_diff(candidate: float, baseline: float) -> float:
    if candidate == baseline:  # also both -inf: equally silent is no difference
        return 0.0
    return candidate - baseline


def compare_audio(candidate: DecodedAudio, baseline: DecodedAudio) -> AudioComparisonRecord:
    """Compare a candidate's soundtrack with B0's for the same seed.

    Raises ValueError (one line) when sample rates or channel counts differ: no metric here is
    meaningful across them, and resampling or downmixing would hide a real defect.
    """
    who = f"candidate {candidate.name or '(array)'} vs baseline {baseline.name or '(array)'}"
    if candidate.channels != baseline.channels:
        raise ValueError(f"{who}: expected the same audio channel count, got "
                         f"{candidate.channels} and {baseline.channels}")
    if candidate.sample_rate != baseline.sample_rate:
        raise ValueError(f"{who}: expected the same sample rate, got "
                         f"{candidate.sample_rate} Hz and {baseline.sample_rate} Hz")
    rate = baseline.sample_rate
    cand = candidate.samples.astype(np.float64)
    base = baseline.samples.astype(np.float64)
    if cand.shape[1] == 0 or base.shape[1] == 0:
        raise ValueError(f"{who}: expected audio samples in both arms, got "
                         f"{cand.shape[1]} and {base.shape[1]}")
    mismatch = cand.shape[1] - base.shape[1]
    within_slack = abs(mismatch) <= AAC_LENGTH_SLACK_SAMPLES
    lag, peak = _find_lag(cand, base, round(LAG_SEARCH_S * rate))
    if lag > 0:
        cand = cand[:, lag:]
    elif lag < 0:
        base = base[:, -lag:]
    common = min(cand.shape[1], base.shape[1])
    cand, base = cand[:, :common], base[:, :common]
    if not within_slack:
        log.warning("%s: lengths differ by %d samples, beyond the AAC slack of %d", who,
                    mismatch, AAC_LENGTH_SLACK_SAMPLES)
    if lag != 0:
        log.warning("%s: audio lag %d samples (%.2f ms), expected 0", who, lag, 1000 * lag / rate)
    convergence, log_magnitude = _mrstft(cand, base)
    cand_stats, base_stats = audio_stats(candidate), audio_stats(baseline)
    start_diff = (candidate.start_time_s - baseline.start_time_s
                  if candidate.start_time_s is not None and baseline.start_time_s is not None
                  else None)
    return AudioComparisonRecord(
        scorer_version=AUDIO_SCORER_VERSION,
        length_slack_samples=AAC_LENGTH_SLACK_SAMPLES,
        candidate=cand_stats,
        baseline=base_stats,
        lag_samples=lag,
        lag_ms=1000 * lag / rate,
        lag_peak_correlation=peak,
        compared_samples=common,
        snr_db=_snr_db(cand, base),
        si_sdr_db=_si_sdr_db(cand, base),
        lsd_db=_lsd_db(cand, base),
        mrstft=convergence + log_magnitude,
        mrstft_spectral_convergence=convergence,
        mrstft_log_magnitude=log_magnitude,
        loudness_diff_lu=_loudness_diff(float(cand_stats.loudness_lufs),
                                        float(base_stats.loudness_lufs)),
        length_mismatch_samples=mismatch,
        length_within_aac_slack=within_slack,
        start_time_diff_s=start_diff,
        scorers={
            "lag_samples": SCORER_LAG, "snr_db": SCORER_SNR, "si_sdr_db": SCORER_SI_SDR,
            "lsd_db": SCORER_LSD, "mrstft": SCORER_MRSTFT, "loudness_diff_lu": SCORER_LOUDNESS,
            "length_mismatch_samples": SCORER_LENGTH, "peak_dbfs": SCORER_PEAK,
            "clipping_ratio": SCORER_CLIPPING, "silence_ratio": SCORER_SILENCE,
        },
    )


def compare_audio_files(candidate_path: str | os.PathLike[str],
                        baseline_path: str | os.PathLike[str]) -> AudioComparisonRecord:
    """Decode both files and compare them; every failure is one :class:`MediaError` line."""
    candidate, baseline = decode_audio(candidate_path), decode_audio(baseline_path)
    try:
        return compare_audio(candidate, baseline)
    except ValueError as exc:
        raise MediaError(str(exc)) from None
