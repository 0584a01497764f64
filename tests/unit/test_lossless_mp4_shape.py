"""The lossless gate's reads of what came back, in this process (its runs with engines are
test_lossless_suite.py): the decoded MP4's shape, from the probe as the evidence records it.
(Not test_lossless.py: the suite's tests/quality/test_lossless.py has that module name.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from ref2va_accept.arms import Outcome
from ref2va_accept.judging import _lossless as lossless
from ref2va_accept.media import probe
from tests.media_samples import write_mp4
from tests.unit.timed_samples import timed_sample

pytestmark = pytest.mark.fast


def _outcome(media: dict[str, object] | None) -> Outcome:
    sample = timed_sample("s", "b0", "5s-lossless", "quality", 0, 42, ok=True)
    return Outcome(sample, media, ())


def test_the_decoded_shape_of_each_mp4_point_is_read_from_the_probe(tmp_path: Path) -> None:
    media = probe(write_mp4(tmp_path / "a.mp4", frames=12, size=(64, 48))).json_dict()
    found = _outcome(media)
    assert lossless._mp4_shape(found, "mp4.video") == [12, 48, 64, 3]
    channels, samples = lossless._mp4_shape(found, "mp4.audio") or [0, 0]
    assert channels == 2 and samples > 0
    assert lossless._mp4_shape(found, "dit.step000") is None


def test_no_shape_without_the_stream_or_the_probe(tmp_path: Path) -> None:
    silent = probe(write_mp4(tmp_path / "v.mp4", frames=6, audio=False)).json_dict()
    assert lossless._mp4_shape(_outcome(silent), "mp4.video") == [6, 48, 64, 3]
    assert lossless._mp4_shape(_outcome(silent), "mp4.audio") is None
    assert lossless._mp4_shape(_outcome(None), "mp4.video") is None
