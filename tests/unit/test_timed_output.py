"""Timed output equals watched output (MLPerf TEST01 idea), from what the evidence recorded."""

from __future__ import annotations

from pathlib import Path

from ref2va_accept.evidence import EvidenceBundle
from ref2va_accept.lossless import timed_output_check
from ref2va_accept.sanitize import Sanitizer
from tests.unit.test_cli import _mp4

T = "5s-lossless"


def _bundle(tmp_path: Path, measured_frames: int) -> EvidenceBundle:
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    for kind, frames in (("quality", 124), ("measured", measured_frames), ("measured", 124)):
        path = bundle.media_path(T, "c1", f"{kind}-{frames}-{len(bundle.data['samples'])}.mp4")
        _mp4(path, frames=frames)
        bundle.add_sample({"track": T, "arm": "c1", "kind": kind, "seed": 42, "ok": True,
                           "media_file": bundle.relative(path), "sample_id": kind})
    return bundle


def test_identical_timed_outputs_pass(tmp_path: Path) -> None:
    check = timed_output_check(_bundle(tmp_path, 124), T, "c1")
    assert check.status == "pass" and "2 timed outputs" in check.detail


def test_a_timed_output_that_differs_fails_naming_it(tmp_path: Path) -> None:
    check = timed_output_check(_bundle(tmp_path, 120), T, "c1")
    assert check.status == "fail" and check.reason == "output_differs_when_unobserved"
    assert "measured-120" in check.detail


def test_without_timed_requests_the_check_is_open(tmp_path: Path) -> None:
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    assert timed_output_check(bundle, T, "c1").status == "open"
