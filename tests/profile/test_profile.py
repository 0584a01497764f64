"""Profiling, apart from timing: per track, B0 and each candidate profiled on an instance of its
own (never a timed one), one steady-state request after the protocol's warm-ups. `pytest -m
profile` (with the track's marks for one track); the summary is in evidence.json under `profiles`
and in the report, the raw traces in the run folder (profile_run.py).

A profile is evidence, not a gate: the scenario fails only when no profile could be made (its
reason is recorded), never because of what the profile shows."""

from __future__ import annotations

import pytest

from ref2va_accept.arms import Arms, profile_arm
from ref2va_accept.evidence import EvidenceBundle

pytestmark = pytest.mark.profile


def _profile(arms: Arms, evidence: EvidenceBundle, arm_id: str) -> None:
    folder = evidence.folder / "profiles" / arms.plan.track_id / arm_id
    entry = profile_arm(arms, arm_id, folder)
    evidence.add_profile(entry)
    assert entry["status"] == "summarized", "; ".join(entry["problems"])


def test_profile_baseline(arms: Arms, evidence: EvidenceBundle) -> None:
    _profile(arms, evidence, "b0")


def test_profile_candidate(arms: Arms, evidence: EvidenceBundle, candidate_id: str) -> None:
    _profile(arms, evidence, candidate_id)
