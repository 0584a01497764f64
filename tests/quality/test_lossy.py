"""Lossy tracks: relative score error against B0 below the frozen threshold (quality.md).

B0's own spread is measured first (same seeds on two independent instances); each candidate is
then scored with the same seeds and every gated dimension compared with B0, two-sided. Fidelity
and audio against B0 are reported beside the gate. A failed gate fails the test with the
dimensions that broke; a gate that cannot decide fails it too, marked INCONCLUSIVE or OPEN.
"""

from __future__ import annotations

import pytest

from ref2va_accept.lossy import run_baseline, run_candidate
from ref2va_accept.plugin import Baselines
from ref2va_accept.workload import Arms

TRACK_CLASS = "lossy"
pytestmark = pytest.mark.quality


def test_baseline_variability_leaves_room_to_decide(
    arms: Arms, track_id: str, baselines: Baselines
) -> None:
    baseline = baselines.get_or_make("lossy", track_id, lambda: run_baseline(arms, track_id))
    if not baseline.usable:
        pytest.fail(f"INCONCLUSIVE: {baseline.explain()}", pytrace=False)


def test_candidate_within_the_lossy_gate(
    arms: Arms, track_id: str, candidate_id: str, baselines: Baselines
) -> None:
    baseline = baselines.get_or_make("lossy", track_id, lambda: run_baseline(arms, track_id))
    if not baseline.usable:
        pytest.fail(f"INCONCLUSIVE: B0 cannot be judged against: {baseline.explain()}",
                    pytrace=False)
    check = run_candidate(arms, track_id, candidate_id, baseline)
    if check.status == "open":
        pytest.fail(f"OPEN: {check.detail}", pytrace=False)
    if check.status == "fail":
        pytest.fail(f"FAILED: {check.reason}: {check.detail}", pytrace=False)
