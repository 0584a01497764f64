"""Profiles in torch_npu's formats, for the judge's tests and the `profile` command's examples:
what torch_npu's offline analysis (``torch_npu.profiler.profiler.analyse``) writes for one rank of
H3's DiT on the 910C, with made-up but consistent figures.

    python scripts/npu_profile_fixtures.py --write fixtures/profiles/npu   # b0/ and candidate/
    python scripts/npu_profile_fixtures.py --check fixtures/profiles/npu   # bytes unchanged?

Where each file and column comes from (torch_npu 2.6.0's analysis, torch_npu/profiler/analysis/;
CANN's msprof writes op_summary and the communication analysis, which torch_npu copies):

- ``<worker>_<pid>_<stamp>_ascend_pt/``, one per rank: _profiler_path_creator.py.
- ``profiler_info_<rank>.json`` (config, torch_npu_version, cann_version, rank_id; the rank is
  read from the file's name): profiler_interface.py ``_dump_profiler_info``.
- ``profiler_metadata.json`` (parallel_group_info: group_name, group_rank, global_ranks):
  ``_dump_metadata``.
- ``kernel_details.csv``: prof_view/_kernel_view_parser.py and _csv_headers.py over CANN's
  op_summary. Step Id first, only where ProfilerStep marks exist; then op_summary's columns,
  Op Name, OP Type, Task Type, Task Start Time(us), Task Duration(us), Task Wait Time(us)
  renamed Name, Type, Accelerator Core, Start Time(us), Duration(us), Wait Time(us); at level 0
  (no AI Core metrics) only the eight shown columns. Shapes are a quoted string
  (``"4096,1024;4096,1024"``: ',' between dimensions, ';' between inputs); start times are µs
  strings ending in a tab; communication tasks have core COMMUNICATION (HCCL on older CANN).
- ``op_statistic.csv`` (OP Type, Core Type, Count, Total/Min/Avg/Max Time(us), Ratio(%)):
  copied from CANN.
- ``operator_details.csv`` (Name, Input Shapes with ';' and CRLF between inputs, Call Stack,
  Host and Device Self/Total Duration(us), Device ... With AICore(us)):
  prof_view/_operator_view_parser.py.
- ``step_trace_time.csv`` (Device_id, Step, Computing, Communication(Not Overlapped),
  Overlapped, Communication, Free, Stage, Bubble, Communication(Not Overlapped and Exclude
  Receive), Preparing; µs; Overlapped = Communication - Not Overlapped):
  prof_view/_trace_step_time_parser.py.
- ``communication.json`` ({"step<N>": {"collective"/"p2p": {"<op>@<group>": {"Communication
  Time Info": {Start Timestamp(us), Elapse/Transit/Wait/Synchronization/Idle Time(ms), Wait and
  Synchronization Time Ratio}, "Communication Bandwidth Info": {RDMA, HCCS, PCIE, SDMA, SIO}},
  "Total Op Info": ...}}}): prof_view/_communication_parser.py over CANN's analysis.
- ``communication_matrix.json`` ({"step<N>": {"collective": {"<type>-<top1|middle|bottom1|
  total>@<group>": {"<src>-<dst>": {Transport Type, Transit Size(MB), Transit Time(ms),
  Bandwidth(GB/s), Op Name}}}}}): the same.
- ``trace_view.json``: a JSON array of Chrome events, processes named by ``process_name``
  metadata (Python, Ascend Hardware, Communication, Overlap Analysis), ``ts`` a µs string; copies
  are Ascend Hardware tasks named MEMCPY_ASYNC (Task Type PCIE_DMA_SQE; newer CANN adds
  ``operation`` and ``size(B)``): prof_view/_trace_view_parser.py over CANN's timeline.
- ``memory_record.csv`` (Component: PTA, GE, PTA+GE, APP; Timestamp(us), Total Allocated,
  Reserved and Active(MB), Stream Ptr, Device Type) and ``operator_memory.csv`` (Name, Size(KB),
  Allocation/Release/Active Release Time(us), Duration(us), Active Duration(us), the totals at
  allocation and release (MB), Stream Ptr, Device Type): prof_view/_memory_view_parser.py.

The figures are a plausible 4-rank DiT step (sequence parallel, an all-reduce per block): B0,
and a candidate that caches part of its attention (fewer FlashAttentionScore and MatMulV3 calls,
a new Sub for the cached residual). Variants (the tests' planted cases) come from ``Variant``.
"""

from __future__ import annotations

import argparse
import csv
import filecmp
import io
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

START_US = 1764246877079027.200
GROUP = "17522688603477080586"
MB = 2**20


@dataclass(frozen=True)
class Kernel:
    type: str
    name: str
    core: str
    shapes: str
    dtypes: str
    outputs: str
    us: float
    calls: int  # per step


B0_KERNELS = (
    Kernel("FlashAttentionScore",
           "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore", "MIX_AIC",
           "1,40,4096,128;1,40,16384,128;1,40,16384,128", "DT_BF16;DT_BF16;DT_BF16",
           "1,40,4096,128", 2100.0, 8),
    Kernel("MatMulV3", "aclnnMatmul_MatMulV3Common_MatMulV3", "AI_CORE",
           "4096,5120;5120,5120", "DT_BF16;DT_BF16", "4096,5120", 420.0, 32),
    Kernel("MatMulV3", "aclnnMatmul_MatMulV3Common_MatMulV3", "AI_CORE",
           "4096,5120;5120,13824", "DT_BF16;DT_BF16", "4096,13824", 980.0, 8),
    Kernel("RmsNorm", "aclnnRmsNorm_RmsNorm_RmsNorm", "AI_VECTOR_CORE", "1,4096,5120;5120",
           "DT_BF16;DT_BF16", "1,4096,5120", 35.0, 16),
    Kernel("RotaryPositionEmbedding", "aclnnRotaryPositionEmbedding_RotaryPositionEmbedding",
           "AI_VECTOR_CORE", "1,4096,40,128;1,4096,1,128;1,4096,1,128",
           "DT_BF16;DT_BF16;DT_BF16", "1,4096,40,128", 60.0, 16),
    Kernel("Add", "aclnnAdd_AddAiCore_Add", "AI_VECTOR_CORE", "1,4096,5120;1,4096,5120",
           "DT_BF16;DT_BF16", "1,4096,5120", 18.0, 24),
    Kernel("Cast", "aclnnCast_CastAiCore_Cast", "AI_VECTOR_CORE", "1,4096,5120",
           "DT_BF16", "1,4096,5120", 12.0, 8),
)
CANDIDATE_KERNELS = (
    Kernel("FlashAttentionScore", B0_KERNELS[0].name, "MIX_AIC", B0_KERNELS[0].shapes,
           B0_KERNELS[0].dtypes, B0_KERNELS[0].outputs, 2100.0, 4),
    Kernel("MatMulV3", B0_KERNELS[1].name, "AI_CORE", B0_KERNELS[1].shapes,
           B0_KERNELS[1].dtypes, B0_KERNELS[1].outputs, 420.0, 16),
    B0_KERNELS[2], B0_KERNELS[3], B0_KERNELS[4], B0_KERNELS[5],
    Kernel("Sub", "aclnnSub_SubAiCore_Sub", "AI_VECTOR_CORE", "1,4096,5120;1,4096,5120",
           "DT_BF16;DT_BF16", "1,4096,5120", 20.0, 8),
)


@dataclass(frozen=True)
class Variant:
    """One arm's profile, and what a test plants in it."""

    arm: str = "b0"
    ranks: tuple[int, ...] = (0, 1, 2, 3)
    steps: tuple[str, ...] = ("1",)
    allreduce_us: float = 900.0      # per call; 8 calls per step
    overlapped_fraction: float = 0.3  # of each all-reduce, run beside compute
    slow_link: str = "0-3"           # the link with the lowest bandwidth
    copies_per_step: int = 2         # MEMCPY_ASYNC H2D tasks per step
    copy_us: float = 150.0
    copy_bytes: int = 64 * MB
    copy_args: bool = True           # newer CANN: operation and size(B) on copy tasks
    level0: bool = False             # 8 kernel columns, no shapes, no step split
    old_cann: bool = False           # no Device_id, communication core HCCL
    extra_column: str | None = None  # a column this reader does not know
    skip: tuple[str, ...] = ()       # files not written
    truncate: str | None = None      # a file cut in the middle of a row
    raw_ranks: tuple[int, ...] = ()  # folders left un-analysed
    peak_allocated_mb: float = 30000.0
    kernels: tuple[Kernel, ...] = field(default=B0_KERNELS)


def candidate() -> Variant:
    return Variant(arm="candidate", kernels=CANDIDATE_KERNELS, peak_allocated_mb=31500.0)


def _csv(rows: list[list[object]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows(rows)  # torch_npu: csv.writer, CRLF
    return out.getvalue()


def _ts(us: float) -> str:
    return f"{us:.3f}\t"  # CANN and torch_npu write start times as µs strings with a tab


def _timeline(v: Variant, rank: int) -> dict[str, list[dict[str, object]]]:
    """Per step, the device tasks in order: kernels (compute), all-reduces, copies."""
    steps: dict[str, list[dict[str, object]]] = {}
    t = START_US + rank * 3.0
    comm_type = "HCCL" if v.old_cann else "COMMUNICATION"
    for index, step in enumerate(v.steps):
        tasks: list[dict[str, object]] = []
        blocks = 8
        for block in range(blocks):
            for kernel in v.kernels:
                per_block = kernel.calls // blocks + (1 if block < kernel.calls % blocks else 0)
                for _ in range(per_block):
                    us = kernel.us * (1.0 + 0.01 * rank)
                    tasks.append({"kind": "kernel", "k": kernel, "start": t, "us": us,
                                  "core": kernel.core, "step": step})
                    t += us + 2.0
            overlap = v.allreduce_us * v.overlapped_fraction
            start = t - overlap  # the all-reduce starts while the block's last kernels run
            tasks.append({"kind": "comm", "start": start, "us": v.allreduce_us,
                          "core": comm_type, "step": step,
                          "name": f"hcom_allReduce__{586 + index * blocks + block}_0_1"})
            t = start + v.allreduce_us + 2.0
        for c in range(v.copies_per_step):
            start = tasks[c * 3]["start"]
            tasks.append({"kind": "copy", "start": start, "us": v.copy_us, "step": step,
                          "direction": "host to device"})
        steps[step] = tasks
        t += 400.0  # the host's gap before the next step
    return steps


def _kernel_details(v: Variant, rank: int, steps: dict[str, list[dict[str, object]]]) -> str:
    marked = not v.level0
    header = (["Step Id"] if marked else []) + (
        ["Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)",
         "Block Dim"] if v.level0 else
        ([] if v.old_cann else ["Device_id"])
        + ["Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State", "Accelerator Core",
           "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim", "Mix Block Dim",
           "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats",
           "Output Shapes", "Output Data Types", "Output Formats", "Context ID",
           "aicore_time(us)", "aic_mac_ratio", "aiv_vec_ratio", "cube_utilization(%)"])
    if v.extra_column:
        header.append(v.extra_column)
    rows: list[list[object]] = [header]
    task_id = 30000
    for step, tasks in steps.items():
        for task in tasks:
            if task["kind"] == "copy":
                continue  # copies are not in kernel_details (trace_view only)
            task_id += 1
            us = float(task["us"])  # type: ignore[arg-type]
            if task["kind"] == "kernel":
                k: Kernel = task["k"]  # type: ignore[assignment]
                name, type_, core = k.name, k.type, k.core
                shapes, dtypes, outputs = f'"{k.shapes}"', k.dtypes, f'"{k.outputs}"'
                pmu = [f"{us * 0.97:.3f}", "0.78", "0.12", "97.3"]
            else:
                name = str(task["name"])
                type_, core = name.split("__")[0] + "_", str(task["core"])
                shapes = dtypes = outputs = "N/A"
                pmu = ["N/A"] * 4
            start = float(task["start"])  # type: ignore[arg-type]
            if v.level0:
                row: list[object] = [name, "N/A" if task["kind"] == "kernel" else type_,
                                     "N/A" if task["kind"] == "kernel" else core, _ts(start),
                                     f"{us:.3f}", "2.0", 20]
            else:
                row = ([] if v.old_cann else [rank]) + [
                    4294967295, task_id if task["kind"] == "kernel" else "N/A", 2,
                    name, type_, "dynamic", core, _ts(start), f"{us:.3f}", "2.000000", 20, 0,
                    "NO", shapes, dtypes, "ND;ND", outputs, "DT_BF16", "ND", "N/A", *pmu]
            if marked:
                row = [step, *row]
            if v.extra_column:
                row.append("x")
            rows.append(row)
    return _csv(rows)


def _overlap(tasks: list[dict[str, object]]) -> dict[str, float]:
    def spans(kind: str) -> list[tuple[float, float]]:
        out = sorted((float(t["start"]), float(t["start"]) + float(t["us"]))  # type: ignore[arg-type]
                     for t in tasks if t["kind"] == kind)
        merged: list[tuple[float, float]] = []
        for s, e in out:
            if merged and s <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], e))
            else:
                merged.append((s, e))
        return merged

    compute, comm = spans("kernel"), spans("comm")
    both = sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in compute for s2, e2 in comm)
    computing = sum(e - s for s, e in compute)
    communication = sum(e - s for s, e in comm)
    first = min(s for s, _ in compute + comm)
    last = max(e for _, e in compute + comm)
    return {"Computing": computing, "Communication(Not Overlapped)": communication - both,
            "Overlapped": both, "Communication": communication,
            "Free": (last - first) - computing - (communication - both), "Stage": last - first}


def _step_trace(v: Variant, rank: int, steps: dict[str, list[dict[str, object]]]) -> str:
    header = ([] if v.old_cann else ["Device_id"]) + [
        "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication",
        "Free", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)",
        "Preparing"]
    rows: list[list[object]] = [header]
    for step, tasks in steps.items():
        o = _overlap(tasks)
        rows.append(([] if v.old_cann else [rank]) + [
            step, o["Computing"], o["Communication(Not Overlapped)"], o["Overlapped"],
            o["Communication"], o["Free"], o["Stage"], 0,
            o["Communication(Not Overlapped)"], 206.25])
    return _csv(rows)


def _op_statistic(v: Variant, rank: int, steps: dict[str, list[dict[str, object]]]) -> str:
    totals: dict[tuple[str, str], list[float]] = {}
    for tasks in steps.values():
        for task in tasks:
            if task["kind"] == "kernel":
                k: Kernel = task["k"]  # type: ignore[assignment]
                totals.setdefault((k.type, k.core), []).append(float(task["us"]))  # type: ignore[arg-type]
    whole = sum(sum(x) for x in totals.values())
    rows: list[list[object]] = [([] if v.old_cann else ["Device_id"]) + [
        "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
        "Max Time(us)", "Ratio(%)"]]
    for (type_, core), times in sorted(totals.items(), key=lambda kv: -sum(kv[1])):
        rows.append(([] if v.old_cann else [rank]) + [
            type_, core, len(times), round(sum(times), 3), round(min(times), 3),
            round(sum(times) / len(times), 3), round(max(times), 3),
            round(100 * sum(times) / whole, 3)])
    return _csv(rows)


def _operator_details(v: Variant) -> str:
    rows: list[list[object]] = [[
        "Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
        "Device Self Duration(us)", "Device Total Duration(us)",
        "Device Self Duration With AICore(us)", "Device Total Duration With AICore(us)"]]
    aten = {"FlashAttentionScore": "npu::npu_fusion_attention", "MatMulV3": "aten::mm",
            "RmsNorm": "npu::npu_rms_norm", "Add": "aten::add", "Sub": "aten::sub",
            "Cast": "aten::to", "RotaryPositionEmbedding": "npu::npu_rotary_mul"}
    for k in v.kernels:
        total = k.us * k.calls * len(v.steps)
        rows.append([aten.get(k.type, k.type), k.shapes.replace(";", ";\r\n") + ";\r\n", "",
                     round(12.5 * k.calls, 2), round(15.0 * k.calls, 2), round(total, 3),
                     round(total, 3), round(total if k.core == "AI_CORE" else 0.0, 3),
                     round(total if k.core == "AI_CORE" else 0.0, 3)])
    rows.append(["aten::copy_", "1,4096,5120;\r\n1,4096,5120;\r\n", "", 40.0, 48.0, 0,
                 round(v.copy_us * v.copies_per_step * len(v.steps), 3), 0, 0])
    return _csv(rows)


def _communication(v: Variant, steps: dict[str, list[dict[str, object]]]) -> str:
    data: dict[str, object] = {}
    for step, tasks in steps.items():
        ops: dict[str, object] = {}
        totals = {"Elapse Time(ms)": 0.0, "Transit Time(ms)": 0.0, "Wait Time(ms)": 0.0,
                  "Synchronization Time(ms)": 0.0, "Idle Time(ms)": 0.0}
        for task in tasks:
            if task["kind"] != "comm":
                continue
            elapse = float(task["us"]) / 1000  # type: ignore[arg-type]
            info = {"Start Timestamp(us)": float(task["start"]),  # type: ignore[arg-type]
                    "Elapse Time(ms)": elapse, "Transit Time(ms)": elapse * 0.6,
                    "Wait Time(ms)": elapse * 0.3, "Synchronization Time(ms)": elapse * 0.05,
                    "Idle Time(ms)": elapse * 0.1, "Wait Time Ratio": 0.3333,
                    "Synchronization Time Ratio": 0.0769}
            for key in totals:
                totals[key] += float(info[key])
            size = 40.0
            bandwidth = {t: {"Transit Size(MB)": size if t == "HCCS" else 0,
                             "Transit Time(ms)": elapse * 0.6 if t == "HCCS" else 0,
                             "Bandwidth(GB/s)": round(size / 1024 / (elapse * 0.6 / 1000), 4)
                             if t == "HCCS" else 0,
                             "Large Packet Ratio": 0, "Size Distribution": {}}
                         for t in ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")}
            ops[f"{task['name']}@{GROUP}"] = {"Communication Time Info": info,
                                              "Communication Bandwidth Info": bandwidth}
        if ops:
            ops["Total Op Info"] = {"Communication Time Info": {
                **totals, "Wait Time Ratio": 0.3333, "Synchronization Time Ratio": 0.0769},
                "Communication Bandwidth Info": {}}
        data[f"step{step}"] = {"p2p": {}, "collective": ops}
    return json.dumps(data, separators=(",", ":"))


def _matrix(v: Variant, rank: int, steps: dict[str, list[dict[str, object]]]) -> str:
    data: dict[str, object] = {}
    for step, tasks in steps.items():
        calls = [t for t in tasks if t["kind"] == "comm"]
        links: dict[str, object] = {}
        for other in v.ranks:
            link = f"{rank}-{other}"
            if other == rank:
                links[link] = {"Transport Type": "LOCAL", "Transit Size(MB)": 40.0 * len(calls),
                               "Transit Time(ms)": 0.5, "Bandwidth(GB/s)": 78.125}
                continue
            slow = link == v.slow_link or link == "-".join(reversed(v.slow_link.split("-")))
            size = 13.33 * len(calls)
            time_ms = (0.9 if slow else 0.35) * len(calls)
            links[link] = {"Transport Type": "HCCS", "Transit Size(MB)": round(size, 3),
                           "Transit Time(ms)": round(time_ms, 3),
                           "Bandwidth(GB/s)": round(size / 1024 / (time_ms / 1000), 4)}
        top = {k: {**x, "Op Name": str(calls[0]["name"])} for k, x in links.items()}  # type: ignore[dict-item]
        data[f"step{step}"] = {"p2p": {}, "collective": {
            f"allreduce-top1@{GROUP}": top, f"allreduce-middle@{GROUP}": top,
            f"allreduce-bottom1@{GROUP}": top, f"allreduce-total@{GROUP}": links}}
    return json.dumps(data, separators=(",", ":"))


def _trace_view(v: Variant, steps: dict[str, list[dict[str, object]]]) -> str:
    events: list[dict[str, object]] = []
    for pid, name in ((1, "Python"), (2, "Ascend Hardware"), (3, "Communication"),
                      (4, "Overlap Analysis")):
        events.append({"name": "process_name", "pid": pid, "tid": 0, "ph": "M",
                       "args": {"name": name}})
    for step, tasks in steps.items():
        first = min(float(t["start"]) for t in tasks)  # type: ignore[arg-type]
        last = max(float(t["start"]) + float(t["us"]) for t in tasks)  # type: ignore[arg-type]
        events.append({"ph": "X", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 7,
                       "ts": f"{first - 206.25:.3f}", "dur": last - first + 206.25,
                       "cat": "cpu_op", "args": {}})
        for task in tasks:
            start = f"{float(task['start']):.3f}"  # type: ignore[arg-type]
            if task["kind"] == "kernel":
                k: Kernel = task["k"]  # type: ignore[assignment]
                events.append({"ph": "X", "name": k.name, "pid": 2, "tid": 2, "ts": start,
                               "dur": task["us"], "args": {"Task Type": k.core,
                                                           "Physic Stream Id": 2}})
            elif task["kind"] == "comm":
                events.append({"ph": "X", "name": task["name"], "pid": 3, "tid": 0,
                               "ts": start, "dur": task["us"], "args": {}})
            else:
                args: dict[str, object] = {"Task Type": "PCIE_DMA_SQE", "Physic Stream Id": 5}
                if v.copy_args:
                    args |= {"operation": task["direction"], "size(B)": v.copy_bytes}
                events.append({"ph": "X", "name": "MEMCPY_ASYNC", "pid": 2, "tid": 5,
                               "ts": start, "dur": v.copy_us, "args": args})
    return json.dumps(events, separators=(",", ":"))


def _memory(v: Variant, rank: int) -> tuple[str, str]:
    device = f"NPU:{rank}"
    rows: list[list[object]] = [["Component", "Timestamp(us)", "Total Allocated(MB)",
                                 "Total Reserved(MB)", "Total Active(MB)", "Stream Ptr",
                                 "Device Type"],
                                ["APP", _ts(START_US - 5000), "", 52000.0, "", "", device]]
    peak = v.peak_allocated_mb + 100 * rank
    for i, fraction in enumerate((0.6, 0.85, 1.0, 0.9)):
        at = _ts(START_US + i * 2000)
        allocated = round(peak * fraction, 4)
        rows.append(["PTA", at, allocated, 36000.0, round(allocated + 64, 4), 2, device])
        rows.append(["PTA+GE", at, allocated + 49.125, 36074.75, allocated + 64, 2, device])
    rows.append(["GE", _ts(START_US + 9000), 49.125, 74.75, "", "", device])
    ops: list[list[object]] = [[
        "Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
        "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
        "Allocation Total Reserved(MB)", "Allocation Total Active(MB)",
        "Release Total Allocated(MB)", "Release Total Reserved(MB)", "Release Total Active(MB)",
        "Stream Ptr", "Device Type"]]
    for i, (name, kb) in enumerate((("npu::npu_fusion_attention", 327680.0),
                                    ("aten::mm", 143360.0), ("aten::empty_strided", 40960.0),
                                    ("aten::add", 40960.0), ("cann::trans_TransData_0", 512.0))):
        at = START_US + i * 500
        released = "" if name == "aten::empty_strided" else _ts(at + 900)
        ops.append([name, kb, _ts(at), released, released,
                    "" if not released else _ts(900.0), "" if not released else _ts(900.0),
                    25000.0, 36000.0, 25064.0, 24800.0, 36000.0, 24864.0, 2, device])
    return _csv(rows), _csv(ops)


def write_rank(parent: Path, rank: int, v: Variant) -> Path:
    """One rank's ``*_ascend_pt`` folder as torch_npu's analysis leaves it."""
    folder = parent / f"worker_{rank}_{31000 + rank}_20261206080000{rank:03d}_ascend_pt"
    out = folder / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)  # (FRAMEWORK/, torch_npu's raw records, is not read: left out)
    info = {"config": {"common_config": {"activities": ["ProfilerActivity.CPU",
                                                        "ProfilerActivity.NPU"],
                                         "schedule": None, "record_shapes": True,
                                         "profile_memory": True, "with_stack": False,
                                         "with_flops": False, "with_modules": False},
                       "experimental_config": {"_profiler_level": "Level0" if v.level0
                                               else "Level1",
                                               "_aic_metrics": "ACL_AICORE_NONE" if v.level0
                                               else "ACL_AICORE_PIPE_UTILIZATION",
                                               "_export_type": ["text"],
                                               "_data_simplification": True}},
            "torch_npu_version": "2.6.0", "cann_version": "8.2.RC1", "rank_id": str(rank)}
    (folder / f"profiler_info_{rank}.json").write_text(json.dumps(info, indent=4))
    (folder / "profiler_metadata.json").write_text(json.dumps({"parallel_group_info": {
        GROUP: {"group_name": "default_group", "group_rank": rank,
                "global_ranks": list(v.ranks)}}}))
    if rank in v.raw_ranks:
        shutil.rmtree(out)
        (folder / "PROF_000001_20261206080000000_ABCDEFG").mkdir()
        return folder
    steps = _timeline(v, rank)
    memory_record, operator_memory = _memory(v, rank)
    files = {"kernel_details.csv": _kernel_details(v, rank, steps),
             "op_statistic.csv": _op_statistic(v, rank, steps),
             "operator_details.csv": _operator_details(v),
             "communication.json": _communication(v, steps),
             "communication_matrix.json": _matrix(v, rank, steps),
             "trace_view.json": _trace_view(v, steps),
             "memory_record.csv": memory_record, "operator_memory.csv": operator_memory}
    if not v.level0:
        files["step_trace_time.csv"] = _step_trace(v, rank, steps)
    for name, content in files.items():
        if name in v.skip:
            continue
        written = content
        if name == v.truncate:  # cut inside a row (a CSV) or inside the JSON
            body = content.find("\n") + 1 if name.endswith(".csv") else 0
            written = content[: body + (len(content) - body) * 2 // 3]
            if name.endswith(".csv"):
                written = written[: written.rfind(",") + 1]
        (out / name).write_text(written, encoding="utf-8", newline="")
    return folder


def write_arm(parent: Path, v: Variant, present: tuple[int, ...] | None = None) -> Path:
    """Every rank of one arm under ``parent`` (``present``: the ranks written, default all)."""
    parent.mkdir(parents=True, exist_ok=True)
    for rank in v.ranks if present is None else present:
        write_rank(parent, rank, v)
    return parent


def write_all(root: Path) -> None:
    write_arm(root / "b0", Variant())
    write_arm(root / "candidate", candidate())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path, metavar="FOLDER")
    group.add_argument("--check", type=Path, metavar="FOLDER")
    args = parser.parse_args(argv)
    if args.write:
        shutil.rmtree(args.write, ignore_errors=True)
        write_all(args.write)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch)
        write_all(fresh)
        differ = _differences(fresh, args.check)
    for line in differ:
        print(line, file=sys.stderr)
    return 1 if differ else 0


def _differences(a: Path, b: Path) -> list[str]:
    # Files only: git keeps no empty folder, so a clean checkout has none.
    names = ({p.relative_to(a) for p in a.rglob("*") if p.is_file()}
             | {p.relative_to(b) for p in b.rglob("*") if p.is_file()})
    out = []
    for name in sorted(names):
        left, right = a / name, b / name
        if not (left.is_file() and right.is_file()) or not filecmp.cmp(left, right,
                                                                       shallow=False):
            out.append(f"{name}: differs from what the script writes (run it with --write)")
    return out


if __name__ == "__main__":
    sys.exit(main())
