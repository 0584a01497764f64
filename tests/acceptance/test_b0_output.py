"""Per track, the campaign's B0 returns a complete MP4 from a freshly started engine."""

from __future__ import annotations

import pytest

from ref2va_accept.workload import Arms

pytestmark = pytest.mark.acceptance


def test_b0_returns_complete_mp4(arms: Arms, track_id: str) -> None:
    engine = arms.start(track_id, "b0")
    outcome = arms.request(engine, track_id, "b0", kind="smoke", index=0, record_check="b0_media")
    assert outcome.sample.ok, outcome.explain()
    assert outcome.complete, outcome.explain()
    assert outcome.sample.latency_s is not None and outcome.sample.latency_s > 0
