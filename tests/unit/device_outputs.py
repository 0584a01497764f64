"""Recorded outputs of the device probes' tools (npu-smi, nvidia-smi) under fixtures/devices/,
each read without the source line it starts with."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "devices"


def recorded_output(name: str) -> str:
    """The recorded output fixtures/devices/<name>, past its "# source: " line (which it must
    have)."""
    text = (FIXTURES / name).read_text()
    first, _, rest = text.partition("\n")
    assert first.startswith("# source: "), f"{name} lacks its source line"
    return rest
