"""What a profiled request's Chrome traces say (profiles/_chrome.py, folders.py): operators by self
time with their shapes, communication and the step's split, host-device copies, memory with
definitions, and which ranks produced one."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from ref2va_accept.evidence import MEMORY_DEFINITIONS
from ref2va_accept.profiles import ProfileReadError, read_profiles
from ref2va_accept.profiles._chrome import read_chrome_trace

pytestmark = pytest.mark.fast


def _op(name: str, ts: float, dur: float, dims: Any = None, cat: str = "cpu_op",
        tid: int = 1) -> dict[str, Any]:
    event: dict[str, Any] = {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid,
                             "ts": ts, "dur": dur}
    if dims is not None:
        event["args"] = {"Input Dims": dims}
    return event


def _memory(ts: float, allocated: int, reserved: int, device: int = 0,
            index: int = -1) -> dict[str, Any]:
    return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 7, "tid": 1,
            "ts": ts, "args": {"Total Allocated": allocated, "Total Reserved": reserved,
                               "Device Type": device, "Device Id": index, "Bytes": 1}}


CPU_TRACE = [
    # linear (100 us) calls addmm (70 us), which calls copy_ (10 us): self 30, 60, 10.
    _op("aten::linear", 0, 100, [[2, 8], [4, 8]]), _op("aten::addmm", 10, 70, [[4], [2, 8]]),
    _op("aten::copy_", 20, 10, [[2, 4], [2, 4]]),
    # The same operator at other shapes is another row; on another thread, not nested.
    _op("aten::addmm", 200, 40, [[16], [2, 8]]), _op("aten::addmm", 50, 5, [[4], [2, 8]], tid=2),
    _op("c10d::allreduce_", 300, 25, [[4]]),
    _memory(5, 1000, 0), _memory(15, 5000, 0), _memory(90, 2000, 0),
    {"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "python"}},
]


def _write(path: Path, events: list[dict[str, Any]], *, gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"schemaVersion": 1, "traceEvents": events})
    if gz:
        with gzip.open(path, "wt") as handle:
            handle.write(text)
    else:
        path.write_text(text)
    return path


def test_operators_by_self_time_with_their_shapes(tmp_path: Path) -> None:
    profile = read_chrome_trace(_write(tmp_path / "trace_rank0.json", CPU_TRACE), 0, tmp_path)
    top = {(o.name, o.input_shapes): o for o in profile.top_operators}
    addmm = top[("aten::addmm", "[[4],[2,8]]")]
    assert addmm.calls == 2 and addmm.ms == 0.065 and addmm.kind == "host operator"
    assert top[("aten::linear", "[[2,8],[4,8]]")].ms == 0.03
    assert top[("aten::addmm", "[[16],[2,8]]")].ms == 0.04
    assert [o.name for o in profile.top_operators][:2] == ["aten::addmm", "aten::addmm"]
    assert profile.operators == 6 and profile.window_ms == 0.325
    # Every operator over all its shapes: the table a comparison reads.
    totals = {o.name: o for o in profile.operator_totals}
    assert totals["aten::addmm"].calls == 3 and totals["aten::addmm"].ms == 0.105
    assert totals["aten::addmm"].shapes == ["[[4],[2,8]]", "[[16],[2,8]]"]
    comm = profile.communication
    assert (comm.status, comm.ms, [(o.name, o.calls, o.elapse_ms) for o in comm.ops]) == (
        "measured", 0.025, [("c10d::allreduce_", 1, 0.025)])
    assert comm.ops[0].wait_ms is None  # not in a Chrome trace
    # The window split as the overlap analysis splits it: the all-reduce ran alone.
    (step,) = profile.step_times
    assert (step.total_ms, step.computing_ms, step.communication_not_overlapped_ms,
            step.overlapped_ms, step.free_ms) == (0.325, 0.14, 0.025, 0.0, 0.16)
    assert comm.not_overlapped_ms == 0.025 and comm.share_not_overlapped == round(25 / 325, 4)
    # No device activity: copies are not applicable, not zero.
    assert profile.copies.status == "not_applicable" and profile.copies.ms is None
    assert [(m.figure, m.device, m.bytes, m.definition) for m in profile.memory] == [
        ("allocated_peak", "cpu", 5000, MEMORY_DEFINITIONS["allocated_peak"]),
        ("reserved_peak", "cpu", 0, MEMORY_DEFINITIONS["reserved_peak"])]
    assert profile.files[0].file == "trace_rank0.json" and len(profile.files[0].sha256) == 64


def test_device_kernels_copies_and_memory_per_device(tmp_path: Path) -> None:
    events = [*CPU_TRACE,
              _op("ampere_sgemm", 30, 50, cat="kernel", tid=99),
              _op("Memcpy HtoD (Pageable -> Device)", 12, 8, cat="gpu_memcpy", tid=99),
              _op("Memcpy DtoH (Device -> Pageable)", 95, 4, cat="gpu_memcpy", tid=99)]
    events.append(_memory(40, 7 * 2**20, 8 * 2**20, device=1, index=0))
    profile = read_chrome_trace(_write(tmp_path / "trace_rank0.json.gz", events, gz=True), 0,
                                tmp_path)
    copies = profile.copies
    assert (copies.status, copies.ms, [(d.direction, d.count, d.bytes) for d in copies.directions]
            ) == ("measured", 0.012, [("other", 2, None)])
    assert copies.overlapped_ms == 0.0  # neither copy ran beside the kernel
    kernel = next(o for o in profile.top_operators if o.name == "ampere_sgemm")
    assert kernel.kind == "device kernel" and kernel.ms == 0.05
    cuda = {m.figure: m.bytes for m in profile.memory if m.device == "cuda:0"}
    assert cuda == {"allocated_peak": 7 * 2**20, "reserved_peak": 8 * 2**20}


def test_ranks_found_missing_and_unanalysed_npu_folders(tmp_path: Path) -> None:
    traces = tmp_path / "run" / "profiles" / "traces"
    _write(traces / "20261201-000000_stage_0" / "trace_rank0.json", CPU_TRACE)
    _write(traces / "20261201-000000_stage_0" / "trace_rank2.json", CPU_TRACE)
    read = read_profiles(traces, tmp_path / "run", list(range(4)))
    assert read.ranks_found == [0, 2] and not read.complete
    assert [(c.rank, c.status) for c in read.coverage] == [
        (0, "profiled"), (1, "missing"), (2, "profiled"), (3, "missing")]
    assert read.ranks[0].files[0].file == (
        "profiles/traces/20261201-000000_stage_0/trace_rank0.json")
    # A torch_npu folder not analysed, where torch_npu does not import: open, with the command.
    raw = traces / "node_123_20261201000000000_ascend_pt"
    raw.mkdir()
    (raw / "profiler_info_1.json").write_text("{}")
    read = read_profiles(traces, tmp_path / "run", [0, 1, 2])
    (one,) = [c for c in read.coverage if c.rank == 1]
    assert one.status == "not_analysed" and "torch_npu does not import here" in str(one.note)
    assert "from torch_npu.profiler.profiler import analyse" in str(one.note)
    assert not read.complete
    assert read_profiles(tmp_path / "none", tmp_path, [0]).coverage[0].status == "missing"


@pytest.mark.parametrize("content", ["{not json", "[1, 2", '{"traceEvents": 3}'])
def test_a_trace_that_cannot_be_read_is_one_line(tmp_path: Path, content: str) -> None:
    path = tmp_path / "trace_rank0.json"
    path.write_text(content)
    with pytest.raises(ProfileReadError, match=r"trace_rank0\.json: "):
        read_chrome_trace(path, 0, tmp_path)
    read = read_profiles(tmp_path, tmp_path, [0])
    (coverage,) = read.coverage
    assert coverage.status == "unreadable" and str(coverage.note).startswith("trace_rank0.json: ")
    assert read.ranks == [] and not read.complete
