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
    one line per file beneath it, sorted by relative path, ``<sha256>  <relative/path>``. What
    loading writes into the folder is left out: DreamSim points torch.hub at its folder, which
    then holds DINO's repository, so Python writes bytecode there (``__pycache__``) and torch.hub
    creates its bookkeeping file ``trusted_list`` on first use; neither is weights or code."""
    path = Path(path)
    if not path.is_dir():
        return file_sha256(path)
    lines = [f"{file_sha256(f)}  {f.relative_to(path).as_posix()}\n"
             for f in sorted(path.rglob("*")) if f.is_file() and _content(f.relative_to(path))]
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def _content(relative: Path) -> bool:
    return "__pycache__" not in relative.parts and relative.as_posix() != "trusted_list"
