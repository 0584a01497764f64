"""The NPU probe runs npu-smi as the judge runs it on the host, in a subprocess: here a stand-in
script that prints recorded output, fails, hangs past the timeout, or is not there."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ref2va_accept.engines import NpuSmiProbe
from tests.unit.device_outputs import recorded_output


def _fake_npu_smi(tmp_path: Path, body: str) -> str:
    script = tmp_path / "npu-smi"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_npu_probe_runs_map_then_info(tmp_path: Path) -> None:
    (tmp_path / "m.txt").write_text(recorded_output("synthetic-npu-smi-info-m_a3-2card.txt"))
    (tmp_path / "i.txt").write_text(
        recorded_output("synthetic-npu-smi-info_a3-4chip-container-column.txt"))
    exe = _fake_npu_smi(tmp_path, f'if [ "$2" = "-m" ]; then cat {tmp_path}/m.txt; '
                                  f"else cat {tmp_path}/i.txt; fi\n")
    snapshot = NpuSmiProbe((0, 1), executable=exe).snapshot()
    assert snapshot.readable and snapshot.devices == (0, 1, 2, 3)


@pytest.mark.parametrize("body", ["echo 'dcmi model initialized failed' >&2; exit 1\n",
                                  "sleep 5\n"])
def test_npu_probe_failure_is_unreadable(tmp_path: Path, body: str) -> None:
    snapshot = NpuSmiProbe((0,), executable=_fake_npu_smi(tmp_path, body),
                           timeout_s=0.5).snapshot()
    assert not snapshot.readable and snapshot.problem


def test_missing_npu_smi_is_unreadable(tmp_path: Path) -> None:
    snapshot = NpuSmiProbe((0,), executable=str(tmp_path / "absent")).snapshot()
    assert not snapshot.readable and "not found" in (snapshot.problem or "")
