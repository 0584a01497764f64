"""One rank's Chrome trace (torch's profiler: the reference engine on CPU, vLLM-Omni on CUDA) read
into a :class:`RankProfile`.

vLLM-Omni's torch profiler, and the reference engine's which copies its layout, write one file
per rank: ``<torch_profiler_dir>/<stamp>_<name>/trace_rank<N>.json`` (``.gz`` when compressed).
From it:

- **operators** by self time (an operator's time less that of the operators it called, on the
  same thread) with their input shapes and types: high DiT time alone does not say which
  operator dominates; device kernels by their own duration;
- **communication**: collectives and point-to-point operators (NCCL/HCCL, all-reduce,
  all-gather, reduce-scatter, broadcast, send/recv), by name, and how much of the window they
  ran with no other operator beside them (the overlap analysis's definitions, timeline.split);
- **host-device copies** (device memcpy events), or not applicable in a trace with no device
  activity;
- **memory**, each figure with its definition: the allocator's peak allocated and reserved bytes
  per device in the window (torch's ``[memory]`` events).

Perfetto (ui.perfetto.dev, "Open trace file") opens the raw files.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ref2va_accept.evidence import (
    MEMORY_DEFINITIONS,
    CollectiveOp,
    CommunicationProfile,
    CopiesProfile,
    CopyDirection,
    MemoryPeak,
    OperatorTime,
    OperatorTotal,
    RankProfile,
    StepTime,
)
from ref2va_accept.profiles._files import ProfileReadError, published
from ref2va_accept.profiles._timeline import ms, split

__all__ = ["COMMUNICATION", "TOP", "TRACE_FILE", "read_chrome_trace"]

TRACE_FILE = re.compile(r"^trace_rank(\d+)\.json(\.gz)?$")
COMMUNICATION = re.compile(r"nccl|hccl|hcom|all_?reduce|all_?gather|reduce_?scatter|broadcast|"
                           r"all_?to_?all|c10d::|\bsend\b|\brecv\b", re.I)
DEVICE_COPY = re.compile(r"memcpy|htod|dtoh|h2d|d2h", re.I)
DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime",
                               "cuda_driver", "ac2g"})
TOP = 15


def _events(path: Path) -> list[Mapping[str, Any]]:
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProfileReadError(f"{path.name}: not a readable Chrome trace ({exc})") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ProfileReadError(f"{path.name}: not a Chrome trace (no traceEvents list)")
    return [e for e in events if isinstance(e, dict)]


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":")) if value else ""


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


def _span(event: Mapping[str, Any]) -> tuple[float, float]:
    start = float(event.get("ts") or 0.0)
    return start, start + float(event.get("dur") or 0.0)


def _device_name(kind: Any) -> str:
    # torch's DeviceType numbers: 0 CPU, 1 CUDA; PrivateUse1 (20) is what torch_npu registers.
    return {0: "cpu", 1: "cuda", 20: "npu"}.get(kind if isinstance(kind, int) else -1,
                                               f"device-type-{kind}")


def read_chrome_trace(path: Path, rank: int, relative_to: Path) -> RankProfile:
    """One rank's Chrome trace as a RankProfile (ProfileReadError: not a readable trace)."""
    events = _events(path)
    spans = [e for e in events if e.get("ph") == "X" and e.get("dur") is not None]
    ops = [e for e in spans if e.get("cat") in ("cpu_op", "kernel")]
    host = [e for e in ops if e.get("cat") == "cpu_op"]
    self_iter = iter(_self_times(host))
    table: dict[tuple[str, str, str], list[Any]] = defaultdict(lambda: [0, 0.0, ""])
    for op in ops:
        own = next(self_iter) if op.get("cat") == "cpu_op" else float(op["dur"])
        args = op.get("args") or {}
        row = table[(str(op.get("cat")), str(op.get("name")), _json(args.get("Input Dims")))]
        row[0] += 1
        row[1] += own
        row[2] = row[2] or _json(args.get("Input type"))
    busy_us = sum(row[1] for row in table.values()) or 1.0
    top = sorted(table.items(), key=lambda item: -item[1][1])[:TOP]
    totals: dict[tuple[str, str], list[Any]] = defaultdict(lambda: [0, 0.0, []])
    for (cat, name, dims), (calls, own, _types) in table.items():
        total = totals[(cat, name)]
        total[0] += calls
        total[1] += own
        total[2].append((own, dims))
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
    window = ((min(_span(e)[0] for e in spans), max(_span(e)[1] for e in spans))
              if spans else (0.0, 0.0))
    comm_spans = [_span(e) for e in ops if COMMUNICATION.search(str(e.get("name")))]
    work_spans = [_span(e) for e in ops if not COMMUNICATION.search(str(e.get("name")))]
    parts = split(work_spans, comm_spans, window)
    copy_us = sum(float(e["dur"]) for e in copies)
    copy_parts = split([_span(e) for e in ops if e.get("cat") == "kernel"],
                       [_span(e) for e in copies], window)
    comm_us = sum(v[1] for v in communication.values())
    return RankProfile(
        rank=rank, source="chrome trace", files=[published(path, relative_to)],
        steps=["window"], window_ms=ms(parts["total"]), operators=len(ops),
        top_operators=[OperatorTime(
            kind="device kernel" if cat == "kernel" else "host operator", name=name, core=None,
            input_shapes=dims, input_dtypes=types or None, output_shapes=None,
            calls=int(calls), ms=ms(own), share=round(own / busy_us, 4), kernels=[])
            for (cat, name, dims), (calls, own, types) in top],
        operator_totals=[OperatorTotal(
            kind="device kernel" if cat == "kernel" else "host operator", name=name, core=None,
            calls=int(calls), ms=ms(own),
            shapes=[d for _, d in sorted(shapes, key=lambda s: -s[0])[:3]])
            for (cat, name), (calls, own, shapes) in sorted(totals.items(),
                                                            key=lambda kv: -kv[1][1])],
        framework_operators=[],
        communication=CommunicationProfile(
            status="measured", ms=ms(comm_us),
            not_overlapped_ms=ms(parts["other_not_overlapped"]),
            share_not_overlapped=(round(parts["other_not_overlapped"] / parts["total"], 4)
                                  if parts["total"] else None),
            ops=[CollectiveOp(name=name, calls=int(calls), elapse_ms=ms(total),
                              transit_ms=None, wait_ms=None, synchronization_ms=None)
                 for name, (calls, total) in sorted(communication.items(),
                                                    key=lambda kv: -kv[1][1])],
            slowest_link=None,
            note=("operators a collective or point-to-point pattern names, by their span on "
                  "the host; wait, transit and per-link figures are in torch_npu's "
                  "communication files, not in a Chrome trace"
                  + ("" if communication else "; none in this trace"))),
        copies=(CopiesProfile(
            status="measured",
            directions=[CopyDirection(direction="other", count=len(copies), bytes=None,
                                      ms=ms(copy_us))],
            ms=ms(copy_us),
            share=round(copy_us / parts["total"], 4) if parts["total"] else None,
            overlapped_ms=ms(copy_parts["overlapped"]),
            note="device memcpy events; a Chrome trace gives neither direction nor size")
            if device else CopiesProfile(
            status="not_applicable", directions=[], ms=None, share=None, overlapped_ms=None,
            note="no device activity in this trace (a CPU-only engine): nothing is copied "
                 "between host and device")),
        step_times=[StepTime(
            step="window", total_ms=ms(parts["total"]), computing_ms=ms(parts["computing"]),
            communication_not_overlapped_ms=ms(parts["other_not_overlapped"]),
            overlapped_ms=ms(parts["overlapped"]),
            copies_ms=ms(copy_us) if device else None, free_ms=ms(parts["free"]))]
        if spans else [],
        memory=[MemoryPeak(figure=figure, device=f"{name}:{index}" if index >= 0 else name,
                           bytes=peaks[0 if figure == "allocated_peak" else 1],
                           definition=MEMORY_DEFINITIONS[figure])
                for (name, index), peaks in sorted(memory.items())
                for figure in ("allocated_peak", "reserved_peak")],
        largest_allocations=[], problems=[], notes=[])
