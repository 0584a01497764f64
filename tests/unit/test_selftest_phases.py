"""`./ref2va selftest` runs in phases (timed tests alone, then the rest spread over workers beside
the acceptance scenarios); together the phases must run exactly the tests of the serial form."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.suite_runner import ROOT

pytest_plugins = ["pytester"]

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


def test_the_spread_phase_keeps_only_shared_runs_together() -> None:
    # Test by test (loadgroup), not file by file: a module's independent heavy runs spread over
    # the workers; tests/conftest.py groups the modules that share a run (test below).
    line = next(line for line in SCRIPT.splitlines() if "pytest_rc tests/unit tests/engine" in line)
    following = SCRIPT.splitlines()[SCRIPT.splitlines().index(line) + 1]
    assert "--dist loadgroup" in line + following and "loadfile" not in SCRIPT


SHARING = """
import pytest

@pytest.fixture(scope="module")
def shared_run():
    return 1

@pytest.fixture
def own_run():
    return 2

def test_uses_the_shared_run(shared_run):
    pass

def test_uses_its_own_run(own_run, tmp_path, tmp_path_factory):
    pass

@pytest.mark.xdist_group("chosen")
def test_already_grouped(shared_run):
    pass
"""


def test_only_tests_of_a_shared_run_are_grouped_by_module(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((ROOT / "tests/conftest.py").read_text())
    pytester.makepyfile(test_sharing=SHARING, test_alone="def test_alone(tmp_path):\n    pass\n")
    sub = pytester.mkpydir("sub")
    (sub / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture(scope='session')\ndef engine():\n    return 3\n")
    (sub / "test_sub.py").write_text("def test_engine(engine):\n    pass\n")
    items, _ = pytester.inline_genitems()  # collected with the hooks, as a session does
    groups = {item.name: [m.args for m in item.iter_markers("xdist_group")] for item in items}
    assert groups == {
        "test_uses_the_shared_run": [("test_sharing.py",)],
        # tmp_path_factory is session-scoped too, but pytest's own: nothing shared between tests
        "test_uses_its_own_run": [],
        "test_already_grouped": [("chosen",)],  # a group given by hand is kept
        "test_alone": [],
        "test_engine": [("sub/test_sub.py",)],
    }


def _fake_checkout(tmp_path: Path, codes: dict[str, int]) -> Path:
    """The script beside a stand-in .venv whose pytest exits with the code given for the phase
    (matched on its arguments), so the script's own exit logic is what is tested."""
    (tmp_path / "ref2va").write_text(SCRIPT)
    (tmp_path / "ref2va").chmod(0o755)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    digest = hashlib.sha256((tmp_path / "pyproject.toml").read_bytes()).hexdigest()[:16]
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (tmp_path / ".venv" / f".installed-{digest}").touch()
    cases = "\n".join(f'    *"{key}"*) exit {code} ;;' for key, code in codes.items())
    (venv / "python").write_text(f'#!/bin/sh\ncase "$*" in\n{cases}\n    *) exit 0 ;;\nesac\n')
    (venv / "python").chmod(0o755)
    return tmp_path


@pytest.mark.parametrize(("codes", "expected"), [
    ({}, 0),
    ({"-m timed": 1}, 1),
    ({"not timed": 2}, 2),
    ({"pytest tests/acceptance": 1}, 1),
    ({"-m timed": 5}, 1),  # a phase that collects nothing fails the selftest
])
def test_the_phased_selftest_exits_with_its_first_failure(
        tmp_path: Path, codes: dict[str, int], expected: int) -> None:
    checkout = _fake_checkout(tmp_path, codes)
    result = subprocess.run(["bash", str(checkout / "ref2va"), "selftest"], capture_output=True,
                            text=True, timeout=60, env={**os.environ, "PYTHON": sys.executable})
    assert result.returncode == expected, result.stderr[-2000:]
