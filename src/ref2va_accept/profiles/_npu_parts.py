"""What the two torch_npu readers share: the device tasks, copies and step splits they read
(whatever the export), and how each block of a :class:`RankProfile` is built from them, once.

The text export (_npu_text.py) and the database export (_npu_db.py) hold the same facts in
different places; each reader turns its files into these parts, and the figures come out of the
same functions, so one profile read from either export gives the same record.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ref2va_accept.evidence import (
    MEMORY_DEFINITIONS,
    CollectiveOp,
    CommunicationProfile,
    CopiesProfile,
    CopyDirection,
    Link,
    MemoryPeak,
    OperatorTime,
    OperatorTotal,
    StepTime,
)
from ref2va_accept.profiles._files import ProfileReadError
from ref2va_accept.profiles._timeline import ms, split, union

__all__ = [
    "ALLOCATIONS", "COMMUNICATION_CORES", "COPY_DIRECTIONS", "COPY_TASK", "MB", "PEAKS", "TOP",
    "Copy", "Direction", "StepSplit", "Task", "block", "collective_ops", "copies_profile",
    "is_total", "memory_peaks", "ms", "not_overlapped", "op_name", "operator_tables", "shape",
    "slowest_link", "step_names", "step_spans", "step_times", "task_type",
    "unread_communication", "unread_copies", "window_ms"]

TOP = 15
ALLOCATIONS = 5
MB = 2**20
COMMUNICATION_CORES = frozenset({"HCCL", "COMMUNICATION"})
COPY_TASK = "MEMCPY_ASYNC"
Direction: TypeAlias = Literal["H2D", "D2H", "D2D", "other"]
# CANN's names for a copy's direction (newer msprof: the copy task's ``operation``).
COPY_DIRECTIONS: Mapping[str, Direction] = {
    "host to device": "H2D", "host to device ex": "H2D", "device to host": "D2H",
    "device to host ex": "D2H", "device to device": "D2D", "addr device to device": "D2D"}
Peak: TypeAlias = Literal["allocated_peak", "reserved_peak", "active_peak"]
PEAKS: tuple[Peak, ...] = ("allocated_peak", "reserved_peak", "active_peak")
OP_SUFFIX = re.compile(r"_\d+_\d+_\d+$")


@dataclass
class Task:
    """A device task (µs): a kernel, or a communication operation."""

    name: str
    type: str
    core: str | None
    start: float
    us: float
    step: str
    shapes: str = ""
    dtypes: str = ""
    outputs: str = ""

    @property
    def end(self) -> float:
        return self.start + self.us


@dataclass
class Copy:
    """A host-device copy task (µs)."""

    start: float
    end: float
    direction: Direction
    bytes: int | None


@dataclass
class StepSplit:
    """One step as the overlap analysis splits it (µs): the step is computing, communication
    not overlapped and free; overlapped is the part of communication computing ran beside."""

    step: str
    computing: float
    not_overlapped: float
    overlapped: float
    free: float

    @property
    def total(self) -> float:
        return self.computing + self.not_overlapped + self.free


def block(problems: list[str], what: str, read: Callable[[], Any], fallback: Any, *,
          fatal: tuple[type[Exception], ...] = ()) -> Any:
    """One block of a rank read: a block its files could not give is a problem of the rank
    (the profile stays open) and ``fallback``; a ``fatal`` error ends the whole rank."""
    try:
        return read()
    except fatal:
        raise
    except ProfileReadError as exc:
        problems.append(f"{exc} ({what} not read)")
        return fallback


def shape(cell: str) -> str:
    """A shape as torch_npu writes it: the value carries literal quotes (CSV-escaped), and
    operator_details puts a line break after each ';'."""
    return cell.strip().strip('"').replace(";\r\n", ";").replace(";\n", ";").rstrip(";")


def op_name(raw: str) -> str:
    """An HCCL operation's kind: ``hcom_allReduce__586_0_1@group`` is ``hcom_allReduce_``."""
    return OP_SUFFIX.sub("", raw.split("@", 1)[0])


def task_type(kind: str, name: str) -> str:
    """The kernel's type; where torch_npu leaves it N/A (profiler level 0), its name without
    the per-call suffix."""
    return kind if kind not in ("", "N/A") else OP_SUFFIX.sub("", name) or name


def operator_tables(compute: Sequence[Task]) -> tuple[list[OperatorTime], list[OperatorTotal]]:
    """The top kernels by device time at each shape, and every kernel type over its shapes."""
    busy = sum(k.us for k in compute) or 1.0
    rows: dict[tuple[str, str | None, str, str, str], list[Any]] = defaultdict(
        lambda: [0, 0.0, []])
    for k in compute:
        row = rows[(k.type, k.core, k.shapes, k.dtypes, k.outputs)]
        row[0] += 1
        row[1] += k.us
        if k.name not in row[2]:
            row[2].append(k.name)
    top = [OperatorTime(kind="device kernel", name=t, core=core, input_shapes=shapes,
                        input_dtypes=dtypes or None, output_shapes=outputs or None, calls=calls,
                        ms=ms(us), share=round(us / busy, 4), kernels=names[:5])
           for (t, core, shapes, dtypes, outputs), (calls, us, names)
           in sorted(rows.items(), key=lambda kv: -kv[1][1])[:TOP]]
    totals: dict[tuple[str, str | None], list[Any]] = defaultdict(lambda: [0, 0.0, []])
    for (t, core, shapes, _dtypes, _outputs), (calls, us, _names) in rows.items():
        total = totals[(t, core)]
        total[0] += calls
        total[1] += us
        total[2].append((us, shapes))
    return top, [OperatorTotal(kind="device kernel", name=t, core=core, calls=calls, ms=ms(us),
                               shapes=[s for _, s in sorted(shapes, key=lambda x: -x[0])[:3]])
                 for (t, core), (calls, us, shapes)
                 in sorted(totals.items(), key=lambda kv: -kv[1][1])]


def not_overlapped(steps: Sequence[StepSplit] | None) -> tuple[float | None, float | None]:
    """Communication no computation ran beside (ms) and its share of the steps."""
    if steps is None:
        return None, None
    apart = sum(s.not_overlapped for s in steps)
    total = sum(s.total for s in steps)
    return ms(apart), (round(apart / total, 4) if total else None)


def collective_ops(times: Iterable[tuple[str, Sequence[Any]]]) -> list[CollectiveOp]:
    """Each operation kind's calls and summed (elapse, transit, wait, synchronisation) ms; a
    time missing from any call is None for the kind."""
    sums: dict[str, list[float | None]] = {}
    calls: dict[str, int] = defaultdict(int)
    for raw, values in times:
        name = op_name(raw)
        entry = sums.setdefault(name, [0.0, 0.0, 0.0, 0.0])
        calls[name] += 1
        for i, (value, was) in enumerate(zip(values, entry, strict=True)):
            entry[i] = (was + float(value) if was is not None
                        and isinstance(value, (int, float)) else None)
    return [CollectiveOp(name=name, calls=calls[name], elapse_ms=round(s[0] or 0.0, 3),
                         transit_ms=None if s[1] is None else round(s[1], 3),
                         wait_ms=None if s[2] is None else round(s[2], 3),
                         synchronization_ms=None if s[3] is None else round(s[3], 3))
            for name, s in sorted(sums.items(), key=lambda kv: -(kv[1][0] or 0.0))]


def unread_communication(steps: Sequence[StepSplit] | None, note: str) -> CommunicationProfile:
    apart, share = not_overlapped(steps)
    return CommunicationProfile(status="not_recorded", ms=None, not_overlapped_ms=apart,
                                share_not_overlapped=share, ops=[], slowest_link=None, note=note)


def slowest_link(links: Mapping[tuple[str, str], Sequence[float]]) -> Link | None:
    """The link with the lowest bandwidth, from (link, transport): (MB, ms) summed."""
    rated = [(size / 1024 / (time_ms / 1000), link, transport, size, time_ms)
             for (link, transport), (size, time_ms) in links.items() if time_ms > 0]
    if not rated:
        return None
    bandwidth, link, transport, size, time_ms = min(rated)
    return Link(link=link, transport=transport, size_mb=round(size, 3),
                time_ms=round(time_ms, 3), bandwidth_gb_s=round(bandwidth, 3))


def is_total(key: str) -> bool:
    """communication_matrix's per-kind sum (``allreduce-total@group``): top1, middle and bottom
    entries repeat what it sums."""
    return key.split("@", 1)[0].endswith("-total")


def step_spans(tasks: Iterable[Task]) -> dict[str, tuple[float, float]]:
    """Each step's first start and last end over its tasks ('window' where none is marked)."""
    spans: dict[str, list[float]] = {}
    for k in tasks:
        span = spans.setdefault(k.step or "window", [k.start, k.end])
        span[0], span[1] = min(span[0], k.start), max(span[1], k.end)
    return {s: (v[0], v[1]) for s, v in spans.items()}


def copies_profile(copies: Sequence[Copy], compute: Sequence[Task],
                   spans: Mapping[str, tuple[float, float]], steps: Sequence[StepSplit] | None,
                   notes: Iterable[str]) -> tuple[CopiesProfile, dict[str, float]]:
    """The copies per direction, their share of the steps, how much other device work ran
    beside them, and their time per step (µs)."""
    by_direction: dict[Direction, list[Any]] = defaultdict(lambda: [0, 0, 0.0])
    for c in copies:
        row = by_direction[c.direction]
        row[0] += 1
        row[1] = None if row[1] is None or c.bytes is None else row[1] + c.bytes
        row[2] += c.end - c.start
    copy_spans = [(c.start, c.end) for c in copies]
    work = [(k.start, k.end) for k in compute]
    overlapped = 0.0
    if copy_spans:
        everything = copy_spans + work
        window = (min(s for s, _ in everything), max(e for _, e in everything))
        overlapped = split(work, copy_spans, window)["overlapped"]
    merged = union(copy_spans)
    per_step = {step: sum((min(e, high) - max(s, low) for s, e in merged
                           if min(e, high) > max(s, low)), 0.0)
                for step, (low, high) in spans.items()}
    copy_us = sum(e - s for s, e in copy_spans)
    step_total = None if steps is None else sum(s.total for s in steps)
    said = list(dict.fromkeys(notes))
    if any(c.direction == "other" for c in copies):
        said.append("copies without a direction: this CANN does not record one")
    if any(c.bytes is None for c in copies):
        said.append("no sizes: this CANN does not record a copy's size")
    return CopiesProfile(
        status="measured",
        directions=[CopyDirection(direction=d, count=n, bytes=b, ms=ms(us))
                    for d, (n, b, us) in sorted(by_direction.items())],
        ms=ms(copy_us), share=round(copy_us / step_total, 4) if step_total else None,
        overlapped_ms=ms(overlapped), note="; ".join(said) or None), per_step


def unread_copies(note: str) -> tuple[CopiesProfile, dict[str, float]]:
    return CopiesProfile(status="not_recorded", directions=[], ms=None, share=None,
                         overlapped_ms=None, note=note), {}


def memory_peaks(peaks: Mapping[str, Sequence[float | None]]) -> list[MemoryPeak]:
    """Per device, torch_npu's allocator's (PTA) peak allocated, reserved and active bytes."""
    return [MemoryPeak(figure=figure, device=f"{device} (PTA)", bytes=round(value),
                       definition=MEMORY_DEFINITIONS[figure])
            for device, values in sorted(peaks.items())
            for figure, value in zip(PEAKS, values, strict=True) if value is not None]


def step_times(steps: Sequence[StepSplit] | None,
               copies_per_step: Mapping[str, float]) -> list[StepTime]:
    return [StepTime(step=s.step, total_ms=ms(s.total), computing_ms=ms(s.computing),
                     communication_not_overlapped_ms=ms(s.not_overlapped),
                     overlapped_ms=ms(s.overlapped),
                     copies_ms=ms(copies_per_step[s.step]) if s.step in copies_per_step
                     else None, free_ms=ms(s.free)) for s in steps or []]


def step_names(steps: Sequence[StepSplit] | None,
               spans: Mapping[str, tuple[float, float]]) -> list[str]:
    """The steps profiled: the overlap analysis's, else those the tasks are marked with."""
    if steps:
        return [s.step for s in steps]
    return sorted(spans, key=lambda s: (not s.isdigit(), int(s) if s.isdigit() else 0, s))


def window_ms(tasks: Sequence[Task]) -> float:
    return ms(max(k.end for k in tasks) - min(k.start for k in tasks)) if tasks else 0.0
