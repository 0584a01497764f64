"""Device probes (npu-smi, nvidia-smi, none) and the resource-interference check.

A probe lists the processes on each logical device. The runner takes a snapshot before, during
and after each arm and asks `foreign_processes` whether anything but the engine used an assigned
device. Every parser fails closed: output it cannot read is "interference unknown", never "idle".
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ref2va_accept.evidence import DeviceKind

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class DeviceProcess:
    """A process on a logical device; container_pid is npu-smi's "Process id in container"."""

    device: int
    pid: int
    name: str
    memory_mb: float | None
    container_pid: int | None = None


@dataclass(frozen=True)
class DeviceSnapshot:
    """What one probe saw. readable=False means interference is unknown (fail closed)."""

    kind: str
    readable: bool
    devices: tuple[int, ...]
    processes: tuple[DeviceProcess, ...]
    memory_used_mb: dict[int, float]
    problem: str | None
    raw_sha256: str
    memory_total_mb: dict[int, float] = field(default_factory=dict)


def _sha(*texts: str) -> str:
    return hashlib.sha256("\x00".join(texts).encode()).hexdigest()


def _unreadable(kind: str, problem: str, *texts: str) -> DeviceSnapshot:
    return DeviceSnapshot(kind, False, (), (), {}, problem, _sha(*texts))


# --- npu-smi ------------------------------------------------------------------------------------

_BORDER = re.compile(r"^\s*\+[-=+]*\+?\s*$")
# First row of a chip block: NPU id, name, health.
_CHIP_ROW1 = re.compile(r"^\|\s*(\d+)\s+(\S[^|]*?)\s*\|\s*([A-Za-z][^|]*?)\s*\|")
# Second row: chip id (and, on A3, the physical id), bus id, then the usage columns.
_CHIP_ROW2 = re.compile(
    r"^\|\s*(\d+)(?:\s+(\d+))?\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*\|"
    r"(.*)\|\s*$")
_PAIR = re.compile(r"(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)")
_PROCESS_ROW = re.compile(
    r"^\|\s*(\d+)\s+(\d+)\s*\|\s*(\d+)\s*\|([^|]*)\|\s*(\d+(?:\.\d+)?|-|NA|N/A)\s*\|"
    r"(?:\s*(\d+|NA|N/A|-)\s*\|)?\s*$")
_IDLE_ROW = re.compile(r"^\|\s*No running processes found in NPU\s+(\d+)\s*\|?\s*$")


def parse_npu_smi_map(text: str) -> dict[tuple[int, int], int]:
    """`npu-smi info -m`: (NPU id, chip id) -> chip logic id. Mcu rows ("-") are no device."""
    lines = [line for line in text.splitlines() if line.strip()]
    header_at = next((i for i, line in enumerate(lines) if "Chip Logic ID" in line), None)
    if header_at is None:
        raise ValueError("npu-smi info -m: no 'Chip Logic ID' header; expected the mapping table")
    mapping: dict[tuple[int, int], int] = {}
    for line in lines[header_at + 1:]:
        cells = line.split()
        if len(cells) < 3 or not (cells[0].isdigit() and cells[1].isdigit()):
            raise ValueError(f"npu-smi info -m: unreadable row {line.strip()!r}")
        if cells[2].isdigit():
            mapping[(int(cells[0]), int(cells[1]))] = int(cells[2])
        elif cells[2] not in {"-", "NA", "N/A"}:
            raise ValueError(f"npu-smi info -m: logic id {cells[2]!r} in row {line.strip()!r}")
    if not mapping:
        raise ValueError("npu-smi info -m: the table lists no chip with a logic id")
    return mapping


def parse_npu_smi_info(text: str,
                       chip_map: Mapping[tuple[int, int], int] | None = None) -> DeviceSnapshot:
    """`npu-smi info`: chips, HBM use and processes, keyed by logical device id.

    Without chip_map, chips are numbered in the order listed, which is how logic ids are assigned
    on the hosts seen so far; the probe always passes the `-m` map so nothing rests on that.
    Anything unexpected (no header, a chip block without its second row, a process row of unknown
    shape, an NPU the process table never mentions) makes the snapshot unreadable.
    """
    digest = _sha(text)

    def unreadable(problem: str) -> DeviceSnapshot:
        return DeviceSnapshot("npu", False, (), (), {}, problem, digest)

    lines = text.splitlines()
    chip_header = next((i for i, line in enumerate(lines)
                        if "NPU" in line and "Name" in line and "Health" in line), None)
    if chip_header is None:
        first = next((line.strip() for line in lines if line.strip()), "")
        return unreadable(f"npu-smi info: no device table header; output began {first[:120]!r}")
    process_header = next((i for i, line in enumerate(lines)
                           if i > chip_header and "Process id" in line), None)
    if process_header is None:
        return unreadable("npu-smi info: no process table (output truncated?)")

    chips: list[tuple[int, int]] = []
    used: dict[tuple[int, int], float] = {}
    total: dict[tuple[int, int], float] = {}
    pending: int | None = None  # the NPU id of a chip block whose second row is still due
    for line in lines[chip_header + 1:process_header]:
        if not line.strip() or _BORDER.match(line):
            continue
        if pending is None:
            row1 = _CHIP_ROW1.match(line)
            if row1 is None:
                if "Chip" in line and "Bus-Id" in line:
                    continue  # the second header line
                return unreadable(f"npu-smi info: unreadable device row {line.strip()!r}")
            pending = int(row1.group(1))
            continue
        row2 = _CHIP_ROW2.match(line)
        if row2 is None:
            return unreadable(f"npu-smi info: NPU {pending} has no chip row; got {line.strip()!r}")
        key = (pending, int(row2.group(1)))
        pairs = _PAIR.findall(row2.group(4))
        if not pairs:
            return unreadable(f"npu-smi info: no memory figures for NPU {key[0]} chip {key[1]}")
        # The HBM column is the last used/total pair; without one, memory is on-chip DDR.
        used[key], total[key] = float(pairs[-1][0]), float(pairs[-1][1])
        chips.append(key)
        pending = None
    if pending is not None:
        return unreadable(f"npu-smi info: NPU {pending} block ends without its chip row")
    if not chips:
        return unreadable("npu-smi info: the device table lists no chip")
    if len(set(chips)) != len(chips):
        return unreadable("npu-smi info: a chip is listed twice")

    if chip_map is None:
        logical = {chip: index for index, chip in enumerate(chips)}
    else:
        missing = [chip for chip in chips if chip not in chip_map]
        if missing:
            return unreadable(f"npu-smi info: NPU {missing[0][0]} chip {missing[0][1]} is not "
                              "in the `npu-smi info -m` map")
        logical = {chip: chip_map[chip] for chip in chips}

    processes: list[DeviceProcess] = []
    mentioned: set[int] = set()
    for line in lines[process_header + 1:]:
        if not line.strip() or _BORDER.match(line) or not line.lstrip().startswith("|"):
            continue
        idle = _IDLE_ROW.match(line)
        if idle is not None:
            mentioned.add(int(idle.group(1)))
            continue
        row = _PROCESS_ROW.match(line)
        if row is None:
            return unreadable(f"npu-smi info: unreadable process row {line.strip()!r}")
        key = (int(row.group(1)), int(row.group(2)))
        if key not in logical:
            return unreadable(f"npu-smi info: a process on NPU {key[0]} chip {key[1]}, "
                              "which the device table does not list")
        memory = row.group(5)
        inner = row.group(6)
        processes.append(DeviceProcess(
            device=logical[key], pid=int(row.group(3)), name=row.group(4).strip(),
            memory_mb=float(memory) if memory[0].isdigit() else None,
            container_pid=int(inner) if inner is not None and inner.isdigit() else None))
        mentioned.add(key[0])
    unmentioned = sorted({npu for npu, _ in chips} - mentioned)
    if unmentioned:
        return unreadable(f"npu-smi info: the process table says nothing of NPU {unmentioned[0]} "
                          "(output truncated?)")
    return DeviceSnapshot(
        kind="npu", readable=True, devices=tuple(sorted(logical.values())),
        processes=tuple(processes),
        memory_used_mb={logical[chip]: used[chip] for chip in chips},
        problem=None, raw_sha256=digest,
        memory_total_mb={logical[chip]: total[chip] for chip in chips})


# --- nvidia-smi ---------------------------------------------------------------------------------

def _na(value: str) -> bool:
    return value.strip().strip("[]").upper() in {"N/A", "NA", "NOT SUPPORTED", ""}


def parse_nvidia_smi(apps_csv: str, gpus_csv: str) -> DeviceSnapshot:
    """nvidia-smi CSV (noheader, nounits): compute apps by GPU uuid, GPUs by index and uuid."""
    digest = _sha(apps_csv, gpus_csv)

    def unreadable(problem: str) -> DeviceSnapshot:
        return DeviceSnapshot("cuda", False, (), (), {}, problem, digest)

    uuid_to_index: dict[str, int] = {}
    used: dict[int, float] = {}
    for line in gpus_csv.splitlines():
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != 3 or not cells[0].isdigit() or not cells[1].startswith(("GPU-", "MIG-")):
            return unreadable(f"nvidia-smi --query-gpu: unreadable row {line.strip()!r}")
        index = int(cells[0])
        uuid_to_index[cells[1]] = index
        if not _na(cells[2]):
            try:
                used[index] = float(cells[2])
            except ValueError:
                return unreadable(f"nvidia-smi --query-gpu: memory {cells[2]!r} is not a number")
    if not uuid_to_index:
        return unreadable("nvidia-smi --query-gpu: no GPU listed")
    processes = []
    for line in apps_csv.splitlines():
        if not line.strip():
            continue
        # A process name may hold commas: pid from the left, memory and uuid from the right.
        head, _, rest = line.partition(",")
        cells = rest.rsplit(",", 2)
        if not head.strip().isdigit() or len(cells) != 3:
            return unreadable(f"nvidia-smi --query-compute-apps: unreadable row {line.strip()!r}")
        name, memory, uuid = (cell.strip() for cell in cells)
        if uuid not in uuid_to_index:
            return unreadable(f"nvidia-smi --query-compute-apps: unknown GPU {uuid!r}")
        try:
            memory_mb = None if _na(memory) else float(memory)
        except ValueError:
            return unreadable(f"nvidia-smi --query-compute-apps: memory {memory!r} is not a number")
        processes.append(DeviceProcess(uuid_to_index[uuid], int(head), name, memory_mb))
    return DeviceSnapshot("cuda", True, tuple(sorted(uuid_to_index.values())), tuple(processes),
                          used, None, digest)


# --- probes -------------------------------------------------------------------------------------

class DeviceProbe(Protocol):
    def snapshot(self) -> DeviceSnapshot: ...


def run_command(argv: Sequence[str], timeout_s: float, *, env: Mapping[str, str] | None = None,
                cwd: Path | None = None) -> tuple[str | None, str]:
    """(stdout, "") on success, (None, why) otherwise; never raises. Without `env` the
    command inherits this process's environment; standard input is closed."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s,
                              check=False, env=None if env is None else dict(env), cwd=cwd,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return None, f"{argv[0]} not found"
    except subprocess.TimeoutExpired:
        return None, f"{' '.join(argv)} did not finish within {timeout_s:g} s"
    except OSError as exc:
        return None, f"{' '.join(argv)}: {exc.strerror}"
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or [""]
        return None, f"{' '.join(argv)} exited {done.returncode}: {last[0][:200]}"
    return done.stdout, ""


@dataclass(frozen=True)
class NpuSmiProbe:
    """`npu-smi info -m` for the logical ids, then `npu-smi info` for the processes."""

    visible: tuple[int, ...] = ()
    executable: str = "npu-smi"
    timeout_s: float = PROBE_TIMEOUT_S

    def snapshot(self) -> DeviceSnapshot:
        map_text, why = run_command([self.executable, "info", "-m"], self.timeout_s)
        if map_text is None:
            return _unreadable("npu", why)
        try:
            chip_map = parse_npu_smi_map(map_text)
        except ValueError as exc:
            return _unreadable("npu", str(exc), map_text)
        info_text, why = run_command([self.executable, "info"], self.timeout_s)
        if info_text is None:
            return _unreadable("npu", why, map_text)
        return parse_npu_smi_info(info_text, chip_map)


@dataclass(frozen=True)
class NvidiaSmiProbe:
    visible: tuple[int, ...] = ()
    executable: str = "nvidia-smi"
    timeout_s: float = PROBE_TIMEOUT_S

    def snapshot(self) -> DeviceSnapshot:
        gpus, why = run_command([self.executable, "--query-gpu=index,uuid,memory.used",
                          "--format=csv,noheader,nounits"], self.timeout_s)
        if gpus is None:
            return _unreadable("cuda", why)
        apps, why = run_command([self.executable,
                          "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
                          "--format=csv,noheader,nounits"], self.timeout_s)
        if apps is None:
            return _unreadable("cuda", why, gpus)
        return parse_nvidia_smi(apps, gpus)


@dataclass(frozen=True)
class NoDeviceProbe:
    """The engine runs on CPU: there is no device another process could share."""

    def snapshot(self) -> DeviceSnapshot:
        return DeviceSnapshot("none", True, (), (), {}, None, _sha(""))


def probe_for(kind: DeviceKind, visible: Sequence[int]) -> DeviceProbe:
    if kind == "none":
        return NoDeviceProbe()
    if kind == "npu":
        return NpuSmiProbe(tuple(visible))
    if kind == "cuda":
        return NvidiaSmiProbe(tuple(visible))
    raise ValueError(f"device kind {kind!r}; expected none, npu or cuda")


# --- PID namespaces -----------------------------------------------------------------------------

def _nspid(pid: int, proc: Path) -> list[int] | None:
    try:
        status = (proc / str(pid) / "status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            values = line.split()[1:]
            return [int(v) for v in values] if all(v.isdigit() for v in values) else None
    return [pid]  # kernels before 4.1 have no NSpid line: no nesting to undo


def host_pid(container_pid: int, *, proc: Path = Path("/proc")) -> int | None:
    """The PID in the outermost namespace this /proc shows (NSpid's first entry)."""
    chain = _nspid(container_pid, proc)
    return chain[0] if chain else None


def container_pid_for(host_pid: int, *, proc: Path = Path("/proc")) -> int | None:
    """The innermost-namespace PID of the process whose outermost PID is host_pid, if visible."""
    direct = _nspid(host_pid, proc)
    if direct is not None and direct[0] == host_pid:
        return direct[-1]
    try:
        entries = [entry.name for entry in proc.iterdir() if entry.name.isdigit()]
    except OSError:
        return None
    for name in entries:
        chain = _nspid(int(name), proc)
        if chain and chain[0] == host_pid:
            return chain[-1]
    return None


# --- interference -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Interference:
    """A reason the run is not evaluable: a foreign process, or a probe that could not tell."""

    when: str
    device: int
    pid: int
    name: str
    reason: str
    detail: str = ""


def foreign_processes(snapshot: DeviceSnapshot, assigned: Sequence[int],
                      engine_pids: Collection[int], when: str, *,
                      proc: Path = Path("/proc")) -> list[Interference]:
    """Processes on assigned devices that are not the engine's; unreadable yields one entry."""
    if not snapshot.readable:
        return [Interference(when, -1, -1, "", "unreadable", snapshot.problem or "")]
    if snapshot.kind == "none":
        return []
    found = [Interference(when, device, -1, "", "device_not_listed",
                          f"assigned device {device} is not in the {snapshot.kind} probe's list")
             for device in assigned if device not in snapshot.devices]
    engine = set(engine_pids)
    # npu-smi in a container prints host PIDs; the engine's PIDs are ours. Compare both ways.
    engine_outer = {outer for pid in engine if (outer := host_pid(pid, proc=proc)) is not None}
    wanted = set(assigned)
    for process in snapshot.processes:
        if process.device not in wanted:
            continue
        if (process.pid in engine or process.pid in engine_outer
                or process.container_pid in engine
                or container_pid_for(process.pid, proc=proc) in engine):
            continue
        found.append(Interference(when, process.device, process.pid, process.name,
                                  "foreign_process",
                                  f"{process.memory_mb} MB" if process.memory_mb else ""))
    if found:
        log.info("%s: %d interference finding(s) on devices %s", when, len(found), list(assigned))
    return found


def own_pid_chain() -> list[int] | None:
    """This process's NSpid chain; a diagnostic for the evidence (are we in a container?)."""
    return _nspid(os.getpid(), Path("/proc"))
