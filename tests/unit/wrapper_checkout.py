"""The ./ref2va wrapper script (its text, SCRIPT) and a stand-in checkout for it: the script
beside a .venv whose pytest exits with a code the test chooses, for the tests of the script's
own logic (its phases, its exit codes, the signals it hands on)."""

from __future__ import annotations

import hashlib
from pathlib import Path

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
