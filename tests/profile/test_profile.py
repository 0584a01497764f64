"""Profiling, apart from timing: per track, B0 and each candidate profiled on an instance of its
own (never a timed one), one steady-state request after the protocol's warm-ups, and a candidate's
profile set beside B0's of the same track. `pytest -m profile` (with the track's marks for one
track); the reading is in evidence.json under `profiles` and in the report, the raw traces in the
run folder (profile_run.py).

A profile is evidence, not a gate: the scenario fails only when no profile could be made (its
reason is recorded), never because of what the profile shows."""

from __future__ import annotations

import pytest

from ref2va_accept.arms import Arms, profile_arm, with_comparison
from ref2va_accept.evidence import EvidenceBundle

pytestmark = pytest.mark.profile


def _profile(arms: Arms, evidence: EvidenceBundle, arm_id: str) -> None:
    folder = evidence.folder / "profiles" / arms.plan.track_id / arm_id
    entry = with_comparison(profile_arm(arms, arm_id, folder), evidence.record.profiles or [])
    evidence.add_profile(entry.json_dict())
    assert entry.status == "summarized", "; ".join(
        entry.problems + [f"rank {c.rank} {c.status}: {c.note}" for c in entry.coverage
                          if c.status != "profiled"])


def test_profile_baseline(arms: Arms, evidence: EvidenceBundle) -> None:
    _profile(arms, evidence, "b0")


def test_profile_candidate(arms: Arms, evidence: EvidenceBundle, candidate_id: str) -> None:
    _profile(arms, evidence, candidate_id)
