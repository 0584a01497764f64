"""Per track, the campaign's B0 returns a complete MP4 from a freshly started engine."""

from __future__ import annotations

import pytest

from ref2va_accept.arms import Arms
from ref2va_accept.core import Check

pytestmark = pytest.mark.acceptance


def test_b0_returns_complete_mp4(arms: Arms, track_id: str) -> None:
    engine = arms.start("b0")
    outcome = arms.request(engine, "b0", kind="smoke", index=0, record_check=Check.B0_MEDIA)
    assert outcome.sample.ok, outcome.explain()
    assert outcome.complete, outcome.explain()
    assert outcome.sample.latency_s is not None and outcome.sample.latency_s > 0
