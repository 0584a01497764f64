"""The sha256 of a file, read in blocks: inputs, profiles, MP4s, weights and wheels pin by it."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path) -> str:
    """Hex sha256 of the file's bytes; OSError (FileNotFoundError included) reaches the caller."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def tree_sha256(path: Path) -> str:
    """A file's sha256, or for a folder (DreamSim's checkpoint is one) the sha256 of its manifest:
    one line per file beneath it, sorted by relative path, ``<sha256>  <relative/path>``. Files
    under ``__pycache__`` are left out: DreamSim's folder holds DINO's repository, which torch.hub
    imports from there, and Python writes its bytecode beside it on first use."""
    path = Path(path)
    if not path.is_dir():
        return file_sha256(path)
    lines = [f"{file_sha256(f)}  {f.relative_to(path).as_posix()}\n"
             for f in sorted(path.rglob("*"))
             if f.is_file() and "__pycache__" not in f.relative_to(path).parts]
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()

