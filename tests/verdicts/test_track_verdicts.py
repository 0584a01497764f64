"""The per-track verdict of each candidate, from every check this run recorded, as the outcome.

Runs after the acceptance, perf and quality scenarios (the plugin orders verdict-marked tests
last): supported passes; failed fails; inconclusive fails too, marked INCONCLUSIVE with its
reasons and open checks, since a track that was not shown to meet its target is not a pass.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ref2va_accept.evidence import TrackVerdict
from ref2va_accept.judging import GateResult, fail_unless_passed

pytestmark = pytest.mark.verdict


def test_track_verdict(track_id: str, candidate_id: str,
                       track_verdict: Callable[[str, str], TrackVerdict]) -> None:
    fail_unless_passed(GateResult.from_verdict(track_verdict(track_id, candidate_id)))
