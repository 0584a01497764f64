"""The selftest's CPU table (tests/cpu_by_file.py): a file is charged the CPU its tests burnt in
their own process and in the children they waited for, and nothing for time spent waiting;
under pytest-xdist the workers' tallies reach the main process's table."""

from __future__ import annotations

import os
import re

import pytest

from tests.cpu_by_file import Tally
from tests.unit.suite_runner import ROOT

pytest_plugins = ["pytester"]

BURN = 0.6  # CPU seconds each burning test spends

OWN = f"""
import time

def test_burns_here():
    end = time.process_time() + {BURN}
    while time.process_time() < end:
        pass
"""

CHILD = f"""
import subprocess
import sys

BURN = "import time\\nend = time.process_time() + {BURN}\\nwhile time.process_time() < end: pass"

def test_a_child_burns():
    subprocess.run([sys.executable, "-c", BURN], check=True)
"""

IDLE = f"""
import time

def test_sleeps():
    time.sleep({BURN})

def test_sleeps_again():
    time.sleep({BURN})
"""

ROW = re.compile(r"^\s*([\d.]+) s  (test_\w+\.py) \((\d+) tests?; ([\d.]+) s in the test "
                 r"process, ([\d.]+) s in its children\)$", re.M)


def _table(stdout: str) -> dict[str, tuple[float, int, float, float]]:
    assert "CPU by test file, top 5" in stdout, stdout[-3000:]
    return {m[2]: (float(m[1]), int(m[3]), float(m[4]), float(m[5]))
            for m in ROW.finditer(stdout)}


def _session_line(stdout: str) -> tuple[float, float]:
    found = re.search(r"^tests: ([\d.]+) s of CPU in 3 file\(s\) \(top 3 above\); the session's "
                      r"processes in all: ([\d.]+) s", stdout, re.M)
    assert found, stdout[-3000:]
    return float(found[1]), float(found[2])


def _check(stdout: str) -> None:
    table = _table(stdout)
    assert list(table) == ["test_own.py", "test_child.py", "test_idle.py"] or \
        list(table) == ["test_child.py", "test_own.py", "test_idle.py"], table
    total, tests, own, children = table["test_own.py"]
    assert tests == 1 and own >= BURN * 0.95 and total == pytest.approx(own + children, abs=0.11)
    total, tests, own, children = table["test_child.py"]
    assert tests == 1 and children >= BURN * 0.95 and own < BURN / 2
    # Two tests that slept 1.2 s between them: wall time, not CPU.
    total, tests, _, _ = table["test_idle.py"]
    assert tests == 2 and total < BURN / 2
    in_tests, in_all = _session_line(stdout)
    assert in_all >= in_tests >= 2 * BURN * 0.95


def _under_xdist(pytester: pytest.Pytester) -> pytest.RunResult:
    """The pytester folder's tests on two xdist workers with the table on (the checkout
    importable, for `-p tests.cpu_by_file`, in the workers too)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYTHONPATH", os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
        return pytester.runpytest_subprocess("-n", "2", "--dist", "loadfile", "-p",
                                             "tests.cpu_by_file", "--cpu-by-file", "5")


def test_one_process_charges_cpu_not_waiting(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_own=OWN, test_child=CHILD, test_idle=IDLE)
    result = pytester.runpytest("-p", "tests.cpu_by_file", "--cpu-by-file", "5")
    result.assert_outcomes(passed=4)
    _check(result.stdout.str())


def test_xdist_workers_tallies_reach_the_table(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_own=OWN, test_child=CHILD, test_idle=IDLE)
    result = _under_xdist(pytester)
    result.assert_outcomes(passed=4)
    _check(result.stdout.str())


CRASH = """
import os
from pathlib import Path

def test_the_worker_dies_once():
    once = Path("crashed-once")
    if not once.exists():  # pytest-xdist gives a crashed test to a new worker: let that one live
        once.touch()
        os._exit(3)
"""


def test_a_crashed_workers_lost_tally_is_said(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_crash=CRASH, test_idle=IDLE)
    result = _under_xdist(pytester)
    out = result.stdout.str()
    assert "worker 'gw" in out and "crashed" in out, out[-3000:]
    assert "CPU by test file, top 5" in out, out[-3000:]
    assert ("incomplete: 1 xdist worker(s) ended without handing their tally over (crashed); "
            "what their tests took is missing above") in out, out[-3000:]


def test_without_the_option_nothing_is_counted_or_said(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_idle=IDLE)
    result = pytester.runpytest("-p", "tests.cpu_by_file")
    result.assert_outcomes(passed=2)
    assert "CPU by test file" not in result.stdout.str()
    assert result.ret == 0


@pytest.mark.fast
def test_the_table_ranks_by_cpu_and_merges_what_workers_send() -> None:
    tally = Tally()
    tally.add("a.py", 1.0, 0.0)
    worker = Tally(processes=9.0)
    worker.add("b.py", 0.5, 2.0)
    worker.add("a.py", 0.25, 0.25, tests=2)
    tally.merge(worker.as_message())
    lines = tally.lines(top=1)
    assert lines[0] == "     2.5 s  b.py (1 test; 0.5 s in the test process, 2.0 s in its children)"
    assert lines[1] == ("tests: 4.0 s of CPU in 2 file(s) (top 1 above); the session's processes "
                        "in all: 9.0 s (collection and what ran between tests included)")
    assert (tally.files["a.py"].tests, tally.files["a.py"].total) == (3, 1.5)
