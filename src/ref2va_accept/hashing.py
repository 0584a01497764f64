"""The sha256 of a file, read in blocks: inputs, profiles, MP4s, weights and wheels pin by it."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path) -> str:
    """Hex sha256 of the file's bytes; OSError (FileNotFoundError included) reaches the caller."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
