"""A full disk without root or a tmpfs: ``safe_write._write`` (where every byte of a run's evidence
goes to disk) replaced by one that writes only what still fits and then fails with ENOSPC.

``FullDisk(...).install(monkeypatch)``, in the test's own process: a pytest session run there
(plugin_sessions.run_in_checkout) writes through it too.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import pytest

from ref2va_accept.core import _safe_write as safe_write


@dataclass
class FullDisk:
    """`free` bytes left (None: unlimited); a write to a file whose name (temporary suffix
    removed) ends with one of `names` fails whatever is free, after `after` such writes went
    through, and at most `times` of them (None: every one). A write that does not fit writes
    what fits, then fails; since the writers undo what they wrote, those bytes count as free
    again (the test then checks that they were undone)."""

    free: int | None = None
    names: tuple[str, ...] = ()
    after: int = 0
    times: int | None = None
    failed: list[str] = field(default_factory=list)
    _seen: int = 0

    def _refuses(self, name: str) -> bool:
        for suffix in (".tmp", ".sanitizing"):
            name = name.removesuffix(suffix)
        if not any(name.endswith(n) for n in self.names):
            return False
        self._seen += 1
        refused = self._seen - self.after
        return refused > 0 and (self.times is None or refused <= self.times)

    def write(self, handle: BinaryIO, data: bytes) -> None:
        name = str(getattr(handle, "name", ""))
        fits = len(data) if self.free is None else min(len(data), self.free)
        if self._refuses(Path(name).name):
            fits = min(fits, len(data) // 2)  # half of it lands, then the disk is full
        handle.write(data[:fits])
        handle.flush()
        if fits < len(data):
            self.failed.append(Path(name).name)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)
        if self.free is not None:
            self.free -= fits
        os.fsync(handle.fileno())

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FullDisk:
        monkeypatch.setattr(safe_write, "_write", self.write)
        return self
