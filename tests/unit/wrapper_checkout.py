"""The ./ref2va wrapper script (its text, SCRIPT) and a stand-in checkout for it: the script
beside a .venv whose pytest exits with a code the test chooses, for the tests of the script's
own logic (its phases, its exit codes, the signals it hands on); and one whose Python is real and
whose pytest is a stand-in that waits, for how signals reach the sessions."""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from tests.unit.suite_runner import ROOT

SCRIPT = (ROOT / "ref2va").read_text()


def fake_checkout(tmp_path: Path, codes: dict[str, int]) -> Path:
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
    # The set-up's stand-in check (scorers standins --campaign) answers "all pinned".
    (venv / "ref2va-accept").write_text("#!/bin/sh\nexit 0\n")
    (venv / "ref2va-accept").chmod(0o755)
    return tmp_path


# The stand-in pytest of python_checkout: records each session (its arguments and the SIGINT
# handler it started with), then waits for RELEASE; a Ctrl-C ends it as pytest's does (exit 2),
# and SIGTERM kills it (Python's default).
STAND_IN_PYTEST = """
import json, os, signal, sys, time
from pathlib import Path

def note(**what):
    with open(os.environ["STAND_IN_LOG"], "a") as log:
        log.write(json.dumps({"args": sys.argv[1:], **what}) + "\\n")

note(sigint=str(signal.getsignal(signal.SIGINT)))
try:
    while not Path(os.environ["STAND_IN_RELEASE"]).exists():
        time.sleep(0.05)
except KeyboardInterrupt:
    note(interrupted=True)
    sys.exit(2)
"""


def python_checkout(tmp_path: Path) -> Path:
    """The script beside a .venv whose python is this interpreter and whose pytest is
    STAND_IN_PYTEST (pytest.py at the checkout's root, which `python -m pytest` finds first),
    with what the selftest's phased form calls (scripts/cpu_affinity.py, and a stand-in for the
    acceptance scenarios' campaign copy). Give STAND_IN_LOG and STAND_IN_RELEASE in its
    environment; `sessions` reads the log."""
    checkout = fake_checkout(tmp_path, {})
    (checkout / ".venv/bin/python").write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)}"
                                               ' "$@"\n')
    (checkout / "pytest.py").write_text(STAND_IN_PYTEST)
    (checkout / "scripts").mkdir()
    shutil.copy(ROOT / "scripts/cpu_affinity.py", checkout / "scripts/cpu_affinity.py")
    (checkout / "tests/unit").mkdir(parents=True)
    (checkout / "tests/unit/suite_runner.py").write_text("import sys\nprint(sys.argv[2])\n")
    return checkout


def sessions(log: Path) -> list[dict[str, Any]]:
    """What the stand-in pytest sessions of python_checkout wrote, in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.endswith("}")]
