"""Latency: each candidate against its matched B0 in the same run, under the frozen protocol.

Supported needs the upper end of the ratio interval at or below the target ratio; a candidate
defect fails the test; a run that cannot be evaluated (interference, B0 failure, drift) fails it
too, marked INCONCLUSIVE, since it is neither a pass nor something to skip.
"""

from __future__ import annotations

import pytest

from ref2va_accept.latency import run_latency
from ref2va_accept.workload import Arms

pytestmark = pytest.mark.perf


def test_latency_against_matched_b0(arms: Arms, track_id: str, candidate_id: str) -> None:
    checks = run_latency(arms, track_id, candidate_id)
    failed = [c for c in checks if c.status == "fail"]
    if failed:
        pytest.fail("; ".join(f"{c.reason}: {c.detail}" for c in failed), pytrace=False)
    latency = next(c for c in checks if c.name == "latency_ratio")
    verdict = latency.data["verdict"]
    if verdict == "failed":
        pytest.fail(f"FAILED: {latency.detail}", pytrace=False)
    if verdict == "inconclusive":
        pytest.fail(f"INCONCLUSIVE: {latency.detail}", pytrace=False)
