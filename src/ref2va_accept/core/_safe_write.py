"""Writes of a run's evidence that leave nothing half done when a write fails (a full disk).

Every file the judge writes under a run folder goes through one of three writers, and each one,
when the operating system refuses a write (ENOSPC, EIO, EDQUOT, ...), puts the file back as it was
and raises ``WriteFailed`` naming the file and the error:

  append_line   an fsynced line at the end of a log (events.jsonl, samples.jsonl): a line cut
                short is cut off again (the file truncated to its size before), so every line
                already there stays valid and ``evidence.rebuild`` still reads the log
  atomic_write  a whole file through ``<name><suffix>`` and a rename (evidence.json, report.html,
                a sanitized copy, a lock): the temporary file is removed, the old file stays
  write_new     a new file written once (an MP4): what was written of it is removed

All three write through ``_write``, the one place the bytes go to disk, so that a test can stand a
full disk in for it (tests/unit/test_disk_full.py) without root or a tmpfs.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import BinaryIO

from ref2va_accept.core._errors import Ref2VAError

TMP_SUFFIX = ".tmp"


def os_error_text(error: OSError) -> str:
    """`[Errno 28] No space left on device`, or the error's own text when it has no errno."""
    if error.errno is not None and error.strerror:
        return f"[Errno {error.errno}] {error.strerror}"
    return str(error) or type(error).__name__


class WriteFailed(Ref2VAError):
    """A file of the evidence could not be written; what was written of it is undone."""

    def __init__(self, path: Path, error: OSError) -> None:
        self.path = path
        self.error = error
        super().__init__(f"cannot write {path}: {os_error_text(error)}")


def _write(handle: BinaryIO, data: bytes) -> None:
    """The bytes to disk, durably (the one writer a test replaces with a full disk)."""
    handle.write(data)
    handle.flush()
    os.fsync(handle.fileno())


def _encode(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def append_line(path: Path, line: str) -> None:
    """Append one line (a newline added) and fsync it; on failure the file is as it was."""
    try:
        size: int | None = path.stat().st_size
    except FileNotFoundError:
        size = None
    try:
        with open(path, "ab") as handle:
            _write(handle, _encode(line + "\n"))
    except OSError as exc:
        with contextlib.suppress(OSError):
            if size is None:
                path.unlink(missing_ok=True)
            else:
                os.truncate(path, size)
        raise WriteFailed(path, exc) from exc


def atomic_write(path: Path, data: str | bytes, suffix: str = TMP_SUFFIX) -> None:
    """Replace `path` with `data` through a temporary file beside it; a reader never sees half
    a file, and a failed write leaves the old file and no temporary one."""
    tmp = path.with_name(path.name + suffix)
    try:
        with open(tmp, "wb") as handle:
            _write(handle, _encode(data))
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise WriteFailed(path, exc) from exc


def write_new(path: Path, data: bytes) -> None:
    """Write a new file whole; on failure nothing of it is left."""
    try:
        with open(path, "wb") as handle:
            _write(handle, data)
    except OSError as exc:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
        raise WriteFailed(path, exc) from exc
