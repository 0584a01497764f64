"""What a profiled request's Chrome traces say (trace_summary.py): operators by self time with
their shapes, communication, host-device copies, memory with definitions, ranks."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from ref2va_accept.arms import MEMORY_DEFINITIONS, TraceError, summarize_trace, summarize_traces

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
    summary = summarize_trace(_write(tmp_path / "trace_rank0.json", CPU_TRACE))
    top = {(o["name"], o["input_dims"]): o for o in summary["top_operators"]}
    addmm = top[("aten::addmm", "[[4],[2,8]]")]
    assert addmm["calls"] == 2 and addmm["self_ms"] == 0.065 and addmm["total_ms"] == 0.075
    assert top[("aten::linear", "[[2,8],[4,8]]")]["self_ms"] == 0.03
    assert top[("aten::addmm", "[[16],[2,8]]")]["self_ms"] == 0.04
    assert [o["name"] for o in summary["top_operators"]][:2] == ["aten::addmm", "aten::addmm"]
    assert summary["operators"] == 6 and summary["window_ms"] == 0.325
    assert summary["communication"] == {"ms": 0.025, "ops": [
        {"name": "c10d::allreduce_", "calls": 1, "ms": 0.025}]}
    # No device activity: copies are not applicable, not zero.
    assert summary["host_device_copies"]["status"] == "not_applicable"
    assert summary["memory"] == [
        {"figure": "allocated_peak", "device": "cpu", "bytes": 5000,
         "definition": MEMORY_DEFINITIONS["allocated_peak"]},
        {"figure": "reserved_peak", "device": "cpu", "bytes": 0,
         "definition": MEMORY_DEFINITIONS["reserved_peak"]}]


def test_device_kernels_copies_and_memory_per_device(tmp_path: Path) -> None:
    events = [*CPU_TRACE,
              _op("ampere_sgemm", 30, 50, cat="kernel", tid=99),
              _op("Memcpy HtoD (Pageable -> Device)", 12, 8, cat="gpu_memcpy", tid=99),
              _op("Memcpy DtoH (Device -> Pageable)", 95, 4, cat="gpu_memcpy", tid=99),
              _memory(40, 7 * 2**20, 8 * 2**20, device=1, index=0)]
    summary = summarize_trace(_write(tmp_path / "trace_rank0.json.gz", events, gz=True))
    assert summary["host_device_copies"] == {"status": "measured", "ms": 0.012, "count": 2}
    kernel = next(o for o in summary["top_operators"] if o["name"] == "ampere_sgemm")
    assert kernel["kind"] == "device kernel" and kernel["self_ms"] == 0.05
    cuda = {m["figure"]: m["bytes"] for m in summary["memory"] if m["device"] == "cuda:0"}
    assert cuda == {"allocated_peak": 7 * 2**20, "reserved_peak": 8 * 2**20}


def test_ranks_found_missing_and_unanalysed_npu_folders(tmp_path: Path) -> None:
    traces = tmp_path / "run" / "profiles" / "traces"
    _write(traces / "20261201-000000_stage_0" / "trace_rank0.json", CPU_TRACE)
    _write(traces / "20261201-000000_stage_0" / "trace_rank2.json", CPU_TRACE)
    result = summarize_traces(traces, tmp_path / "run", range(4))
    assert result["ranks_found"] == [0, 2] and result["status"] == "open"
    assert result["problems"] == ["no trace from rank(s) 1, 3"]
    assert result["traces"][0]["file"] == (
        "profiles/traces/20261201-000000_stage_0/trace_rank0.json")
    assert len(result["traces"][0]["sha256"]) == 64
    (traces / "node_123_ascend_pt").mkdir()
    result = summarize_traces(traces, tmp_path / "run", [0, 2])
    assert result["npu_raw"] == ["profiles/traces/node_123_ascend_pt"]
    assert "not yet analysed" in result["problems"][0] and result["status"] == "open"
    assert summarize_traces(tmp_path / "none", tmp_path, [0])["status"] == "open"


@pytest.mark.parametrize("content", ["{not json", "[1, 2", '{"traceEvents": 3}'])
def test_a_trace_that_cannot_be_read_is_one_line(tmp_path: Path, content: str) -> None:
    path = tmp_path / "trace_rank0.json"
    path.write_text(content)
    with pytest.raises(TraceError, match=r"trace_rank0\.json: "):
        summarize_trace(path)
    result = summarize_traces(tmp_path, tmp_path, [0])
    assert result["status"] == "open" and result["traces"][0]["summary"] is None
