"""B0 beside a candidate (profiles/_compare.py): which operators got faster or slower, which are
gone or new, how communication, copies, the step's split and memory moved; per rank, over the
ranks both profiled only. Planted: an arm against itself moves nothing; a rank only one arm has
is named and left out; no common rank compares nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from ref2va_accept.evidence import Profile
from ref2va_accept.profiles import compare, read_profiles
from tests.npu_fixtures import COMMITTED, text

pytestmark = pytest.mark.fast


def _profile(folder: Path, arm: str, ranks: list[int]) -> Profile:
    return read_profiles(folder, folder.parent, ranks).profile(track="t", arm=arm,
                                                               expected=ranks, instance="i")


B0 = _profile(COMMITTED / "b0", "b0", [0, 1, 2, 3])
CANDIDATE = _profile(COMMITTED / "candidate", "c1", [0, 1, 2, 3])


def test_an_arm_beside_itself_moves_nothing() -> None:
    same = compare(B0, B0)
    assert same.ranks_compared == [0, 1, 2, 3] and same.notes == []
    assert {o.change for o in same.operators} == {"same"}
    assert all(d.delta == 0 for d in same.step_time + same.communication + same.copies
               + same.memory)


def test_the_candidates_mechanism_shows_where_its_time_went() -> None:
    c = compare(B0, CANDIDATE)
    changes = {o.name: o.change for o in c.operators}
    assert changes == {"FlashAttentionScore": "faster", "MatMulV3": "faster", "Sub": "new",
                       "Cast": "gone", "Add": "same", "RmsNorm": "same",
                       "RotaryPositionEmbedding": "same"}
    attention = c.operators[0]
    assert attention.name == "FlashAttentionScore" and attention.ratio == 0.5
    step = {d.figure: d for d in c.step_time}
    assert step["computing (ms per step)"].delta < -15
    assert step["communication not overlapped (ms per step)"].delta == 0
    memory = {d.figure: d for d in c.memory}
    assert memory["allocated_peak (MiB, the rank's largest)"].delta == 1500


def test_a_rank_one_arm_lacks_is_named_and_left_out(tmp_path: Path) -> None:
    partial = _profile(text.write_arm(tmp_path / "c", text.candidate(), (0, 1, 3)), "c1",
                       [0, 1, 2, 3])
    c = compare(B0, partial)
    assert c.ranks_compared == [0, 1, 3]
    assert c.notes == ["rank(s) 2 profiled by b0 only: left out of every mean"]


def test_no_rank_in_common_compares_nothing(tmp_path: Path) -> None:
    other = _profile(text.write_arm(tmp_path / "c", text.Variant(ranks=(4, 5))), "c1", [4, 5])
    c = compare(B0, other)
    assert (c.ranks_compared, c.operators, c.step_time) == ([], [], [])
    assert "no rank was profiled by both arms: nothing to compare" in c.notes
