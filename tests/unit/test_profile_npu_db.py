"""torch_npu's database export, read per rank (profiles/_npu_db.py, folders.py): written by
scripts/npu_profile_db.py from the same timeline as the text fixtures, it gives the same figures
as the text export of the same profile; a database cut short, not SQLite, or without a table or a
column is one clear line and an open profile, never a traceback; a table the export leaves out
(analysis.db, MEMCPY_INFO) leaves its figures unknown with a note, never a zero."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ref2va_accept.evidence import RankProfile
from ref2va_accept.profiles import ProfileReadError, read_profiles
from ref2va_accept.profiles._npu_db import read_npu_db
from ref2va_accept.profiles._npu_text import read_npu_text
from tests.npu_fixtures import load, text

pytestmark = pytest.mark.fast

# The figures both exports must agree on, block by block.
SAME = ("steps", "window_ms", "operators", "top_operators", "operator_totals", "communication",
        "copies", "step_times", "memory", "largest_allocations")
fixtures = text
db_fixtures = load("npu_profile_db")
Variant = fixtures.Variant


def _db_file(folder: Path, rank: int) -> Path:
    return folder / "ASCEND_PROFILER_OUTPUT" / f"ascend_pytorch_profiler_{rank}.db"


def _text(tmp_path: Path, variant: Any, rank: int = 0) -> RankProfile:
    folder = fixtures.write_rank(tmp_path / "text", rank, variant)
    return read_npu_text(folder, rank, tmp_path)


def _db(tmp_path: Path, variant: Any, rank: int = 0) -> RankProfile:
    folder = db_fixtures.write_rank_db(tmp_path / "db", rank, variant)
    return read_npu_db(_db_file(folder, rank), rank, tmp_path)


def _one_rank(**planted: Any) -> Any:
    return dataclasses.replace(Variant(ranks=(0,)), **planted)


@pytest.mark.parametrize("arm", ["b0", "candidate"])
def test_the_database_gives_the_text_exports_figures(tmp_path: Path, arm: str) -> None:
    variant = Variant() if arm == "b0" else fixtures.candidate()
    for rank in variant.ranks:
        text = _text(tmp_path / str(rank), variant, rank)
        db = _db(tmp_path / str(rank), variant, rank)
        assert (db.source, db.rank, db.problems) == ("torch_npu db", rank, [])
        for block in SAME:
            assert getattr(db, block) == getattr(text, block), (arm, rank, block)
        # Figures, not two empty blocks agreeing.
        top = db.top_operators[0]
        assert (top.name, top.core, top.input_shapes, top.calls) == (
            "FlashAttentionScore", "MIX_AIC", "1,40,4096,128;1,40,16384,128;1,40,16384,128",
            8 if arm == "b0" else 4)
        (allreduce,) = db.communication.ops
        assert (allreduce.name, allreduce.calls, allreduce.elapse_ms, allreduce.transit_ms) == (
            "hcom_allReduce_", 8, 7.2, 4.32)
        assert db.communication.slowest_link is not None
        assert [(d.direction, d.count, d.bytes, d.ms) for d in db.copies.directions] == [
            ("H2D", 2, 2 * 64 * 2**20, 0.3)]
        assert [s.step for s in db.step_times] == ["1"] and db.step_times[0].copies_ms == 0.3
        assert db.memory[0].device == f"NPU:{rank} (PTA)"
        assert db.largest_allocations[0].bytes == 327680 * 1024
        # What the database export does not hold is said, never a zero.
        assert db.framework_operators == [] and text.framework_operators != []
        assert [n for n in db.notes if "framework operators" in n] == db.notes != []
        assert {f.file.rsplit("/", 1)[-1] for f in db.files} == {
            f"ascend_pytorch_profiler_{rank}.db", "analysis.db"}
    if arm == "candidate":
        assert "Sub" in {o.name for o in db.operator_totals}


def test_four_database_ranks_read_as_a_folder(tmp_path: Path) -> None:
    folder = db_fixtures.write_arm_db(tmp_path / "arm", Variant())
    read = read_profiles(folder, tmp_path, None, analyse=False)
    assert read.complete and read.ranks_found == [0, 1, 2, 3]
    assert [(c.rank, c.status, c.steps, c.note) for c in read.coverage] == [
        (r, "profiled", ["1"], None) for r in range(4)]
    assert {r.source for r in read.ranks} == {"torch_npu db"}
    assert all(not f.file.startswith("/") for r in read.ranks for f in r.files)


def test_a_database_cut_short_is_one_line_naming_it(tmp_path: Path) -> None:
    name = "ascend_pytorch_profiler_0.db"
    db_fixtures.write_arm_db(tmp_path, Variant(truncate=name))
    read = read_profiles(tmp_path, tmp_path, [0, 1, 2, 3], analyse=False)
    assert not read.complete
    (cut,) = [c for c in read.coverage if c.status != "profiled"]
    assert cut.rank == 0 and cut.status == "unreadable" and cut.note is not None
    assert cut.note.startswith(f"{name}: not a readable SQLite database (")
    assert "\n" not in cut.note and "Traceback" not in cut.note
    assert read.ranks_found == [1, 2, 3]


def test_a_file_that_is_not_sqlite_is_one_line(tmp_path: Path) -> None:
    folder = db_fixtures.write_rank_db(tmp_path, 0, _one_rank())
    _db_file(folder, 0).write_text("Component,Timestamp(us)\nPTA,1\n")
    with pytest.raises(ProfileReadError, match=r"^ascend_pytorch_profiler_0\.db: not a "
                                               r"readable SQLite database \(.*\)$"):
        read_npu_db(_db_file(folder, 0), 0, tmp_path)


@pytest.mark.parametrize("table", ["TASK", "COMPUTE_TASK_INFO", "STRING_IDS"])
def test_a_database_without_a_table_it_needs_names_it(tmp_path: Path, table: str) -> None:
    db_fixtures.write_rank_db(tmp_path, 0, _one_rank(skip=(table,)))
    read = read_profiles(tmp_path, tmp_path, [0], analyse=False)
    (coverage,) = read.coverage
    assert coverage.status == "unreadable" and coverage.note == (
        f"ascend_pytorch_profiler_0.db: table {table} missing: not torch_npu's database export "
        "as this reader knows it")


def test_a_missing_column_is_named_with_its_table(tmp_path: Path) -> None:
    folder = db_fixtures.write_rank_db(tmp_path, 0, _one_rank())
    with sqlite3.connect(_db_file(folder, 0)) as con:
        con.execute("ALTER TABLE COMMUNICATION_OP DROP COLUMN endNs")
    con.close()
    rank = read_npu_db(_db_file(folder, 0), 0, tmp_path)
    (problem,) = rank.problems
    assert problem.startswith("ascend_pytorch_profiler_0.db: table COMMUNICATION_OP has no "
                              "column(s) 'endNs'") and problem.endswith("(communication not read)")
    assert rank.top_operators  # the other blocks are read


def test_without_analysis_db_no_step_split_and_communication_from_its_operations(
        tmp_path: Path) -> None:
    variant = _one_rank(skip=("analysis.db",))
    text, db = _text(tmp_path, _one_rank()), _db(tmp_path, variant)
    assert db.problems == [] and db.step_times == []
    assert "analysis.db: missing (no overlap analysis): no step split" in db.notes
    assert "analysis.db: missing (no per-link figures)" in db.notes
    comm = db.communication
    assert comm.status == "measured" and comm.slowest_link is None
    assert comm.not_overlapped_ms is None and comm.share_not_overlapped is None
    assert [(o.name, o.calls, o.elapse_ms) for o in comm.ops] == [
        (o.name, o.calls, o.elapse_ms) for o in text.communication.ops]
    assert [(o.transit_ms, o.wait_ms, o.synchronization_ms) for o in comm.ops] == [
        (None, None, None)]
    assert comm.note is not None and "elapse from COMMUNICATION_OP" in comm.note
    assert db.copies.share is None and db.copies.ms == text.copies.ms
    assert db.top_operators == text.top_operators and db.steps == ["1"]


def test_copies_without_memcpy_info_have_no_direction_nor_size(tmp_path: Path) -> None:
    variant = _one_rank(copy_args=False)
    text, db = _text(tmp_path, variant), _db(tmp_path, variant)
    assert [(d.direction, d.count, d.bytes, d.ms) for d in db.copies.directions] == [
        ("other", 2, None, 0.3)]
    assert db.copies.directions == text.copies.directions
    assert db.copies.note is not None and "no MEMCPY_INFO" in db.copies.note
    assert db.copies.overlapped_ms == text.copies.overlapped_ms


def test_a_copy_operation_the_database_does_not_name_is_other_with_a_note(
        tmp_path: Path) -> None:
    db = _db(tmp_path, _one_rank(skip=("ENUM_MEMCPY_OPERATION",)))
    assert [(d.direction, d.count, d.bytes) for d in db.copies.directions] == [
        ("other", 2, 2 * 64 * 2**20)]
    assert db.copies.note is not None and "ENUM_MEMCPY_OPERATION" in db.copies.note


def test_a_cell_that_is_not_a_number_is_named_and_the_rank_open(tmp_path: Path) -> None:
    folder = db_fixtures.write_rank_db(tmp_path, 0, _one_rank())
    with sqlite3.connect(_db_file(folder, 0)) as con:
        con.execute("UPDATE TASK SET startNs = 'soon' WHERE rowid = 1")
    con.close()
    rank = read_npu_db(_db_file(folder, 0), 0, tmp_path)
    line = "ascend_pytorch_profiler_0.db: TASK row 1, column 'startNs': 'soon' is not a number"
    assert rank.problems == [f"{line} (operators not read)", f"{line} (copies not read)"]
    assert rank.top_operators == [] and rank.copies.status == "not_recorded"
    assert rank.communication.status == "measured"  # the other blocks are read


def test_an_analysis_db_that_is_not_sqlite_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    folder = db_fixtures.write_rank_db(tmp_path, 0, _one_rank())
    (folder / "ASCEND_PROFILER_OUTPUT" / "analysis.db").write_bytes(b"\x00" * 4096)
    rank = read_npu_db(_db_file(folder, 0), 0, tmp_path)
    assert rank.problems and all(p.startswith("analysis.db: not a readable SQLite database (")
                                 for p in rank.problems)
    assert rank.step_times == [] and rank.top_operators != []
