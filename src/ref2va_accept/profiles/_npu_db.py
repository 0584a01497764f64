"""One rank's torch_npu profile, analysed, read from its database export into a RankProfile.

With ``export_type=["db"]`` torch_npu's analysis leaves in ``ASCEND_PROFILER_OUTPUT/``
``ascend_pytorch_profiler_<N>.db`` (CANN msprof's ``msprof_*.db`` moved and renamed, plus
torch_npu's tables) and ``analysis.db`` (communication and step analysis). Times are ns, sizes
bytes, strings ids into ``STRING_IDS(id, value)``; blocks and figures are npu_text's, built by the
same functions (_npu_parts.py):

- ``TASK`` (startNs, endNs) joined on globalTaskId with ``COMPUTE_TASK_INFO`` (name, opType,
  taskType: the accelerator core, shapes quoted as in kernel_details.csv), the kernels, each in
  the ``STEP_TIME`` (id, startNs, endNs) range holding its start; ``COMMUNICATION_OP`` (opName,
  startNs, endNs); copies: ``TASK`` rows of type MEMCPY_ASYNC, on newer CANN with ``MEMCPY_INFO``
  (size, memcpyOperation: an ``ENUM_MEMCPY_OPERATION`` id); ``MEMORY_RECORD`` (PTA's allocated,
  reserved, active bytes) and ``OP_MEMORY`` (each allocation: bytes, duration ns).
- analysis.db: ``CommAnalyzerTime`` (ms: elapse, transit, wait, synchronisation, as
  communication.json), ``CommAnalyzerMatrix`` (per link: its ``-total`` rows) and
  ``StepTraceTime`` (µs, not ns, as step_trace_time.csv). ``PYTORCH_API`` has no device times:
  framework operators are the text export's.

A file that is not SQLite or is cut short, or lacks STRING_IDS, TASK or COMPUTE_TASK_INFO, is a
:class:`ProfileReadError` naming it, a missing column one naming table and column; another table
missing leaves its block ``not_recorded`` or empty with the reason.
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

from ref2va_accept import evidence as ev
from ref2va_accept.profiles import _npu_parts as parts
from ref2va_accept.profiles._files import ProfileReadError, published
from ref2va_accept.profiles._npu_parts import Copy, StepSplit, Task, ms

__all__ = ["ANALYSIS_DB", "DB_FILE", "REQUIRED_TABLES", "read_npu_db"]

DB_FILE = re.compile(r"^ascend_pytorch_profiler(?:_\d+)?\.db$")
ANALYSIS_DB = "analysis.db"
REQUIRED_TABLES = ("STRING_IDS", "TASK", "COMPUTE_TASK_INFO")
SHAPES = ("inputShapes", "inputDataTypes", "outputShapes")
STEP_COLUMNS = ("computing", "communication_not_overlapped", "overlapped", "communication", "free")
COMM_TIMES = ("elapse_time", "transit_time", "wait_time", "synchronization_time")
MEMORY = ("totalAllocated", "totalReserved", "totalActive")
COPY_OPERATIONS = frozenset(parts.COPY_DIRECTIONS) | {"host to host", "managed memory", "other"}
US = 1000.0  # ns per µs
Rows = list[dict[str, Any]]
Steps = list[tuple[str, int, int]]


class _Broken(ProfileReadError):
    """The rank's database itself cannot be read: the whole rank, not one block."""


class _Db:
    """One SQLite file, read-only; every failure a ProfileReadError naming the file."""

    def __init__(self, path: Path, opened: list[sqlite3.Connection], *, fatal: bool) -> None:
        self.name, self.fatal, self.strings = path.name, fatal, dict[int, str]()
        try:
            self.con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise self._unreadable(exc) from None
        opened.append(self.con)
        self.tables = {row[0] for row in self._query(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}

    def _unreadable(self, exc: Exception) -> ProfileReadError:
        kind = _Broken if self.fatal else ProfileReadError
        return kind(f"{self.name}: not a readable SQLite database ({exc})")

    def _query(self, sql: str) -> list[tuple[Any, ...]]:
        try:
            return self.con.execute(sql).fetchall()
        except sqlite3.Error as exc:
            raise self._unreadable(exc) from None

    def rows(self, table: str, required: tuple[str, ...], optional: tuple[str, ...] = (), *,
             numbers: tuple[str, ...] = (), strings: tuple[str, ...] = ()) -> Rows:
        """``table``'s ``required`` columns and those of ``optional`` it has; ``numbers`` checked
        (NULL allowed where optional), ``strings`` (STRING_IDS ids) given as their text."""
        columns = [row[1] for row in self._query(f'PRAGMA table_info("{table}")')]
        missing = [c for c in required if c not in columns]
        if missing:
            raise ProfileReadError(
                f"{self.name}: table {table} has no column(s) {', '.join(map(repr, missing))} "
                f"(it has {', '.join(columns)}); not the layout this reader knows")
        wanted = [*required, *(c for c in optional if c in columns)]
        names = ", ".join(f'"{c}"' for c in wanted)
        rows = [dict(zip(wanted, row, strict=True))
                for row in self._query(f'SELECT {names} FROM "{table}"')]
        for number, row in enumerate(rows, start=1):
            for column, v in ((c, row[c]) for c in numbers if c in row):
                if not isinstance(v, (int, float)) and (v is not None or column in required):
                    raise ProfileReadError(f"{self.name}: {table} row {number}, column "
                                           f"{column!r}: {v!r} is not a number")
            for column in (c for c in strings if c in row):
                row[column] = self.text(row[column], f"{table}.{column}")
        return rows

    def text(self, value: Any, where: str) -> str:
        if value is None or isinstance(value, str):
            return value or ""  # a writer that stored the text itself is taken at its word
        if isinstance(value, int) and value in self.strings:
            return self.strings[value]
        raise ProfileReadError(f"{self.name}: {where} {value!r} is not an id in STRING_IDS")


class _Reader:
    """What one rank's database (and analysis.db beside it) gives, block by block."""

    def __init__(self, path: Path, rank: int, relative_to: Path,
                 opened: list[sqlite3.Connection]) -> None:
        self.rank, self.files = rank, [published(path, relative_to)]
        self.problems, self.notes = list[str](), list[str]()
        self.db = _Db(path, opened, fatal=True)
        self.analysis: _Db | None = None
        self.analysis_said = f"{ANALYSIS_DB}: missing"
        for table in REQUIRED_TABLES:
            if table not in self.db.tables:
                raise ProfileReadError(f"{path.name}: table {table} missing: not torch_npu's "
                                       "database export as this reader knows it")
        self.db.strings = {r["id"]: str(r["value"]) for r in self.db.rows(
            "STRING_IDS", ("id", "value"), numbers=("id",))}
        if (beside := path.parent / ANALYSIS_DB).is_file():
            self.files.append(published(beside, relative_to))
            try:
                self.analysis = _Db(beside, opened, fatal=False)
            except ProfileReadError as exc:
                self.problems.append(f"{exc} (communication and step analysis not read)")
                self.analysis_said = f"{ANALYSIS_DB}: unreadable"

    def table(self, name: str, *args: Any, **kwargs: Any) -> Rows | None:
        return self.db.rows(name, *args, **kwargs) if name in self.db.tables else None

    def analysis_rows(self, table: str, required: tuple[str, ...],
                      optional: tuple[str, ...] = ()) -> tuple[Rows | None, str]:
        if self.analysis is None:
            return None, self.analysis_said
        if table not in self.analysis.tables:
            return None, f"{ANALYSIS_DB} has no {table}"
        return self.analysis.rows(table, required, optional, numbers=required[1:]), ""

    def step_ranges(self) -> Steps:
        return sorted((str(r["id"]), r["startNs"], r["endNs"]) for r in self.table(
            "STEP_TIME", ("id", "startNs", "endNs"), numbers=("startNs", "endNs")) or [])

    def tasks(self) -> Rows:
        return self.db.rows("TASK", ("startNs", "endNs", "globalTaskId", "taskType"),
                            numbers=("startNs", "endNs"), strings=("taskType",))

    def kernels(self, steps: Steps) -> list[Task]:
        info = {r["globalTaskId"]: r for r in self.db.rows(
            "COMPUTE_TASK_INFO", ("name", "globalTaskId", "taskType", "opType"), SHAPES,
            strings=("name", "taskType", "opType", *SHAPES))}
        if info and "inputShapes" not in next(iter(info.values())):
            self.notes.append("COMPUTE_TASK_INFO has no shapes: the profile was taken without "
                              "AI Core metrics (profiler level 0); rows are by kernel type only")
        compute = []
        for task in self.tasks():
            row = info.get(task["globalTaskId"])
            if row is None or row["taskType"] in parts.COMMUNICATION_CORES:
                continue  # copies and runtime tasks; communication is COMMUNICATION_OP's
            name, core = row["name"], row["taskType"]
            compute.append(Task(
                name=name, type=parts.task_type(row["opType"], name),
                core=None if core in ("", "N/A") else core,
                start=task["startNs"] / US, us=(task["endNs"] - task["startNs"]) / US,
                step=_step(steps, task["startNs"]), shapes=parts.shape(row.get(SHAPES[0], "")),
                dtypes=row.get(SHAPES[1], "").replace("N/A", ""),
                outputs=parts.shape(row.get(SHAPES[2], "")).replace("N/A", "")))
        return compute

    def operations(self, steps: Steps) -> list[Task]:
        return [Task(name=r["opName"], type=parts.op_name(r["opName"]), core="COMMUNICATION",
                     start=r["startNs"] / US, us=(r["endNs"] - r["startNs"]) / US,
                     step=_step(steps, r["startNs"]))
                for r in self.table("COMMUNICATION_OP", ("opName", "startNs", "endNs"),
                                    numbers=("startNs", "endNs"), strings=("opName",)) or []]

    def step_rows(self) -> list[StepSplit] | None:
        rows, why = self.analysis_rows("StepTraceTime", ("step", *STEP_COLUMNS), ("deviceId",))
        if rows is None:
            self.notes.append(f"{why} (no overlap analysis): no step split")
            return None
        if len(devices := {str(row.get("deviceId")) for row in rows}) > 1:
            self.notes.append(f"{ANALYSIS_DB} StepTraceTime holds devices {sorted(devices)}: "
                              "each row is a step of one of them")
        return [StepSplit(step="window" if row["step"] in (None, "") else str(row["step"]),
                          computing=row["computing"],
                          not_overlapped=row["communication_not_overlapped"],
                          overlapped=row["overlapped"], free=row["free"]) for row in rows]

    def communication(self, ops: list[Task], steps: list[StepSplit] | None
                      ) -> ev.CommunicationProfile:
        timed, why = self.analysis_rows("CommAnalyzerTime", ("hccl_op_name", "elapse_time"),
                                        COMM_TIMES[1:])
        notes = [] if steps else ["no StepTraceTime: the share not overlapped is not known"]
        times: list[tuple[str, list[Any]]] = [
            (str(r["hccl_op_name"]), [r.get(c) for c in COMM_TIMES]) for r in timed or []
            if not str(r["hccl_op_name"]).lower().startswith("total")]  # CANN's total row
        if not times and ops:
            notes.insert(0, f"{why or 'CommAnalyzerTime is empty'}: elapse from COMMUNICATION_OP;"
                            " transit, wait and synchronisation not known")
            times = [(op.type, [op.us / US, None, None, None]) for op in ops]
        if not times:
            return parts.unread_communication(
                steps, "no COMMUNICATION_OP rows: CANN records them only where HCCL ran "
                       "(profiler level 1 or 2, more than one rank)")
        collective = parts.collective_ops(times)
        apart, share = parts.not_overlapped(steps)
        return ev.CommunicationProfile(
            status="measured", ms=round(sum(float(o.elapse_ms) for o in collective), 3),
            not_overlapped_ms=apart, share_not_overlapped=share, ops=collective,
            slowest_link=self.slowest_link(), note="; ".join(notes) or None)

    def slowest_link(self) -> ev.Link | None:
        rows, why = self.analysis_rows("CommAnalyzerMatrix", (
            "hccl_op_name", "src_rank", "dst_rank", "transit_size", "transit_time"),
            ("transport_type",))
        if rows is None:
            self.notes.append(f"{why} (no per-link figures)")
            return None
        links: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
        for row in rows:
            key = str(row["hccl_op_name"])
            if not parts.is_total(key) or row["src_rank"] == row["dst_rank"]:
                continue  # top1/middle/bottom repeat what total sums; a rank's copy to itself
            entry = links[(f"{row['src_rank']}-{row['dst_rank']}",
                           str(row.get("transport_type") or "?"))]
            entry[0] += row["transit_size"]
            entry[1] += row["transit_time"]
        return parts.slowest_link(links)

    def copies(self) -> tuple[list[Copy], list[str]]:
        """The MEMCPY_ASYNC tasks, with MEMCPY_INFO's size and direction where it is there."""
        info = {r["globalTaskId"]: r for r in self.table(
            "MEMCPY_INFO", ("globalTaskId", "size", "memcpyOperation"), numbers=("size",)) or []}
        enum = {r["id"]: str(r["name"])
                for r in self.table("ENUM_MEMCPY_OPERATION", ("id", "name")) or []}
        copies, notes = [], []
        for task in (t for t in self.tasks() if t["taskType"] == parts.COPY_TASK):
            row = info.get(task["globalTaskId"], {})
            operation: Any = row.get("memcpyOperation")
            if not row:
                notes.append("no MEMCPY_INFO: this CANN records no copy's direction or size")
            elif isinstance(operation, int):  # an ENUM_MEMCPY_OPERATION id (a STRING_IDS one?)
                operation = enum.get(operation, self.db.strings.get(operation, ""))
                if operation.lower() not in COPY_OPERATIONS:
                    notes.append("an unnamed memcpyOperation (no ENUM_MEMCPY_OPERATION): other")
            size = row.get("size")
            copies.append(Copy(task["startNs"] / US, task["endNs"] / US,
                               parts.COPY_DIRECTIONS.get(str(operation or "").lower(), "other"),
                               None if size is None else int(size)))
        return copies, notes

    def memory(self) -> list[ev.MemoryPeak]:
        rows = self.table("MEMORY_RECORD", ("component", *MEMORY[:2]), (MEMORY[2], "deviceId"),
                          numbers=MEMORY, strings=("component",))
        if rows is None:
            self.notes.append("MEMORY_RECORD: missing (profile_memory was off): no memory peaks")
            return []
        peaks: dict[str, list[float | None]] = {}
        for row in (r for r in rows if r["component"] == "PTA"):
            device = f"rank {self.rank}" if row.get("deviceId") is None else \
                f"NPU:{row['deviceId']}"
            peak = peaks.setdefault(device, [None, None, None])
            for i, column in enumerate(MEMORY):
                value, was = row.get(column), peak[i]
                if value is not None:
                    peak[i] = value if was is None else max(was, value)
        self.notes += [] if peaks else ["MEMORY_RECORD has no PTA rows: torch_npu's allocator "
                                        "recorded nothing"]
        return parts.memory_peaks(peaks)

    def allocations(self) -> list[ev.Allocation]:
        rows = self.table("OP_MEMORY", ("name", "size"), ("duration",),
                          numbers=("size", "duration"), strings=("name",))
        if rows is None:
            self.notes.append("OP_MEMORY: missing (profile_memory was off): no allocations")
        return sorted((ev.Allocation(name=r["name"] or "(no operator)", bytes=round(r["size"]),
                                     duration_ms=None if r.get("duration") is None
                                     else ms(r["duration"] / US)) for r in rows or []),
                      key=lambda a: -a.bytes)[:parts.ALLOCATIONS]


def _step(steps: Steps, start: int) -> str:
    return next((step for step, low, high in steps if low <= start <= high), "")


def _block(r: _Reader, what: str, read: Any, fallback: Any) -> Any:
    # A database that cannot be read at all ends the rank, not one block.
    return parts.block(r.problems, what, read, fallback, fatal=(_Broken,))


def read_npu_db(path: Path, rank: int, relative_to: Path) -> ev.RankProfile:
    """A ``*_ascend_pt`` folder's database (``path``, in ASCEND_PROFILER_OUTPUT) as one rank."""
    if not path.is_file():
        raise ProfileReadError(f"{path.name}: missing")
    opened: list[sqlite3.Connection] = []
    try:
        return _read(_Reader(path, rank, relative_to, opened))
    finally:
        for con in opened:
            con.close()


def _copies(r: _Reader, compute: list[Task], spans: dict[str, tuple[float, float]],
            steps: list[StepSplit] | None) -> tuple[ev.CopiesProfile, dict[str, float]]:
    copies, notes = r.copies()
    return parts.copies_profile(copies, compute, spans, steps, notes)


def _read(r: _Reader) -> ev.RankProfile:
    ranges = _block(r, "steps", r.step_ranges, [])
    compute = _block(r, "operators", lambda: r.kernels(ranges), [])
    top, totals = parts.operator_tables(compute)
    r.notes.append("framework operators: the database export's device times for them are not "
                   "read (the text export's operator_details.csv has them)")
    ops = _block(r, "communication", lambda: r.operations(ranges), [])
    steps = _block(r, "step split", r.step_rows, None)
    communication = _block(r, "communication", lambda: r.communication(ops, steps),
                           parts.unread_communication(steps, "could not be read"))
    spans = parts.step_spans(compute + ops)
    copies, copies_per_step = _block(r, "copies", lambda: _copies(r, compute, spans, steps),
                                     parts.unread_copies("could not be read"))
    memory = _block(r, "memory", r.memory, [])
    allocations = _block(r, "allocations", r.allocations, [])
    return ev.RankProfile(
        rank=r.rank, source="torch_npu db", files=r.files,
        steps=parts.step_names(steps, spans), window_ms=parts.window_ms(compute + ops),
        operators=len(compute) + len(ops), top_operators=top, operator_totals=totals,
        framework_operators=[], communication=communication, copies=copies,
        step_times=parts.step_times(steps, copies_per_step), memory=memory,
        largest_allocations=allocations, problems=r.problems, notes=r.notes)
