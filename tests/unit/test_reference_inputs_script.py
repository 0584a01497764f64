"""The shipped reference inputs (fixtures/inputs) are what scripts/make_reference_inputs.py
writes, byte for byte, and what the host campaign pins: the script runs in a subprocess, as a
user regenerates them."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from ref2va_accept.campaign import load_campaign

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "fixtures" / "campaigns"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_shipped_inputs_match_their_pins_and_the_generator(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make_reference_inputs.py"), str(tmp_path)],
        check=True,
        capture_output=True,
    )
    loaded = load_campaign(SHIPPED / "910c.yaml")
    for _, pinned in loaded.pinned_inputs():
        shipped = loaded.resolve(pinned.path).read_bytes()
        assert _sha(shipped) == pinned.sha256
        assert (tmp_path / Path(pinned.path).name).read_bytes() == shipped
