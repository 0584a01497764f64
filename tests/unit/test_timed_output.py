"""Timed output equals watched output (MLPerf TEST01 idea), from the run's typed outcomes."""

from __future__ import annotations

from pathlib import Path

from ref2va_accept.client import Sample
from ref2va_accept.timed_output import timed_output_check
from ref2va_accept.workload import Outcome, OutcomeLog
from tests.unit.test_cli import _mp4

T = "5s-lossless"


def _outcome(tmp_path: Path, kind: str, frames: int, n: int, seed: int = 42) -> Outcome:
    path = _mp4(tmp_path / f"{kind}-{frames}-{n}.mp4", frames=frames)
    sample = Sample(f"{kind}{n}", "c1", T, kind, n, seed, "t", ok=True)
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
    # Either scenario may run first; the one that completes the pair records the check.
    log = OutcomeLog()
    log.add(_outcome(tmp_path, "measured", 124, 0))
    assert timed_output_check(log, T, "c1") is None
    log.add(_outcome(tmp_path, "quality", 124, 1, seed=7))  # another seed: no pair yet
    assert timed_output_check(log, T, "c1") is None
    log.add(_outcome(tmp_path, "quality", 124, 2))
    check = timed_output_check(log, T, "c1")
    assert check is not None and check.status == "pass"
    assert timed_output_check(log, T, "other") is None  # another candidate's requests
