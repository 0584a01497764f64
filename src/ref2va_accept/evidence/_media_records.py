"""The evidence's records of what came back and how it compares: an MP4's probe (streams,
decode errors) per sample, and the lossy gate's figures per seed (the scores of an output with
the weights that made them, each gated dimension's error, a candidate's video fidelity and audio
against B0's)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict

from ref2va_accept.evidence._base import JsonNumber, Number, Record
from ref2va_accept.evidence._closed_sets import GateDecision, ScoreKind, ScoreStatus

__all__ = [
    "AudioComparisonRecord",
    "AudioStatsRecord",
    "AudioStream",
    "FidelityFigures",
    "FidelityGate",
    "GateError",
    "LossyGateData",
    "LossySeed",
    "Media",
    "MediaProbe",
    "MediaProblem",
    "NotCompared",
    "RelativeError",
    "ScoreRecord",
    "VideoStream",
    "WeightRecord",
]


# -- media ----------------------------------------------------------------------------------------


class VideoStream(Record):
    """An MP4's video stream as decoding found it (media.probe): `duration_s` is
    frames_decoded / fps; `profile`, `colour` (the colour description, which decides the
    YUV->RGB conversion every metric sees) and `encoder_settings` (the options string x264 writes
    into its first SEI, when there is one) are what two arms must share to be compared."""

    model_config = ConfigDict(frozen=True)

    codec: str
    width: int
    height: int
    fps: Number
    pix_fmt: str | None
    frames_decoded: int
    frames_declared: int | None
    duration_s: Number
    start_time_s: Number | None
    profile: str | None
    colour: str | None
    encoder_settings: str | None


class AudioStream(Record):
    """An MP4's audio stream as decoding found it (media.probe): `duration_s` is
    samples_decoded / sample_rate."""

    model_config = ConfigDict(frozen=True)

    codec: str
    sample_rate: int
    channels: int
    layout: str | None
    samples_decoded: int
    duration_s: Number
    start_time_s: Number | None


class MediaProbe(Record):
    """What decoding an MP4 found (media.probe); `name` is the basename only: evidence bundles
    must not leak the host's directory layout."""

    model_config = ConfigDict(frozen=True)

    name: str
    size_bytes: int
    sha256: str
    container: str
    video: VideoStream | None
    audio: AudioStream | None
    decode_errors: tuple[str, ...]


class MediaProblem(Record):
    """A problem a probe shows against what was expected of it (media.check_media)."""

    model_config = ConfigDict(frozen=True)

    code: str
    message: str


class Media(Record):
    """The probe of one sample's MP4 (arms.Arms._request); the payload of a `media` event."""

    sample_id: str
    file: str | None
    probe: MediaProbe | None
    problems: list[MediaProblem]


# -- scores, fidelity and audio -------------------------------------------------------------------


class WeightRecord(Record):
    """A weights file that made model-based scores (quality's weight_identity): its basename (the
    evidence must not leak the host's directory layout) and sha256; a seeded stand-in in the
    official format (not the real model) says so, and whether the campaign declared it
    (`stand_in: true`) or it was recognised by its bytes alone."""

    model_config = ConfigDict(frozen=True)

    name: str
    sha256: str
    stand_in: bool | None = None
    declared: bool | None = None

    @classmethod
    def of(cls, name: str, sha256: str, *, stand_in: bool = False,
           declared: bool = False) -> WeightRecord:
        """A real file records its name and sha256 only; a stand-in both flags."""
        if not stand_in:
            return cls(name=name, sha256=sha256)
        return cls(name=name, sha256=sha256, stand_in=True, declared=declared)


class ScoreRecord(Record):
    """One score of one output, naming the scorer that made it (quality's ok_score, open_score,
    error_score): `kind` at top level, so that no report can show a proxy under a VBench
    heading; `value` None unless the status is ok; `extra` the scorer's own figures, as JSON
    holds them."""

    model_config = ConfigDict(frozen=True)

    dimension: str
    kind: ScoreKind
    scorer: str
    version: str
    weights: list[WeightRecord]
    value: JsonNumber | None
    status: ScoreStatus
    detail: str
    extra: dict[str, Any]


class RelativeError(Record):
    """One dimension (or one kind's ``aggregate``) of a candidate against B0, e = |c - b| / |b|
    on the (normalised, when asked) scores (quality.relative_errors): ``open`` with no error when
    either side is open or in error, or the two were scored by different scorers."""

    model_config = ConfigDict(frozen=True)

    scorer: str  # "vbench.aggregate" / "proxy.aggregate" for an aggregate
    dimension: str  # "aggregate" for an aggregate
    kind: ScoreKind
    candidate: Number | None
    baseline: Number | None
    error: Number | None
    status: Literal["ok", "open"]
    detail: str


class GateError(RelativeError):
    """One gated dimension of one seed as the lossy gate judged it (judging.gate_error): its
    relative error, the threshold, the decision and the weights files that made the score."""

    threshold: Number
    gate: GateDecision
    weights: list[WeightRecord] | None = None


class FidelityGate(Record):
    below_minimum: list[str]
    open: list[str]


class FidelityFigures(Record):
    """Fidelity of a candidate's video to B0's, frame by frame (quality.compare_videos): the
    video's PSNR from the mean MSE over frames (inf only when every frame is identical), the
    per-frame PSNR (inf where identical) and SSIM curves, their minima and the SSIM mean."""

    model_config = ConfigDict(frozen=True)

    frames: int
    psnr_db: JsonNumber
    psnr_min_db: JsonNumber
    ssim_mean: Number
    ssim_min: Number
    identical_frames: int
    all_identical: bool
    psnr_per_frame: list[JsonNumber]
    ssim_per_frame: list[Number]


class NotCompared(Record):
    """A comparison that could not be made: why."""

    error: str


class AudioStatsRecord(Record):
    """One arm's soundtrack (quality.audio_stats): `samples` per channel; `loudness_lufs`
    BS.1770-4 integrated (-inf when every block is gated out); `peak_dbfs` the sample peak, not
    the true peak (-inf for digital silence); `clipping_ratio` of samples (all channels) at
    full scale; `silence_ratio` of 20 ms frames below -60 dBFS."""

    model_config = ConfigDict(frozen=True)

    sample_rate: JsonNumber
    channels: JsonNumber
    samples: JsonNumber
    duration_s: JsonNumber
    start_time_s: JsonNumber | None
    loudness_lufs: JsonNumber
    peak_dbfs: JsonNumber
    clipping_ratio: JsonNumber
    silence_ratio: JsonNumber


class AudioComparisonRecord(Record):
    """A candidate's audio against B0's (quality.compare_audio), with the scorers' version and
    ids: `lag_samples` > 0 when the candidate arrives later, `lag_peak_correlation` normalized
    (about -1: an inverted copy), `compared_samples` per channel after alignment and truncation,
    `mrstft` the mean over resolutions of spectral convergence + log-magnitude L1, the
    loudness and length differences candidate - baseline (length before alignment)."""

    model_config = ConfigDict(frozen=True)

    scorer_version: str
    length_slack_samples: int
    candidate: AudioStatsRecord
    baseline: AudioStatsRecord
    lag_samples: JsonNumber
    lag_ms: JsonNumber
    lag_peak_correlation: JsonNumber
    compared_samples: JsonNumber
    snr_db: JsonNumber
    si_sdr_db: JsonNumber
    lsd_db: JsonNumber
    mrstft: JsonNumber
    mrstft_spectral_convergence: JsonNumber
    mrstft_log_magnitude: JsonNumber
    loudness_diff_lu: JsonNumber
    length_mismatch_samples: JsonNumber
    length_within_aac_slack: bool
    start_time_diff_s: JsonNumber | None
    scorers: dict[str, str]


# -- the lossy gate's figures ---------------------------------------------------------------------


class LossySeed(Record):
    seed: int | None
    threshold: Number
    errors: list[GateError]
    # Why this seed's output was not scored (an earlier seed broke the gate): absent otherwise
    not_scored: str | None = None
    fidelity_gate: FidelityGate
    fidelity: FidelityFigures | NotCompared
    audio: AudioComparisonRecord | NotCompared


class LossyGateData(Record):
    threshold: Number
    normalized: bool
    worst: dict[str, Number]
    min_psnr_db: Number | None
    min_ssim: Number | None
    per_seed: list[LossySeed]
