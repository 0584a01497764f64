"""torch_npu's analysed text output, read per rank (profiles/_npu_text.py, folders.py): on profiles
in its exact formats (scripts/npu_profile_fixtures.py says where each column comes from), for one
and four ranks, with a rank missing, a file cut short, a column not known, communication-heavy
and offload-heavy steps, profiler level 0 and an older CANN. A bad or partial profile is one
clear line and an open profile, never a crash or a silent zero."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ref2va_accept.profiles import read_profiles
from ref2va_accept.profiles._npu_text import read_npu_text
from tests.npu_fixtures import COMMITTED, text

pytestmark = pytest.mark.fast

Variant = text.Variant


def _arm(tmp_path: Path, variant: object, present: tuple[int, ...] | None = None) -> Path:
    return text.write_arm(tmp_path / "arm", variant, present)


def _rank(tmp_path: Path, **planted: object) -> object:
    variant = dataclasses.replace(Variant(ranks=(0,)), **planted)
    folder = text.write_rank(tmp_path, 0, variant)
    return read_npu_text(folder, 0, tmp_path)


def test_the_committed_fixtures_are_what_the_script_writes() -> None:
    assert text.main(["--check", str(COMMITTED)]) == 0


def test_four_ranks_read_with_operators_shapes_communication_copies_and_memory(
        tmp_path: Path) -> None:
    read = read_profiles(COMMITTED / "b0", COMMITTED, [0, 1, 2, 3])
    assert read.complete and read.ranks_found == [0, 1, 2, 3]
    assert [(c.rank, c.status, c.steps) for c in read.coverage] == [
        (r, "profiled", ["1"]) for r in range(4)]
    rank = read.ranks[0]
    assert rank.source == "torch_npu text" and rank.problems == [] and rank.notes == []
    top = rank.top_operators[0]
    assert (top.name, top.core, top.input_shapes, top.input_dtypes, top.calls, top.ms) == (
        "FlashAttentionScore", "MIX_AIC", "1,40,4096,128;1,40,16384,128;1,40,16384,128",
        "DT_BF16;DT_BF16;DT_BF16", 8, 16.8)
    assert top.kernels == ["aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore"]
    assert top.output_shapes == "1,40,4096,128"
    # Two shapes of one kernel type are two rows; its total sums them, costliest shape first.
    matmul = [o for o in rank.top_operators if o.name == "MatMulV3"]
    assert [o.input_shapes for o in matmul] == ["4096,5120;5120,5120", "4096,5120;5120,13824"]
    (total,) = [o for o in rank.operator_totals if o.name == "MatMulV3"]
    assert total.calls == 40 and total.ms == round(13.44 + 7.84, 3)
    assert rank.framework_operators[0].name == "npu::npu_fusion_attention"
    # Communication: the all-reduces (not among the compute kernels), and the step's share.
    assert all(o.core != "COMMUNICATION" for o in rank.top_operators)
    comm = rank.communication
    (allreduce,) = comm.ops
    assert (allreduce.name, allreduce.calls, allreduce.elapse_ms) == ("hcom_allReduce_", 8, 7.2)
    assert (allreduce.transit_ms, allreduce.wait_ms) == (4.32, 2.16)
    (step,) = rank.step_times
    assert comm.not_overlapped_ms == step.communication_not_overlapped_ms
    assert comm.share_not_overlapped == round(
        float(step.communication_not_overlapped_ms) / float(step.total_ms), 4)
    assert step.total_ms == round(float(step.computing_ms)
                                  + float(step.communication_not_overlapped_ms)
                                  + float(step.free_ms), 3)
    assert comm.slowest_link is not None and comm.slowest_link.link == "0-3"
    assert comm.slowest_link.transport == "HCCS"
    # Copies from the timeline: host to device, with sizes, beside compute.
    copies = rank.copies
    assert [(d.direction, d.count, d.bytes, d.ms) for d in copies.directions] == [
        ("H2D", 2, 2 * 64 * 2**20, 0.3)]
    assert copies.overlapped_ms == 0.3 and step.copies_ms == 0.3
    # Memory: torch_npu's allocator (PTA) only, each figure with its definition.
    assert [(m.figure, m.device, m.bytes) for m in rank.memory] == [
        ("allocated_peak", "NPU:0 (PTA)", 30000 * 2**20),
        ("reserved_peak", "NPU:0 (PTA)", 36000 * 2**20),
        ("active_peak", "NPU:0 (PTA)", 30064 * 2**20)]
    assert all(m.definition for m in rank.memory)
    assert rank.largest_allocations[0].name == "npu::npu_fusion_attention"
    assert rank.largest_allocations[0].bytes == 327680 * 1024
    names = {f.file.rsplit("/", 1)[-1] for f in rank.files}
    assert {"kernel_details.csv", "step_trace_time.csv", "communication.json",
            "trace_view.json", "memory_record.csv"} <= names
    assert all(not f.file.startswith("/") for f in rank.files)


def test_one_rank(tmp_path: Path) -> None:
    read = read_profiles(_arm(tmp_path, Variant(ranks=(0,))), tmp_path, None)
    assert read.complete and read.ranks_found == [0]


def test_a_missing_rank_is_open_never_averaged_away(tmp_path: Path) -> None:
    folder = _arm(tmp_path, Variant(), present=(0, 1, 3))
    read = read_profiles(folder, tmp_path, [0, 1, 2, 3])
    assert not read.complete and read.ranks_found == [0, 1, 3]
    assert [(c.rank, c.status) for c in read.coverage if c.status != "profiled"] == [
        (2, "missing")]
    # Without the expected ranks, the profiles' own metadata names all four: still open.
    read = read_profiles(folder, tmp_path, None)
    assert [c.rank for c in read.coverage if c.status == "missing"] == [2]


@pytest.mark.parametrize("name", ["kernel_details.csv", "memory_record.csv",
                                  "step_trace_time.csv", "communication.json",
                                  "trace_view.json"])
def test_a_file_cut_short_is_one_line_and_the_rank_open(tmp_path: Path, name: str) -> None:
    rank = _rank(tmp_path, truncate=name)
    (problem,) = rank.problems
    assert problem.startswith(f"{name}: ") and "not read)" in problem
    assert "cut short" in problem
    read = read_profiles(tmp_path, tmp_path, [0])
    assert read.coverage[0].status == "unreadable" and not read.complete


def test_an_unknown_column_is_named_and_ignored(tmp_path: Path) -> None:
    rank = _rank(tmp_path, extra_column="Warp Speed(us)")
    assert rank.problems == []
    assert rank.notes == ["kernel_details.csv: column(s) 'Warp Speed(us)' not known to this "
                          "reader: ignored"]
    assert rank.top_operators[0].name == "FlashAttentionScore"


def test_a_required_column_missing_is_one_line(tmp_path: Path) -> None:
    folder = text.write_rank(tmp_path, 0, Variant(ranks=(0,)))
    path = folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    path.write_text(path.read_text().replace("Duration(us)", "Task Duration(us)", 1))
    rank = read_npu_text(folder, 0, tmp_path)
    (problem,) = rank.problems
    assert problem.startswith("kernel_details.csv: column(s) 'Duration(us)' missing")
    assert rank.top_operators == [] and rank.operators == 0


def test_communication_heavy(tmp_path: Path) -> None:
    light = _rank(tmp_path / "light")
    heavy = _rank(tmp_path / "heavy", allreduce_us=9000.0, overlapped_fraction=0.05,
                  slow_link="0-1")
    assert heavy.communication.share_not_overlapped > 0.5 > light.communication.share_not_overlapped
    assert heavy.communication.ops[0].elapse_ms == 72.0


def test_offload_heavy(tmp_path: Path) -> None:
    rank = _rank(tmp_path, copies_per_step=40, copy_us=800.0)
    copies = rank.copies
    assert copies.ms == 32.0 and copies.share is not None and copies.share > 0.3
    assert [(d.direction, d.count) for d in copies.directions] == [("H2D", 40)]
    assert rank.step_times[0].copies_ms is not None and rank.step_times[0].copies_ms > 20


def test_copies_without_direction_or_size_say_so(tmp_path: Path) -> None:
    rank = _rank(tmp_path, copy_args=False)
    (direction,) = rank.copies.directions
    assert (direction.direction, direction.bytes) == ("other", None)
    assert "without a direction" in str(rank.copies.note) and "no sizes" in str(rank.copies.note)


def test_profiler_level_0_no_shapes_and_no_step_split(tmp_path: Path) -> None:
    rank = _rank(tmp_path, level0=True, skip=("communication.json",
                                              "communication_matrix.json"))
    assert rank.problems == ["communication.json: missing while kernel_details.csv holds 8 "
                             "communication task(s)"]
    assert any("no shapes" in n for n in rank.notes)
    assert any("no step split" in n for n in rank.notes)
    assert rank.step_times == [] and rank.steps == ["window"]
    assert rank.top_operators[0].input_shapes == ""
    # Level 0 leaves Type and Accelerator Core N/A: the kernel's name stands for its type, and
    # its shapes merge (the matmul's two shapes are one row).
    top = rank.top_operators[0]
    assert (top.name, top.core, top.calls) == ("aclnnMatmul_MatMulV3Common_MatMulV3", None, 40)


def test_an_older_cann(tmp_path: Path) -> None:
    rank = _rank(tmp_path, old_cann=True)
    assert rank.problems == [] and rank.communication.ops[0].calls == 8
    assert all(o.core != "HCCL" for o in rank.top_operators)


def test_missing_optional_files_leave_their_block_not_recorded(tmp_path: Path) -> None:
    rank = _rank(tmp_path, skip=("trace_view.json", "memory_record.csv",
                                 "operator_memory.csv", "operator_details.csv"))
    assert rank.problems == []
    assert rank.copies.status == "not_recorded" and rank.copies.ms is None
    assert "trace_view.json" in str(rank.copies.note)
    assert rank.memory == [] and any("memory_record.csv: missing" in n for n in rank.notes)
    assert rank.framework_operators == []


def test_a_rank_profiled_twice_is_not_guessed(tmp_path: Path) -> None:
    text.write_rank(tmp_path / "a", 0, Variant(ranks=(0,)))
    text.write_rank(tmp_path / "b", 0, Variant(ranks=(0,)))
    read = read_profiles(tmp_path, tmp_path, [0])
    assert read.coverage[0].status == "unreadable"
    assert "profiled more than once" in str(read.coverage[0].note)


def test_a_folder_without_its_rank_file(tmp_path: Path) -> None:
    folder = text.write_rank(tmp_path, 0, Variant(ranks=(0,)))
    (folder / "profiler_info_0.json").unlink()
    read = read_profiles(tmp_path, tmp_path, [0])
    assert read.problems == [f"{folder.name}: no profiler_info_<rank>.json: its rank is not "
                             "known (the profiler did not finish writing?)"]
    assert read.coverage[0].status == "missing"


def test_a_rank_lacking_a_step_another_profiled_is_open(tmp_path: Path) -> None:
    two = dataclasses.replace(Variant(ranks=(0, 1)), steps=("1", "2"))
    text.write_rank(tmp_path, 0, two)
    text.write_rank(tmp_path, 1, dataclasses.replace(two, steps=("1",)))
    read = read_profiles(tmp_path, tmp_path, [0, 1])
    assert [(c.rank, c.steps) for c in read.coverage] == [(0, ["1", "2"]), (1, ["1"])]
    assert read.problems == ["rank 1 lacks step(s) 2 that another rank profiled: its figures "
                             "cover fewer steps"]
    assert not read.complete
    # Two steps: one split, and the copies, per step.
    assert [s.step for s in read.ranks[0].step_times] == ["1", "2"]
    assert all(s.copies_ms == 0.3 for s in read.ranks[0].step_times)
