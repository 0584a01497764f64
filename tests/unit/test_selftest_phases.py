"""`./ref2va selftest` runs in phases (timed tests alone, then the rest spread over workers beside
the acceptance scenarios); together the phases must run exactly the tests of the serial form."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

from tests.unit.suite_runner import ROOT

SCRIPT = (ROOT / "ref2va").read_text()


def _collected(*args: str) -> set[str]:
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *args],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return {line for line in result.stdout.splitlines() if "::" in line}


def _phase(pattern: str) -> list[str]:
    """A phase's pytest arguments as the script writes them (without the xdist options)."""
    found = re.search(rf"pytest_rc {pattern}", SCRIPT)
    assert found, f"./ref2va no longer has a phase matching {pattern!r}"
    return shlex.split(found.group(0))[1:]


def test_the_phases_run_exactly_the_serial_selftest() -> None:
    serial = re.search(r"SELFTEST_PATHS=\(([^)]*)\)", SCRIPT)
    assert serial, "./ref2va names the serial selftest's paths in SELFTEST_PATHS"
    everything = _collected(*serial.group(1).split())
    timed = _collected(*_phase(r"tests/unit -m timed"))
    acceptance = _collected(*_phase(r"tests/acceptance"))
    spread = _collected(*_phase(r'tests/unit tests/engine tests/contract -m "not timed"'))
    assert timed and acceptance and spread
    assert not timed & spread and not timed & acceptance and not spread & acceptance
    assert timed | spread | acceptance == everything
    # The timed phase holds the self-test whose verdicts rest on measured latency.
    assert any("test_lossless_suite.py" in t for t in timed)
