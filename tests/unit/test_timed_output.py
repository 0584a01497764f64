"""Timed output equals watched output (MLPerf TEST01 idea), from the run's typed outcomes; on a
lossy track, within what the lossy contract tolerates of the scored output; judged once, at
verdict time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ref2va_accept.arms import Outcome, OutcomeLog
from ref2va_accept.campaign import LossyGate, load_campaign
from ref2va_accept.judging import (
    DEFAULT_MIN_PSNR_DB,
    judge_timed_outputs,
    lossy_timed_output_check,
    timed_output_check,
)
from ref2va_accept.judging import _timed_output as timed_output
from ref2va_accept.planning import TrackPlan, plan_campaign
from tests.media_samples import write_mp4
from tests.unit.timed_samples import timed_sample

pytestmark = pytest.mark.fast

T = "5s-lossless"


def _outcome(tmp_path: Path, kind: str, frames: int, n: int, seed: int = 42) -> Outcome:
    path = write_mp4(tmp_path / f"{kind}-{frames}-{n}.mp4", frames=frames)
    sample = timed_sample(f"{kind}{n}", "c1", T, kind, n, seed, ok=True)
    return Outcome(sample, {"video": {}}, (), path)


def _log(tmp_path: Path, measured_frames: int) -> OutcomeLog:
    log = OutcomeLog()
    for n, (kind, frames) in enumerate((("quality", 124), ("measured", measured_frames),
                                        ("measured", 124))):
        log.add(_outcome(tmp_path, kind, frames, n))
    return log


def test_identical_timed_outputs_pass(tmp_path: Path) -> None:
    check = timed_output_check(_log(tmp_path, 124), T, "c1")
    assert check is not None and check.status == "pass" and "2 timed outputs" in check.detail


def test_a_timed_output_that_differs_fails_naming_it(tmp_path: Path) -> None:
    check = timed_output_check(_log(tmp_path, 120), T, "c1")
    assert check is not None and check.status == "fail"
    assert check.reason == "output_differs_when_unobserved" and "measured-120" in check.detail


def test_until_both_sides_ran_nothing_is_judged(tmp_path: Path) -> None:
    # Either scenario may run first: nothing is judged until both have.
    log = OutcomeLog()
    log.add(_outcome(tmp_path, "measured", 124, 0))
    assert timed_output_check(log, T, "c1") is None
    log.add(_outcome(tmp_path, "quality", 124, 1, seed=7))  # another seed: no pair yet
    assert timed_output_check(log, T, "c1") is None
    log.add(_outcome(tmp_path, "quality", 124, 2))
    check = timed_output_check(log, T, "c1")
    assert check is not None and check.status == "pass"
    assert timed_output_check(log, T, "other") is None  # another candidate's requests


# ---- lossy: the timed outputs against the scored ones, within what the contract tolerates ----

def _lossy_mp4(path: Path, noise: int = 0, audio_noise: float = 0.0, frames: int = 24) -> Path:
    """A textured clip (so that H.264 keeps small differences) with a tone; `noise` adds a
    seeded +-noise pattern to every pixel, `audio_noise` white noise to the tone."""
    rng = np.random.default_rng(1)
    base = rng.integers(40, 200, (48, 64, 3)).astype(np.int16)
    jitter = rng.integers(-noise, noise + 1, (48, 64, 3)) if noise else 0
    pictures = np.stack([np.clip(np.roll(base, i, axis=1) + jitter, 0, 255).astype(np.uint8)
                         for i in range(frames)])
    t = np.arange(round(32000 * frames / 24)) / 32000
    tone = 0.3 * np.sin(2 * np.pi * 440 * t)
    tone = tone + audio_noise * np.random.default_rng(2).standard_normal(t.size)
    # Lossless x264: what differs is the frames, not the codec.
    return write_mp4(path, pictures=pictures, samples=np.stack([tone, tone]).astype(np.float32),
                     pix_fmt="yuv444p", codec_options={"qp": "0"})


def _lossy_log(tmp_path: Path, **timed: Any) -> OutcomeLog:
    log = OutcomeLog()
    for n, (kind, changes) in enumerate((("quality", {}), ("measured", timed))):
        path = _lossy_mp4(tmp_path / f"{kind}-{n}.mp4", **changes)
        sample = timed_sample(f"{kind}{n}", "c1", "5s-lossy", kind, n, 42, ok=True)
        log.add(Outcome(sample, {"video": {}}, (), path))
    return log


def _gate(**frozen: float) -> LossyGate:
    return LossyGate.model_validate({"gated": ["vbench.temporal_flickering"], **frozen})


def test_lossy_identical_timed_output_passes(tmp_path: Path) -> None:
    check = lossy_timed_output_check(_lossy_log(tmp_path), "5s-lossy", "c1", _gate())
    assert check is not None and check.status == "pass" and check.name == "timed_output_fidelity"
    assert check.data.pairs[0].identical is True and "1 identical" in check.detail
    assert check.json_dict()["data"]["rule"]["min_psnr_db"] == DEFAULT_MIN_PSNR_DB


def test_lossy_timed_output_within_the_contract_passes_with_its_figures(tmp_path: Path) -> None:
    # +-1 on every pixel: what a nondeterministic reduction does (46.7 dB through H.264).
    check = lossy_timed_output_check(_lossy_log(tmp_path, noise=1), "5s-lossy", "c1", _gate())
    assert check is not None and check.status == "pass", check.detail
    pair = check.json_dict()["data"]["pairs"][0]
    assert pair["identical"] is False and pair["psnr_db"] >= DEFAULT_MIN_PSNR_DB
    assert "0 identical, 1 within PSNR 40 dB (default)" in check.detail


def test_lossy_timed_output_beyond_the_contract_fails(tmp_path: Path) -> None:
    # +-25 on every pixel: another path (24.7 dB), far below 40 dB.
    check = lossy_timed_output_check(_lossy_log(tmp_path, noise=25), "5s-lossy", "c1", _gate())
    assert check is not None and check.status == "fail"
    assert check.reason == "output_differs_when_unobserved"
    assert "PSNR" in check.detail and "< 40 dB" in check.detail
    assert check.json_dict()["data"]["pairs"][0]["psnr_db"] < DEFAULT_MIN_PSNR_DB


def test_lossy_rule_takes_the_frozen_psnr_minimum(tmp_path: Path) -> None:
    log = _lossy_log(tmp_path, noise=25)
    frozen = lossy_timed_output_check(log, "5s-lossy", "c1", _gate(min_psnr_db=20.0))
    assert frozen is not None and frozen.status == "pass", frozen.detail
    assert frozen.json_dict()["data"]["rule"]["min_psnr_from"] == "lossy_gate.min_psnr_db"
    strict = lossy_timed_output_check(log, "5s-lossy", "c1", _gate(min_ssim=0.999))
    assert strict is not None and strict.status == "fail" and "SSIM" in strict.detail


def test_lossy_timed_audio_beyond_the_contract_fails(tmp_path: Path) -> None:
    check = lossy_timed_output_check(_lossy_log(tmp_path, audio_noise=0.1), "5s-lossy", "c1",
                                     _gate())
    assert check is not None and check.status == "fail" and "audio SNR" in check.detail


def test_lossy_timed_output_that_cannot_be_compared_fails(tmp_path: Path) -> None:
    check = lossy_timed_output_check(_lossy_log(tmp_path, frames=20), "5s-lossy", "c1", _gate())
    assert check is not None and check.status == "fail" and "not comparable" in check.detail


def test_lossy_until_both_sides_ran_nothing_is_judged(tmp_path: Path) -> None:
    log = OutcomeLog()
    sample = timed_sample("m", "c1", "5s-lossy", "measured", 0, 42, ok=True)
    log.add(Outcome(sample, {"video": {}}, (), _lossy_mp4(tmp_path / "m.mp4")))
    assert lossy_timed_output_check(log, "5s-lossy", "c1", _gate()) is None


# ---- at verdict time: once per candidate, every candidate of the tracks judged ----------------

def test_at_verdict_time_each_candidate_with_both_sides_is_judged_once(tmp_path: Path) -> None:
    plans = plan_campaign(load_campaign(Path(__file__).resolve().parents[2]
                                        / "fixtures/campaigns/reference.yaml"))
    first, second, *_ = [a.id for a in plans[T].candidates]
    log = OutcomeLog()
    for n, (arm, kind, frames) in enumerate(((first, "quality", 124), (first, "measured", 120),
                                             (second, "measured", 124))):
        path = write_mp4(tmp_path / f"{arm}-{kind}.mp4", frames=frames)
        log.add(Outcome(timed_sample(f"s{n}", arm, T, kind, n, 42, ok=True), {"video": {}}, (),
                        path))
    found, problems = judge_timed_outputs(plans, log, [], [T])
    # The first candidate's pair differs; the second has no quality output yet: not judged.
    assert [(c.arm, c.name, c.status, c.reason) for c in found] == [
        (first, "timed_output", "fail", "output_differs_when_unobserved")] and problems == []
    assert judge_timed_outputs(plans, log, found, [T]) == ([], [])  # recorded: never again
    assert judge_timed_outputs(plans, log, [], ["5s-lossy"]) == ([], [])  # another track's
    log.add(Outcome(timed_sample("s3", second, T, "quality", 3, 42, ok=True), {"video": {}}, (),
                    write_mp4(tmp_path / "second-quality.mp4", frames=124)))
    again, _ = judge_timed_outputs(plans, log, found, [T])
    assert [(c.arm, c.status) for c in again] == [(second, "pass")]


def test_a_comparison_that_raises_leaves_its_check_open_and_the_others_judged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plans = plan_campaign(load_campaign(Path(__file__).resolve().parents[2]
                                        / "fixtures/campaigns/reference.yaml"))
    first, second, *_ = [a.id for a in plans[T].candidates]
    judged = timed_output.timed_output_for

    def comparing(plan: TrackPlan, outcomes: OutcomeLog, candidate: str) -> Any:
        if candidate == first:
            raise OSError("disk gone")
        return judged(plan, outcomes, candidate)

    monkeypatch.setattr(timed_output, "timed_output_for", comparing)
    log = OutcomeLog()
    for n, kind in enumerate(("quality", "measured")):
        path = write_mp4(tmp_path / f"{kind}.mp4", frames=124)
        log.add(Outcome(timed_sample(f"s{n}", second, T, kind, n, 42, ok=True), {"video": {}}, (),
                        path))
    found, problems = judge_timed_outputs(plans, log, [], [T])
    assert [(c.arm, c.status) for c in found] == [(second, "pass")]
    assert problems == [f"{T}/{first}: timed outputs not compared (OSError: disk gone); "
                        "timed_output stays open"]
