"""One rank's torch_npu profile, analysed, read from its text files into a :class:`RankProfile`.

torch_npu's offline analysis (``torch_npu.profiler.profiler.analyse``) writes, per rank, a
``<worker>_<pid>_<stamp>_ascend_pt/ASCEND_PROFILER_OUTPUT/`` folder; the columns below are the ones
its writers (and CANN's msprof, whose op_summary and communication files it copies) produce:

- ``kernel_details.csv``: one row per device task (Name, Type, Accelerator Core, Start Time(us),
  Duration(us); with AI Core metrics on, the default at levels 1 and 2, also Input Shapes, Input
  Data Types, Output Shapes; Step Id when the profiler marked steps). Communication tasks (core
  HCCL, or COMMUNICATION on newer CANN) are communication, not compute; copies are not in it.
- ``operator_details.csv``: aten operators with their device self and total time.
- ``step_trace_time.csv``: per step, Computing, Communication(Not Overlapped), Overlapped and Free
  (µs): the step is Computing + Communication(Not Overlapped) + Free.
- ``communication.json`` (per step, per HCCL operation: elapse, transit, wait and
  synchronisation time in ms) and ``communication_matrix.json`` (per link: transport, size,
  time, bandwidth).
- ``trace_view.json``: the timeline; host-device copies are its ``Ascend Hardware`` tasks named
  MEMCPY_ASYNC (Task Type PCIE_DMA_SQE across PCIe, SDMA_SQE on the device; newer CANN adds
  ``operation`` and ``size(B)``).
- ``memory_record.csv`` (allocated, reserved and active MB over time per component: PTA is
  torch_npu's caching allocator) and ``operator_memory.csv`` (each allocation, KB).

A file that is missing leaves its block ``not_recorded`` with the reason; a file that is cut short
or not in this layout is a problem of the rank (the profile stays open), never a zero.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ref2va_accept.evidence import (
    Allocation,
    CommunicationProfile,
    CopiesProfile,
    Link,
    MemoryPeak,
    OperatorTime,
    ProfileFile,
    RankProfile,
)
from ref2va_accept.profiles._files import ProfileReadError, Table, published, read_json, read_table
from ref2va_accept.profiles._npu_parts import (
    ALLOCATIONS,
    COMMUNICATION_CORES,
    COPY_DIRECTIONS,
    COPY_TASK,
    MB,
    Copy,
    Direction,
    StepSplit,
    Task,
    block,
    collective_ops,
    copies_profile,
    is_total,
    memory_peaks,
    ms,
    not_overlapped,
    operator_tables,
    shape,
    slowest_link,
    step_names,
    step_spans,
    step_times,
    task_type,
    unread_communication,
    unread_copies,
    window_ms,
)

__all__ = ["KERNEL_REQUIRED", "OUTPUT_DIR", "read_npu_text"]

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
FRAMEWORK_TOP = 5
KERNEL_REQUIRED = ("Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)")
# The rest of CANN's op_summary columns, as kernel_details copies them (known, not all read).
KERNEL_KNOWN = (
    "Step Id", "Step ID", "Device_id", "Model Name", "Model ID", "Task ID", "Stream ID",
    "Infer ID", "OP State", "Wait Time(us)", "Block Dim", "Block Num", "Mix Block Dim",
    "Mix Block Num", "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats",
    "Output Shapes", "Output Data Types", "Output Formats", "Context ID")
# AI Core metric columns (PipeUtilization, MemoryL0, ArithmeticUtilization, ...): many, by chip.
PMU_COLUMN = re.compile(r"^(aic|aiv|aicore|cube|vec|mac|mte|l0|l1|l2|ub|scalar|fixpipe)"
                        r"[a-z0-9_]*(\([^)]*\))?$", re.I)
OPERATOR_REQUIRED = ("Name", "Input Shapes", "Device Self Duration(us)",
                     "Device Total Duration(us)")
OPERATOR_KNOWN = ("Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
                  "Device Self Duration With AICore(us)", "Device Total Duration With AICore(us)")
STEP_REQUIRED = ("Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
                 "Communication", "Free")
STEP_KNOWN = ("Device_id", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)",
              "Preparing")
MEMORY_REQUIRED = ("Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)")
MEMORY_KNOWN = ("Total Active(MB)", "Stream Ptr", "Device Type")
OP_MEMORY_REQUIRED = ("Name", "Size(KB)")
OP_MEMORY_KNOWN = (
    "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)", "Duration(us)",
    "Active Duration(us)", "Allocation Total Allocated(MB)", "Allocation Total Reserved(MB)",
    "Allocation Total Active(MB)", "Release Total Allocated(MB)", "Release Total Reserved(MB)",
    "Release Total Active(MB)", "Stream Ptr", "Device Type")
TIMES = ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)")


def _ignored(table: Table) -> list[str]:
    odd = [c for c in table.ignored if not PMU_COLUMN.match(c)]
    return [f"{table.path.name}: column(s) {', '.join(repr(c) for c in odd)} not known to this "
            "reader: ignored"] if odd else []


class _Rank:
    """What one rank's files give, block by block; a block that failed names why."""

    def __init__(self, folder: Path, rank: int, relative_to: Path) -> None:
        self.output = folder / OUTPUT_DIR
        self.rank = rank
        self.relative_to = relative_to
        self.files: list[ProfileFile] = []
        self.problems: list[str] = []
        self.notes: list[str] = []

    def path(self, name: str) -> Path | None:
        path = self.output / name
        if not path.is_file():
            return None
        self.files.append(published(path, self.relative_to))
        return path

    def table(self, path: Path, required: tuple[str, ...], known: tuple[str, ...]) -> Table:
        table = read_table(path, required, known)
        self.notes += _ignored(table)
        return table

    def kernels(self) -> tuple[list[Task], list[Task]]:
        """(compute kernels, communication tasks) of kernel_details.csv."""
        path = self.path("kernel_details.csv")
        if path is None:
            self.problems.append("kernel_details.csv: missing (the profiler level was none, or "
                                 "the analysis did not finish): no operator figures")
            return [], []
        table = self.table(path, KERNEL_REQUIRED, KERNEL_KNOWN)
        if "Input Shapes" not in table.columns:
            self.notes.append("kernel_details.csv has no shapes: the profile was taken without "
                              "AI Core metrics (profiler level 0); rows are by kernel type only")
        compute: list[Task] = []
        communication: list[Task] = []
        for line, row in enumerate(table.rows, start=2):
            core = row["Accelerator Core"]
            task = Task(name=row["Name"], type=task_type(row["Type"], row["Name"]),
                        core=None if core in ("", "N/A") else core,
                        start=table.number(row, "Start Time(us)", line),
                        us=table.number(row, "Duration(us)", line),
                        step=row.get("Step Id", row.get("Step ID", "")),
                        shapes=shape(row.get("Input Shapes", "")),
                        dtypes=row.get("Input Data Types", "").replace("N/A", ""),
                        outputs=shape(row.get("Output Shapes", "")).replace("N/A", ""))
            (communication if task.core in COMMUNICATION_CORES else compute).append(task)
        return compute, communication

    def framework_operators(self) -> list[OperatorTime]:
        path = self.path("operator_details.csv")
        if path is None:
            self.notes.append("operator_details.csv: missing (no framework operators)")
            return []
        table = self.table(path, OPERATOR_REQUIRED, OPERATOR_KNOWN)
        rows: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
        for line, row in enumerate(table.rows, start=2):
            entry = rows[(row["Name"], shape(row["Input Shapes"]))]
            entry[0] += 1
            entry[1] += table.number(row, "Device Self Duration(us)", line)
        busy = sum(v[1] for v in rows.values()) or 1.0
        return [OperatorTime(kind="framework operator", name=name, core=None,
                             input_shapes=shapes, input_dtypes=None, output_shapes=None,
                             calls=int(calls), ms=ms(us), share=round(us / busy, 4), kernels=[])
                for (name, shapes), (calls, us) in sorted(
                    rows.items(), key=lambda kv: -kv[1][1])[:FRAMEWORK_TOP]]

    def steps(self) -> list[StepSplit] | None:
        path = self.path("step_trace_time.csv")
        if path is None:
            self.notes.append("step_trace_time.csv: missing (no overlap analysis): no step "
                              "split")
            return None
        table = self.table(path, STEP_REQUIRED, STEP_KNOWN)
        devices = {row.get("Device_id", "") for row in table.rows}
        if len(devices) > 1:
            self.notes.append(f"step_trace_time.csv holds devices {sorted(devices)}: each row is "
                              "a step of one of them")
        return [StepSplit(step=row["Step"] or "window",
                          computing=table.number(row, "Computing", line),
                          not_overlapped=table.number(row, "Communication(Not Overlapped)", line),
                          overlapped=table.number(row, "Overlapped", line),
                          free=table.number(row, "Free", line))
                for line, row in enumerate(table.rows, start=2)]

    def communication(self, tasks: list[Task], steps: list[StepSplit] | None
                      ) -> CommunicationProfile:
        path = self.path("communication.json")
        if path is None:
            if tasks:
                self.problems.append("communication.json: missing while kernel_details.csv "
                                     f"holds {len(tasks)} communication task(s)")
            return unread_communication(
                steps, "no communication.json: torch_npu writes it only where HCCL ran "
                       "(profiler level 1 or 2, more than one rank)")
        data = read_json(path)
        times: list[tuple[str, list[Any]]] = []
        for step, groups in _mapping(data, path.name).items():
            for group in ("collective", "p2p"):
                for key, info in _mapping(groups, f"{path.name} {step}").get(group, {}).items():
                    if key == "Total Op Info":
                        continue
                    said = _mapping(info, f"{path.name} {step} {key}").get(
                        "Communication Time Info")
                    if not isinstance(said, Mapping) or TIMES[0] not in said:
                        raise ProfileReadError(f"{path.name}: {step} {key} has no "
                                               f"'Communication Time Info' with '{TIMES[0]}'")
                    times.append((key, [said.get(field) for field in TIMES]))
        ops = collective_ops(times)
        apart, share = not_overlapped(steps)
        return CommunicationProfile(
            status="measured", ms=round(sum(float(o.elapse_ms) for o in ops), 3),
            not_overlapped_ms=apart, share_not_overlapped=share, ops=ops,
            slowest_link=self.slowest_link(),
            note=None if steps is not None else
            "no step_trace_time.csv: the share not overlapped is not known")

    def slowest_link(self) -> Link | None:
        path = self.path("communication_matrix.json")
        if path is None:
            self.notes.append("communication_matrix.json: missing (no per-link figures)")
            return None
        data = read_json(path)
        links: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
        for step, groups in _mapping(data, path.name).items():
            for group in ("collective", "p2p"):
                for key, per_link in _mapping(groups, f"{path.name} {step}").get(
                        group, {}).items():
                    if not is_total(key):
                        continue
                    for link, raw in _mapping(per_link, f"{path.name} {key}").items():
                        src, _, dst = link.partition("-")
                        if src == dst:
                            continue  # a rank's copy to itself
                        info = _mapping(raw, f"{path.name} {key} {link}")
                        try:
                            size = float(info["Transit Size(MB)"])
                            time_ms = float(info["Transit Time(ms)"])
                        except (KeyError, TypeError, ValueError):
                            raise ProfileReadError(
                                f"{path.name}: {key} {link} lacks a numeric 'Transit Size(MB)' "
                                "or 'Transit Time(ms)'") from None
                        total = links[(link, str(info.get("Transport Type", "?")))]
                        total[0] += size
                        total[1] += time_ms
        return slowest_link(links)

    def copies(self) -> list[Copy]:
        """The timeline's copy tasks: Ascend Hardware tasks named MEMCPY_ASYNC."""
        path = self.path("trace_view.json")
        if path is None:
            raise _NoTimeline
        events = read_json(path)
        if isinstance(events, Mapping):
            events = events.get("traceEvents")
        if not isinstance(events, list):
            raise ProfileReadError(f"{path.name}: not a Chrome trace (no event list)")
        hardware = {e.get("pid") for e in events if isinstance(e, Mapping)
                    and e.get("ph") == "M" and e.get("name") == "process_name"
                    and (e.get("args") or {}).get("name") == "Ascend Hardware"}
        copies = []
        for e in events:
            if (isinstance(e, Mapping) and e.get("ph") == "X" and e.get("pid") in hardware
                    and str(e.get("name")) == COPY_TASK):
                args = e.get("args") or {}
                start = float(e.get("ts") or 0.0)
                size = args.get("size(B)")
                direction: Direction = COPY_DIRECTIONS.get(
                    str(args.get("operation", "")).lower()) or (
                    "D2D" if args.get("Task Type") == "SDMA_SQE" else "other")
                copies.append(Copy(start, start + float(e.get("dur") or 0.0), direction,
                                   int(size) if isinstance(size, (int, float)) else None))
        return copies

    def memory(self) -> list[MemoryPeak]:
        path = self.path("memory_record.csv")
        if path is None:
            self.notes.append("memory_record.csv: missing (profile_memory was off): no memory "
                              "peaks")
            return []
        table = self.table(path, MEMORY_REQUIRED, MEMORY_KNOWN)
        peaks: dict[str, list[float | None]] = {}
        for line, row in enumerate(table.rows, start=2):
            if row["Component"] != "PTA":
                continue
            peak = peaks.setdefault(row.get("Device Type") or f"rank {self.rank}",
                                    [None, None, None])
            for i, column in enumerate(("Total Allocated(MB)", "Total Reserved(MB)",
                                        "Total Active(MB)")):
                value = table.optional_number(row, column, line)
                if value is not None:
                    was = peak[i]
                    peak[i] = value * MB if was is None else max(was, value * MB)
        if not peaks:
            self.notes.append("memory_record.csv has no PTA rows: torch_npu's allocator "
                              "recorded nothing")
        return memory_peaks(peaks)

    def allocations(self) -> list[Allocation]:
        path = self.path("operator_memory.csv")
        if path is None:
            self.notes.append("operator_memory.csv: missing (profile_memory was off): no "
                              "allocations")
            return []
        table = self.table(path, OP_MEMORY_REQUIRED, OP_MEMORY_KNOWN)
        rows = []
        for line, row in enumerate(table.rows, start=2):
            duration = table.optional_number(row, "Duration(us)", line)
            rows.append(Allocation(
                name=row["Name"] or "(no operator)",
                bytes=round(table.number(row, "Size(KB)", line) * 1024),
                duration_ms=None if duration is None else ms(duration)))
        return sorted(rows, key=lambda a: -a.bytes)[:ALLOCATIONS]


class _NoTimeline(Exception):
    """No trace_view.json: the copies are not recorded (not a problem of the rank)."""


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ProfileReadError(f"{where}: expected an object, found {type(value).__name__}")
    return value


def _copies(r: _Rank, compute: list[Task], spans: dict[str, tuple[float, float]],
            steps: list[StepSplit] | None) -> tuple[CopiesProfile, dict[str, float]]:
    try:
        copies = r.copies()
    except _NoTimeline:
        return unread_copies("no trace_view.json: copies are read from its timeline (they are "
                             "not in kernel_details.csv)")
    return copies_profile(copies, compute, spans, steps, [])


def read_npu_text(folder: Path, rank: int, relative_to: Path) -> RankProfile:
    """An analysed ``*_ascend_pt`` folder's text files as one rank's profile."""
    r = _Rank(folder, rank, relative_to)
    compute, tasks = block(r.problems, "operators", r.kernels, ([], []))
    top, totals = operator_tables(compute)
    framework = block(r.problems, "framework operators", r.framework_operators, [])
    steps = block(r.problems, "step split", r.steps, None)
    communication = block(r.problems, "communication", lambda: r.communication(tasks, steps),
                           unread_communication(steps, "could not be read"))
    spans = step_spans(compute + tasks)
    copies, copies_per_step = block(r.problems, "copies", lambda: _copies(r, compute, spans, steps),
                                     unread_copies("could not be read"))
    memory = block(r.problems, "memory", r.memory, [])
    allocations = block(r.problems, "allocations", r.allocations, [])
    return RankProfile(
        rank=rank, source="torch_npu text", files=r.files, steps=step_names(steps, spans),
        window_ms=window_ms(compute + tasks), operators=len(compute) + len(tasks),
        top_operators=top, operator_totals=totals, framework_operators=framework,
        communication=communication, copies=copies,
        step_times=step_times(steps, copies_per_step), memory=memory,
        largest_allocations=allocations, problems=r.problems, notes=r.notes)
