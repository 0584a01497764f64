"""Lossy tracks: relative score error against B0 below the frozen threshold (docs/quality.md).

B0's own spread is measured first (same seeds on two independent instances); each candidate is
then scored with the same seeds and every gated dimension compared with B0, two-sided. Fidelity
and audio against B0 are reported beside the gate. A failed gate fails the test with the
dimensions that broke; a gate that cannot decide fails it too, marked INCONCLUSIVE or OPEN.
"""

from __future__ import annotations

import pytest

from ref2va_accept.arms import Arms
from ref2va_accept.judging import Baselines, LossyGateRunner, fail_unless_passed

TRACK_CLASS = "lossy"
pytestmark = pytest.mark.quality


def test_baseline_variability_leaves_room_to_decide(arms: Arms, baselines: Baselines) -> None:
    fail_unless_passed(LossyGateRunner(baselines).baseline(arms))


def test_candidate_within_the_lossy_gate(arms: Arms, candidate_id: str,
                                         baselines: Baselines) -> None:
    fail_unless_passed(LossyGateRunner(baselines).candidate(arms, candidate_id))
