"""Lossless tracks: strict bit-exactness at the frozen comparison points (quality.md).

B0 must first reproduce itself on two independent instances; each candidate is then compared
with it point by point, audited for approximate paths, and checked watched against unobserved.
A failed check fails the test with its reason code; an inconclusive track fails it too, visibly
marked INCONCLUSIVE, since it is neither a pass nor something to skip.
"""

from __future__ import annotations

import pytest

from ref2va_accept.lossless import run_baseline, run_candidate
from ref2va_accept.plugin import Baselines
from ref2va_accept.workload import Arms

TRACK_CLASS = "lossless"
pytestmark = pytest.mark.quality


def test_baseline_reproduces_itself(arms: Arms, track_id: str,
                                    baselines: Baselines) -> None:
    baseline = baselines.get_or_make("lossless", track_id, lambda: run_baseline(arms, track_id))
    if not baseline.usable:
        pytest.fail(f"INCONCLUSIVE: {baseline.explain()}", pytrace=False)


def test_candidate_is_bit_exact(arms: Arms, track_id: str, candidate_id: str,
                                baselines: Baselines) -> None:
    baseline = baselines.get_or_make("lossless", track_id, lambda: run_baseline(arms, track_id))
    if not baseline.usable:
        pytest.fail(f"INCONCLUSIVE: B0 cannot be judged against: {baseline.explain()}",
                    pytrace=False)
    failed = [c for c in run_candidate(arms, track_id, candidate_id, baseline)
              if c.status != "pass"]
    if failed:
        pytest.fail("FAILED: " + "; ".join(f"{c.reason}: {c.detail}" for c in failed),
                    pytrace=False)
