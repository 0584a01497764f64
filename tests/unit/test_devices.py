"""Device probe parsers on recorded outputs, fail-closed behaviour, PID namespaces, interference."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ref2va_accept.engines import (
    DeviceSnapshot,
    NoDeviceProbe,
    container_pid_for,
    foreign_processes,
    host_pid,
    parse_npu_smi_info,
    parse_npu_smi_map,
    parse_nvidia_smi,
    probe_for,
)
from tests.unit.device_outputs import FIXTURES, recorded_output

pytestmark = pytest.mark.fast


def test_every_fixture_names_its_source() -> None:
    files = sorted(FIXTURES.glob("*.txt"))
    assert files
    for path in files:
        recorded_output(path.name)
        if "SYNTHETIC" in path.read_text().splitlines()[0]:
            assert path.name.startswith("synthetic-"), path.name


# name, logical devices, process rows, {device: (HBM used, HBM total)}
RECORDED_INFO = [
    ("npu-smi-info_910b3-a2-8npu-one-process.txt", 8, 1,
     {0: (3408, 65536), 2: (41052, 65536), 7: (3400, 65536)}),
    ("npu-smi-info_a3-ascend910-16chip-processes.txt", 16, 23,
     {0: (61609, 65536), 1: (61625, 65536), 15: (61631, 65536)}),
    ("npu-smi-info_910a-atlas800-9010-processes.txt", 8, 32,
     {0: (0, 32768), 3: (0, 32768)}),
    ("synthetic-npu-smi-info_a3-4chip-container-column.txt", 4, 1,
     {0: (3419, 65536), 3: (31877, 65536)}),
]


@pytest.mark.parametrize(("name", "devices", "rows", "hbm"), RECORDED_INFO)
def test_recorded_npu_smi_info(name: str, devices: int, rows: int,
                               hbm: dict[int, tuple[int, int]]) -> None:
    snapshot = parse_npu_smi_info(recorded_output(name))
    assert snapshot.readable, snapshot.problem
    assert snapshot.devices == tuple(range(devices))
    assert len(snapshot.processes) == rows
    for device, (used, total) in hbm.items():
        assert (snapshot.memory_used_mb[device], snapshot.memory_total_mb[device]) == (used, total)


def test_a2_process_row_with_empty_name() -> None:
    (process,) = parse_npu_smi_info(recorded_output("npu-smi-info_910b3-a2-8npu-one-process.txt")
                                    ).processes
    assert (process.device, process.pid, process.name, process.memory_mb) == (
        2, 1333928, "", 37709.0)


def test_a3_second_chip_of_a_card_is_its_own_logical_device() -> None:
    snapshot = parse_npu_smi_info(recorded_output("npu-smi-info_a3-ascend910-16chip-processes.txt"))
    on_card0_chip1 = [p for p in snapshot.processes if p.device == 1]
    assert [(p.pid, p.memory_mb) for p in on_card0_chip1] == [(929405, 58780.0)]
    assert [p.pid for p in snapshot.processes if p.device == 15] == [944268]


def test_container_column_is_read() -> None:
    (process,) = parse_npu_smi_info(
        recorded_output("synthetic-npu-smi-info_a3-4chip-container-column.txt")).processes
    assert (process.pid, process.container_pid, process.name) == (632268, 4321, "python3.1")


def test_chip_map_assigns_logical_ids() -> None:
    chip_map = parse_npu_smi_map(recorded_output("synthetic-npu-smi-info-m_a3-2card.txt"))
    assert chip_map == {(0, 0): 0, (0, 1): 1, (1, 0): 2, (1, 1): 3}
    reversed_map = {key: 3 - value for key, value in chip_map.items()}
    snapshot = parse_npu_smi_info(
        recorded_output("synthetic-npu-smi-info_a3-4chip-container-column.txt"), reversed_map)
    assert snapshot.processes[0].device == 3 and snapshot.memory_used_mb[0] == 31877


def test_chip_missing_from_map_is_unreadable() -> None:
    snapshot = parse_npu_smi_info(recorded_output("npu-smi-info_910b3-a2-8npu-one-process.txt"),
                                  {(0, 0): 0})
    assert not snapshot.readable and "not in the `npu-smi info -m` map" in (snapshot.problem or "")


@pytest.mark.parametrize(("name", "expected"), [
    ("npu-smi-info-m_910a-atlas800-9010.txt", {(i, 0): i for i in range(8)}),
    ("npu-smi-info-m_310p-atlas800-3000-mcu.txt", {(6, c): c for c in range(4)}),
])
def test_recorded_npu_smi_map(name: str, expected: dict[tuple[int, int], int]) -> None:
    assert parse_npu_smi_map(recorded_output(name)) == expected


@pytest.mark.parametrize("text", ["", "garbage\n", "NPU ID  Chip ID  Chip Logic ID\n0 x 0\n"])
def test_bad_map_raises(text: str) -> None:
    with pytest.raises(ValueError, match="npu-smi info -m"):
        parse_npu_smi_map(text)


def _cut(text: str, marker: str) -> str:
    return text[: text.index(marker)]


A2 = "npu-smi-info_910b3-a2-8npu-one-process.txt"


@pytest.mark.parametrize("text", [
    "",
    "dcmi model initialized failed, because the device is used. ret is -8020\n",
    "DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)\n\x00\xff garbage |||\n",
    _cut(recorded_output(A2), "| NPU     Chip"),                       # no process table
    _cut(recorded_output(A2), "| No running processes found in NPU 5"),  # process table cut short
    "\n".join(line for line in recorded_output(A2).splitlines()  # a chip block without its row 2
              if "0000:C2:00.0" not in line),
    recorded_output(A2).replace("| 2       0                 | 1333928 ",
                                "| 2       0  | 13x3928 "),
    recorded_output(A2).replace("| 2       0                 | 1333928 ",
                                "| 9       0  | 1333928 "),
])
def test_unreadable_npu_smi_is_fail_closed(text: str) -> None:
    snapshot = parse_npu_smi_info(text)
    assert not snapshot.readable and snapshot.problem
    assert snapshot.processes == () and snapshot.devices == ()


def test_nvidia_smi_csv() -> None:
    snapshot = parse_nvidia_smi(recorded_output("synthetic-nvidia-smi-compute-apps.csv.txt"),
                                recorded_output("synthetic-nvidia-smi-gpus.csv.txt"))
    assert snapshot.readable and snapshot.devices == (0, 1)
    assert [(p.device, p.pid, p.name, p.memory_mb) for p in snapshot.processes] == [
        (0, 2310411, "/usr/bin/python3", 70312.0), (0, 2310988, "VLLM::EngineCore", None),
        (1, 77120, "python", 1024.0)]
    assert snapshot.memory_used_mb == {0: 71234.0, 1: 1536.0}


def test_nvidia_smi_idle_and_names_with_commas() -> None:
    gpus = "0, GPU-aaaa, 3\n"
    assert parse_nvidia_smi("", gpus).processes == ()
    (process,) = parse_nvidia_smi("12, python a,b.py, 100, GPU-aaaa\n", gpus).processes
    assert process.name == "python a,b.py" and process.memory_mb == 100.0


@pytest.mark.parametrize(("apps", "gpus"), [
    ("", ""),
    ("12, python, 100, GPU-unknown\n", "0, GPU-aaaa, 3\n"),
    ("twelve, python, 100, GPU-aaaa\n", "0, GPU-aaaa, 3\n"),
    ("", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"),
])
def test_unreadable_nvidia_smi_is_fail_closed(apps: str, gpus: str) -> None:
    snapshot = parse_nvidia_smi(apps, gpus)
    assert not snapshot.readable and snapshot.problem


def test_no_device_probe_is_readable_and_empty() -> None:
    snapshot = probe_for("none", []).snapshot()
    assert isinstance(probe_for("none", []), NoDeviceProbe)
    assert snapshot.readable and snapshot.processes == ()
    assert foreign_processes(snapshot, [], {1}, "before") == []


def _fake_proc(tmp_path: Path, chains: dict[int, list[int]]) -> Path:
    for pid, chain in chains.items():
        folder = tmp_path / "proc" / str(pid)
        folder.mkdir(parents=True)
        (folder / "status").write_text("Name:\tpython\nNSpid:\t" + "\t".join(map(str, chain))
                                       + "\n")
    return tmp_path / "proc"


def test_nspid_mapping(tmp_path: Path) -> None:
    # Seen from the host: the engine is 632268 outside and 4321 inside its container.
    proc = _fake_proc(tmp_path, {632268: [632268, 4321], 700: [700]})
    assert host_pid(632268, proc=proc) == 632268
    assert container_pid_for(632268, proc=proc) == 4321
    assert container_pid_for(999, proc=proc) is None
    assert host_pid(999, proc=proc) is None


def test_own_process_maps_to_itself() -> None:
    assert host_pid(os.getpid()) is not None
    assert container_pid_for(host_pid(os.getpid()) or -1) == os.getpid()


def _a3() -> DeviceSnapshot:
    return parse_npu_smi_info(
        recorded_output("synthetic-npu-smi-info_a3-4chip-container-column.txt"))


def test_engine_process_is_not_interference(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, {})
    # npu-smi prints the host PID 632268; the engine knows itself as 4321 in the container.
    assert foreign_processes(_a3(), [0, 1], {4321}, "before", proc=proc) == []
    assert foreign_processes(_a3(), [0], {632268}, "before", proc=proc) == []


def test_foreign_process_on_assigned_device(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, {})
    (found,) = foreign_processes(_a3(), [0, 1], {55}, "during", proc=proc)
    assert (found.when, found.device, found.pid, found.reason) == (
        "during", 0, 632268, "foreign_process")
    assert foreign_processes(_a3(), [2, 3], {55}, "during", proc=proc) == []


def test_unreadable_snapshot_yields_one_interference() -> None:
    (found,) = foreign_processes(parse_npu_smi_info("garbage"), [0], {1}, "after")
    assert found.reason == "unreadable" and found.when == "after" and found.detail


def test_assigned_device_not_listed_is_interference(tmp_path: Path) -> None:
    found = foreign_processes(_a3(), [7], set(), "before", proc=_fake_proc(tmp_path, {}))
    assert [f.reason for f in found] == ["device_not_listed"]
