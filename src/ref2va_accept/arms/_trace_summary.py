"""What a profiled request's torch traces say, summarized for the evidence (the traces stay too).

vLLM-Omni's torch profiler (and the reference engine's, which copies its layout) writes one
Chrome-trace file per rank: ``<torch_profiler_dir>/<stamp>_<name>/trace_rank<N>.json`` (``.gz``
when compressed); on NPU, torch_npu writes ``*_ascend_pt`` folders that need its offline analysis
before they read as Chrome traces. Per trace file this module gives:

- **top operators** by self time (an operator's time less that of the operators it called, on
  the same thread), each with its input shapes, calls and total time: high DiT time alone does
  not say which operator dominates;
- **communication** time (collectives and point-to-point: NCCL/HCCL, all-reduce, all-gather,
  reduce-scatter, broadcast, send/recv), by operator;
- **host-device copies** (device memcpy events, H2D/D2H), or `not_applicable` in a trace with no
  device activity;
- **memory**, each figure with its definition: the allocator's peak of allocated and of reserved
  bytes per device during the profiled window (torch's ``[memory]`` events);
- which ranks produced a trace, against the ranks expected.

Perfetto (ui.perfetto.dev, "Open trace file") opens the raw files.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ref2va_accept.core import Ref2VAError, file_sha256

__all__ = ["MEMORY_DEFINITIONS", "TraceError", "find_traces", "summarize_trace",
           "summarize_traces"]

TRACE_FILE = re.compile(r"^trace_rank(\d+)\.json(\.gz)?$")
NPU_RAW = re.compile(r"_ascend_pt$")
COMMUNICATION = re.compile(r"nccl|hccl|all_?reduce|all_?gather|reduce_?scatter|broadcast|"
                           r"all_?to_?all|c10d::|\bsend\b|\brecv\b", re.I)
DEVICE_COPY = re.compile(r"memcpy|htod|dtoh|h2d|d2h", re.I)
DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime",
                               "cuda_driver", "ac2g"})
TOP = 15
MEMORY_DEFINITIONS = {
    "allocated_peak": "the largest 'Total Allocated' of torch's [memory] events in the profiled "
                      "window: bytes held by live tensors through torch's allocator on that "
                      "device (not the device's whole use: other processes, the runtime and "
                      "fragmentation are not in it)",
    "reserved_peak": "the largest 'Total Reserved' of the same events: what torch's caching "
                     "allocator held from the device, allocated or cached for reuse (0 for the "
                     "CPU allocator, which caches nothing)",
}


class TraceError(Ref2VAError):
    """A trace file that cannot be read as a Chrome trace."""


def find_traces(folder: Path) -> tuple[list[tuple[int, Path]], list[Path]]:
    """Chrome traces under ``folder`` by rank, and torch_npu's raw folders (not yet analysed)."""
    traces = sorted(((int(m.group(1)), p) for p in folder.rglob("*")
                     if p.is_file() and (m := TRACE_FILE.match(p.name))), key=lambda t: t[0])
    raw = sorted(p for p in folder.rglob("*") if p.is_dir() and NPU_RAW.search(p.name))
    return traces, raw


def _events(path: Path) -> list[Mapping[str, Any]]:
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(f"{path.name}: not a readable Chrome trace ({exc})") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(f"{path.name}: no traceEvents")
    return [e for e in events if isinstance(e, dict)]


def _shapes(event: Mapping[str, Any]) -> str:
    dims = (event.get("args") or {}).get("Input Dims")
    if not dims:
        return ""
    return json.dumps(dims, separators=(",", ":"))


def _self_times(ops: Sequence[Mapping[str, Any]]) -> list[float]:
    """Each operator's duration less its callees' on the same thread (µs), in ``ops`` order."""
    self_us = [float(op.get("dur") or 0.0) for op in ops]
    by_thread: dict[tuple[Any, Any], list[int]] = defaultdict(list)
    for index, op in enumerate(ops):
        by_thread[(op.get("pid"), op.get("tid"))].append(index)
    for indices in by_thread.values():
        indices.sort(key=lambda i: (float(ops[i].get("ts") or 0.0),
                                    -float(ops[i].get("dur") or 0.0)))
        stack: list[tuple[float, int]] = []  # (end, index)
        for i in indices:
            start = float(ops[i].get("ts") or 0.0)
            end = start + float(ops[i].get("dur") or 0.0)
            while stack and stack[-1][0] <= start:
                stack.pop()
            if stack:
                self_us[stack[-1][1]] -= end - start
            stack.append((end, i))
    return [max(0.0, t) for t in self_us]


def _ms(us: float) -> float:
    return round(us / 1000.0, 3)


def summarize_trace(path: Path) -> dict[str, Any]:
    """One rank's trace: top operators, communication, host-device copies, memory."""
    events = _events(path)
    spans = [e for e in events if e.get("ph") == "X" and e.get("dur") is not None]
    ops = [e for e in spans if e.get("cat") in ("cpu_op", "kernel")]
    self_us = _self_times([e for e in ops if e.get("cat") == "cpu_op"])
    self_iter = iter(self_us)
    table: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for op in ops:
        own = next(self_iter) if op.get("cat") == "cpu_op" else float(op["dur"])
        row = table[(str(op.get("cat")), str(op.get("name")), _shapes(op))]
        row[0] += 1
        row[1] += own
        row[2] += float(op["dur"])
    top = sorted(table.items(), key=lambda item: -item[1][1])[:TOP]
    communication: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for op in ops:
        if COMMUNICATION.search(str(op.get("name"))):
            communication[str(op.get("name"))][0] += 1
            communication[str(op.get("name"))][1] += float(op["dur"])
    device = any(e.get("cat") in DEVICE_CATEGORIES for e in spans)
    copies = [e for e in spans if e.get("cat") == "gpu_memcpy"
              or (e.get("cat") in DEVICE_CATEGORIES and DEVICE_COPY.search(str(e.get("name"))))]
    memory: dict[tuple[str, int], list[int]] = {}
    for event in events:
        if event.get("name") != "[memory]":
            continue
        args = event.get("args") or {}
        key = (_device_name(args.get("Device Type")), int(args.get("Device Id", -1)))
        peaks = memory.setdefault(key, [0, 0])
        peaks[0] = max(peaks[0], int(args.get("Total Allocated") or 0))
        peaks[1] = max(peaks[1], int(args.get("Total Reserved") or 0))
    starts = [float(e.get("ts") or 0.0) for e in spans]
    ends = [float(e.get("ts") or 0.0) + float(e.get("dur") or 0.0) for e in spans]
    return {
        "window_ms": _ms(max(ends) - min(starts)) if spans else 0.0,
        "operators": len(ops),
        "top_operators": [{"kind": "device kernel" if cat == "kernel" else "host operator",
                           "name": name, "input_dims": dims, "calls": int(calls),
                           "self_ms": _ms(own), "total_ms": _ms(total)}
                          for (cat, name, dims), (calls, own, total) in top],
        "communication": {"ms": _ms(sum(v[1] for v in communication.values())),
                          "ops": [{"name": name, "calls": int(calls), "ms": _ms(total)}
                                  for name, (calls, total) in sorted(
                                      communication.items(), key=lambda kv: -kv[1][1])]},
        "host_device_copies": (
            {"status": "measured", "ms": _ms(sum(float(e["dur"]) for e in copies)),
             "count": len(copies)} if device else
            {"status": "not_applicable", "ms": None, "count": 0,
             "note": "no device activity in this trace (a CPU-only engine): nothing is copied "
                     "between host and device"}),
        "memory": [{"figure": figure, "device": f"{name}:{index}" if index >= 0 else name,
                    "bytes": peaks[0 if figure == "allocated_peak" else 1],
                    "definition": MEMORY_DEFINITIONS[figure]}
                   for (name, index), peaks in sorted(memory.items())
                   for figure in ("allocated_peak", "reserved_peak")],
    }


def _device_name(kind: Any) -> str:
    # torch's DeviceType numbers: 0 CPU, 1 CUDA; PrivateUse1 (20) is what torch_npu registers.
    return {0: "cpu", 1: "cuda", 20: "npu"}.get(kind if isinstance(kind, int) else -1,
                                               f"device-type-{kind}")


def summarize_traces(folder: Path, relative_to: Path, expected_ranks: Iterable[int]
                     ) -> dict[str, Any]:
    """Every trace under ``folder``: per rank its summary and file (relative to
    ``relative_to``, with its sha256), and which expected ranks produced none."""
    traces, raw = find_traces(folder)
    ranks = []
    problems = []
    for rank, path in traces:
        entry: dict[str, Any] = {"rank": rank, "file": path.relative_to(relative_to).as_posix(),
                                 "bytes": path.stat().st_size, "sha256": file_sha256(path)}
        try:
            entry["summary"] = summarize_trace(path)
        except TraceError as exc:
            entry["summary"] = None
            problems.append(str(exc))
        ranks.append(entry)
    expected = sorted(set(expected_ranks))
    found = sorted({rank for rank, _ in traces})
    missing = [r for r in expected if r not in found]
    if raw:
        problems.append(f"{len(raw)} torch_npu trace folder(s) not yet analysed (run "
                        "torch_npu.profiler.profiler.analyse on them, then summarize): "
                        + ", ".join(p.relative_to(relative_to).as_posix() for p in raw))
    if missing:
        problems.append(f"no trace from rank(s) {', '.join(map(str, missing))}")
    return {"ranks_expected": expected, "ranks_found": found, "traces": ranks,
            "npu_raw": [p.relative_to(relative_to).as_posix() for p in raw],
            "problems": problems,
            "status": "summarized" if ranks and not problems else "open"}
