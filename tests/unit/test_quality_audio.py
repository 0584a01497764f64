"""Audio against B0: hand-computed values on synthetic signals, an AAC round trip, bad input."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import numpy.typing as npt
import pytest

from ref2va_accept.core import MediaError
from ref2va_accept.quality._audio import (
    AAC_LENGTH_SLACK_SAMPLES,
    AUDIO_SCORER_IDS,
    AUDIO_SCORER_VERSION,
    DecodedAudio,
    audio_stats,
    compare_audio,
    compare_audio_files,
    decode_audio,
    integrated_loudness,
    k_weighting,
)

pytestmark = pytest.mark.fast

RATE = 32000
Signal = npt.NDArray[np.float64]


def noise(seconds: float = 2.0, channels: int = 2, std: float = 0.1, seed: int = 0) -> Signal:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((channels, round(seconds * RATE))) * std


def sine(freq: float, seconds: float, rate: int, dbfs: float = 0.0) -> Signal:
    # dBFS of a sine by its peak: a full-scale sine is 0 dBFS (EBU Tech 3341's convention).
    return 10 ** (dbfs / 20) * np.sin(2 * np.pi * freq * np.arange(round(seconds * rate)) / rate)


def arm(samples: npt.ArrayLike, rate: int = RATE, name: str = "") -> DecodedAudio:
    return DecodedAudio.from_array(samples, rate, name=name)


def write_mp4(path: Path, samples: Signal | None, rate: int = RATE) -> Path:
    """An MP4 with an AAC track of exactly ``samples`` (or only an H.264 track when None)."""
    with av.open(str(path), "w") as out:
        if samples is None:
            video = out.add_stream("libx264", rate=24)
            video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
            for index in range(6):
                picture = np.full((48, 64, 3), index * 40, np.uint8)
                out.mux(video.encode(av.VideoFrame.from_ndarray(picture, format="rgb24")))
            out.mux(video.encode(None))
            return path
        layout = "mono" if samples.shape[0] == 1 else "stereo"
        audio = out.add_stream("aac", rate=rate, layout=layout)
        data = samples.astype(np.float32)
        for start in range(0, data.shape[1], 1024):
            chunk = np.ascontiguousarray(data[:, start : start + 1024])
            frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout=layout)
            frame.sample_rate, frame.pts = rate, start
            frame.time_base = Fraction(1, rate)
            out.mux(audio.encode(frame))
        out.mux(audio.encode(None))
    return path


# --- comparison metrics ----------------------------------------------------------------------


def test_identical_signals_score_perfect_without_crashing() -> None:
    x = noise()
    result = compare_audio(arm(x), arm(x))
    assert result.lag_samples == 0
    assert result.snr_db == math.inf and result.si_sdr_db == math.inf
    assert result.lsd_db == 0.0 and result.mrstft == 0.0
    assert result.loudness_diff_lu == 0.0
    assert result.length_mismatch_samples == 0 and result.length_within_aac_slack
    assert result.lag_peak_correlation == pytest.approx(1.0)


def test_to_dict_is_strict_json_with_infinities_as_strings() -> None:
    x = noise()
    record = compare_audio(arm(x), arm(x)).json_dict()
    text = json.dumps(record, allow_nan=False)
    assert json.loads(text)["si_sdr_db"] == "inf"
    assert record["scorer_version"] == AUDIO_SCORER_VERSION == "1"
    assert set(record["scorers"].values()) == set(AUDIO_SCORER_IDS)
    loudness = record["baseline"]["loudness_lufs"]
    assert record["candidate"]["loudness_lufs"] == pytest.approx(loudness)


@pytest.mark.parametrize("delay", [1, 37, -53, 3200, -3200])
def test_delay_is_found_and_aligned_away(delay: int) -> None:
    x = noise()
    shifted = np.zeros_like(x)
    if delay > 0:
        shifted[:, delay:] = x[:, :-delay]
    else:
        shifted[:, :delay] = x[:, -delay:]
    result = compare_audio(arm(shifted), arm(x))
    assert result.lag_samples == delay
    assert result.lag_ms == pytest.approx(1000 * delay / RATE)
    # After alignment both arms hold the same samples: the delay alone costs nothing.
    assert result.si_sdr_db == math.inf
    assert result.compared_samples == x.shape[1] - abs(delay)


def test_lag_search_stops_at_100_ms() -> None:
    x = noise()
    delay = 4000  # 125 ms
    shifted = np.zeros_like(x)
    shifted[:, delay:] = x[:, :-delay]
    assert abs(compare_audio(arm(shifted), arm(x)).lag_samples) <= 3200


def test_scaled_copy_is_scale_invariant_for_si_sdr_only() -> None:
    x = noise()
    half = compare_audio(arm(0.5 * x), arm(x))
    assert half.si_sdr_db == math.inf  # 0.5 is exact in binary: the residual is exactly zero
    # SNR = ||b||^2 / ||0.5 b - b||^2 = 1 / 0.25
    assert half.snr_db == pytest.approx(10 * math.log10(4.0), abs=1e-9)
    odd = compare_audio(arm(0.7 * x), arm(x))
    assert odd.si_sdr_db > 120  # only float32 rounding of 0.7 x remains
    assert odd.snr_db == pytest.approx(-20 * math.log10(0.3), abs=1e-5)


def test_inverted_copy_shows_in_snr_and_correlation_sign() -> None:
    x = noise()
    result = compare_audio(arm(-x), arm(x))
    assert result.lag_samples == 0
    assert result.lag_peak_correlation == pytest.approx(-1.0)
    assert result.snr_db == pytest.approx(10 * math.log10(1 / 4), abs=1e-9)


def test_white_noise_at_known_power_gives_expected_si_sdr() -> None:
    x = noise(seconds=4.0, std=0.1, seed=1)
    disturbed = x + noise(seconds=4.0, std=0.01, seed=2)  # 20 dB below the signal
    result = compare_audio(arm(disturbed), arm(x))
    assert result.lag_samples == 0
    assert result.si_sdr_db == pytest.approx(20.0, abs=0.1)
    assert result.snr_db == pytest.approx(20.0, abs=0.1)
    assert result.lsd_db > 0 and result.mrstft > 0


def test_spectral_distances_grow_with_the_disturbance() -> None:
    x = noise(seed=3)
    mild = compare_audio(arm(x + noise(std=0.001, seed=4)), arm(x))
    strong = compare_audio(arm(x + noise(std=0.05, seed=4)), arm(x))
    assert 0 < mild.lsd_db < strong.lsd_db
    assert 0 < mild.mrstft < strong.mrstft
    assert mild.mrstft == pytest.approx(
        mild.mrstft_spectral_convergence + mild.mrstft_log_magnitude)


@pytest.mark.parametrize(("extra", "within"), [
    (AAC_LENGTH_SLACK_SAMPLES, True),
    (-AAC_LENGTH_SLACK_SAMPLES, True),
    (AAC_LENGTH_SLACK_SAMPLES + 1, False),
    (-AAC_LENGTH_SLACK_SAMPLES - 1, False),
])
def test_length_tolerates_two_aac_frames_and_nothing_more(extra: int, within: bool) -> None:
    x = noise()
    candidate = (np.concatenate([x, np.zeros((2, extra))], axis=1) if extra > 0
                 else x[:, :extra])
    result = compare_audio(arm(candidate), arm(x))
    assert result.length_mismatch_samples == extra
    assert result.length_within_aac_slack is within
    # The metrics still run on the common length, where the arms are identical.
    assert result.si_sdr_db == math.inf
    assert result.compared_samples == x.shape[1] - max(0, -extra)


def test_channel_mismatch_is_one_line_value_error() -> None:
    x = noise()
    with pytest.raises(ValueError, match="channel count") as info:
        compare_audio(arm(x[:1]), arm(x))
    assert "\n" not in str(info.value)


def test_sample_rate_mismatch_is_one_line_value_error() -> None:
    x = noise()
    with pytest.raises(ValueError, match="sample rate"):
        compare_audio(DecodedAudio.from_array(x, 48000), arm(x))


# --- loudness (BS.1770-4) and per-arm statistics -----------------------------------------------


def test_k_weighting_at_48k_reproduces_the_published_coefficients() -> None:
    shelf, highpass = k_weighting(48000)
    assert shelf.b == pytest.approx((1.53512485958697, -2.69169618940638, 1.19839281085285),
                                    abs=1e-12)
    assert shelf.a == pytest.approx((1.0, -1.69065929318241, 0.73248077421585), abs=1e-12)
    assert highpass.b == pytest.approx((1.0, -2.0, 1.0), abs=1e-12)
    assert highpass.a == pytest.approx((1.0, -1.99004745483398, 0.99007225036621), abs=1e-12)


def test_k_weighting_at_32k_matches_libebur128s_prototype() -> None:
    # libebur128 (ebur128.c) rebuilds the shelf from these constants for any rate.
    f0, gain_db, q = 1681.974450955533, 3.999843853973347, 0.7071752369554196
    k = math.tan(math.pi * f0 / 32000)
    vh = 10 ** (gain_db / 20)
    vb = vh**0.4996667741545416
    den = 1 + k / q + k * k
    shelf, highpass = k_weighting(32000)
    assert shelf.b == pytest.approx(
        ((vh + vb * k / q + k * k) / den, 2 * (k * k - vh) / den, (vh - vb * k / q + k * k) / den),
        abs=1e-9)
    assert shelf.a == pytest.approx((1.0, 2 * (k * k - 1) / den, (1 - k / q + k * k) / den),
                                    abs=1e-9)
    k = math.tan(math.pi * 38.13547087602444 / 32000)
    q = 0.5003270373238773
    den = 1 + k / q + k * k
    assert highpass.a == pytest.approx((1.0, 2 * (k * k - 1) / den, (1 - k / q + k * k) / den),
                                       abs=1e-9)


def test_997_hz_full_scale_sine_reads_minus_3_01_lufs_in_one_channel() -> None:
    # BS.1770's -0.691 offset cancels the K-weighting gain at 997 Hz exactly.
    tone = sine(997, 5.0, 48000)
    assert integrated_loudness(tone, 48000) == pytest.approx(-3.0103, abs=1e-3)
    assert integrated_loudness(np.stack([tone, 0 * tone]), 48000) == pytest.approx(-3.0103,
                                                                                   abs=1e-3)


@pytest.mark.parametrize("rate", [48000, 44100, 32000])
def test_1_khz_full_scale_sine_reads_about_minus_3_01_lufs(rate: int) -> None:
    tone = sine(1000, 5.0, rate)
    assert integrated_loudness(tone[np.newaxis], rate) == pytest.approx(-3.01, abs=0.01)
    # Channels add power: the same sine in both channels of a stereo pair reads 0 LUFS.
    assert integrated_loudness(np.stack([tone, tone]), rate) == pytest.approx(0.0, abs=0.01)


@pytest.mark.parametrize(("segments", "expected"), [
    ([(-23, 20.0)], -23.0),  # EBU Tech 3341 case 1
    ([(-33, 20.0)], -33.0),  # case 2
    ([(-36, 10.0), (-23, 60.0), (-36, 10.0)], -23.0),  # case 3: relative gate
    ([(-72, 10.0), (-36, 10.0), (-23, 60.0), (-36, 10.0), (-72, 10.0)], -23.0),  # case 4
    ([(-26, 20.0), (-20, 20.1), (-26, 20.0)], -23.0),  # case 5
])
def test_ebu_tech_3341_stereo_sine_cases(segments: list[tuple[float, float]],
                                          expected: float) -> None:
    tone = np.concatenate([sine(1000, seconds, 48000, db) for db, seconds in segments])
    assert integrated_loudness(np.stack([tone, tone]), 48000) == pytest.approx(expected, abs=0.1)


def test_silence_and_inaudible_or_short_input_read_minus_inf_lufs() -> None:
    assert integrated_loudness(np.zeros((2, RATE)), RATE) == -math.inf
    assert integrated_loudness(sine(1000, 2.0, RATE, dbfs=-80)[np.newaxis], RATE) == -math.inf
    assert integrated_loudness(sine(1000, 0.39, RATE)[np.newaxis], RATE) == -math.inf


def test_silence_stats() -> None:
    stats = audio_stats(arm(np.zeros((2, RATE))))
    assert stats.loudness_lufs == -math.inf and stats.peak_dbfs == -math.inf
    assert stats.silence_ratio == 1.0 and stats.clipping_ratio == 0.0
    assert stats.duration_s == 1.0 and stats.samples == RATE
    both_silent = compare_audio(arm(np.zeros((2, RATE))), arm(np.zeros((2, RATE))))
    assert both_silent.si_sdr_db == math.inf and both_silent.loudness_diff_lu == 0.0


def test_silence_ratio_counts_20_ms_frames_below_minus_60_dbfs() -> None:
    half = np.concatenate([np.zeros(RATE), sine(440, 1.0, RATE, dbfs=-20)])
    assert audio_stats(arm(np.stack([half, half]))).silence_ratio == pytest.approx(0.5)
    # A sine at -55 dBFS peak has RMS -58 dBFS: audible by this rule; at -65 it is silence.
    assert audio_stats(arm(sine(440, 1.0, RATE, dbfs=-55))).silence_ratio == 0.0
    assert audio_stats(arm(sine(440, 1.0, RATE, dbfs=-65))).silence_ratio == 1.0


def test_clipping_and_peak_are_counted() -> None:
    samples = np.full((2, 1000), 0.5)
    samples[0, :10] = 1.0
    samples[1, :5] = -0.999
    samples[1, 5:8] = 0.998  # just under the clip level
    stats = audio_stats(arm(samples))
    assert stats.clipping_ratio == pytest.approx(15 / 2000)
    assert stats.peak_dbfs == pytest.approx(0.0)


# --- files -----------------------------------------------------------------------------------


def test_aac_round_trip_keeps_length_and_fidelity(tmp_path: Path) -> None:
    seconds = 2.0
    original = np.stack([sine(440, seconds, RATE, -6), sine(660, seconds, RATE, -9)])
    original += noise(seconds, std=0.01, seed=5)
    path = write_mp4(tmp_path / "tone.mp4", original)
    decoded = decode_audio(path)
    assert (decoded.channels, decoded.sample_rate, decoded.codec) == (2, RATE, "aac")
    assert decoded.samples.dtype == np.float32 and decoded.name == "tone.mp4"
    assert decoded.start_time_s == 0.0
    result = compare_audio(decoded, arm(original))
    assert result.length_within_aac_slack
    assert result.lag_samples == 0
    assert result.si_sdr_db > 20
    assert abs(result.loudness_diff_lu) < 0.5
    same = compare_audio_files(path, path)
    assert same.si_sdr_db == math.inf and same.start_time_diff_s == 0.0


def test_file_channel_mismatch_is_one_line_media_error(tmp_path: Path) -> None:
    x = noise(1.0)
    stereo = write_mp4(tmp_path / "stereo.mp4", x)
    mono = write_mp4(tmp_path / "mono.mp4", x[:1])
    with pytest.raises(MediaError, match="channel count") as info:
        compare_audio_files(mono, stereo)
    message = str(info.value)
    assert "\n" not in message and "mono.mp4" in message and str(tmp_path) not in message


def test_file_without_audio_is_one_line_media_error(tmp_path: Path) -> None:
    path = write_mp4(tmp_path / "silent_film.mp4", None)
    with pytest.raises(MediaError, match="expected an audio stream, found none") as info:
        decode_audio(path)
    message = str(info.value)
    assert message.startswith("silent_film.mp4:") and "\n" not in message
    assert str(tmp_path) not in message


@pytest.mark.parametrize(("content", "name"), [(None, "missing.mp4"), (b"not a movie", "junk.mp4")])
def test_unreadable_file_is_one_line_media_error(tmp_path: Path, content: bytes | None,
                                                 name: str) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(MediaError) as info:
        decode_audio(path)
    message = str(info.value)
    assert message.startswith(f"{name}:") and "\n" not in message
    assert str(tmp_path) not in message
