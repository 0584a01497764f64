"""Latency: each candidate against its matched B0 in the same run, under the frozen protocol.

Supported needs the upper end of the ratio interval at or below the target ratio; a candidate
defect fails the test; a run that cannot be evaluated (interference, B0 failure, drift) fails it
too, marked INCONCLUSIVE, since it is neither a pass nor something to skip.
"""

from __future__ import annotations

import pytest

from ref2va_accept.arms import Arms
from ref2va_accept.judging import LatencyProtocol, LatencySchedules, fail_unless_passed

pytestmark = pytest.mark.perf


def test_latency_against_matched_b0(arms: Arms, candidate_id: str,
                                    latency_schedules: LatencySchedules) -> None:
    fail_unless_passed(LatencyProtocol(latency_schedules).candidate(arms, candidate_id))
