"""Lossless tracks: strict bit-exactness at the frozen comparison points (docs/quality.md).

B0 must first reproduce itself on two independent instances; each candidate is then compared
with it point by point, audited for approximate paths, and checked watched against unobserved.
A failed check fails the test with its reason code; an inconclusive track fails it too, visibly
marked INCONCLUSIVE, since it is neither a pass nor something to skip.
"""

from __future__ import annotations

import pytest

from ref2va_accept.arms import Arms
from ref2va_accept.judging import Baselines, LosslessGateRunner, fail_unless_passed

TRACK_CLASS = "lossless"
pytestmark = pytest.mark.quality


def test_baseline_reproduces_itself(arms: Arms, baselines: Baselines) -> None:
    fail_unless_passed(LosslessGateRunner(baselines).baseline(arms))


def test_candidate_is_bit_exact(arms: Arms, candidate_id: str, baselines: Baselines) -> None:
    fail_unless_passed(LosslessGateRunner(baselines).candidate(arms, candidate_id))
