"""Stand-in scorer weights, recognised by their bytes wherever they are.

`ref2va-accept scorers standins` writes seeded random weights in each official format, in VBench's
own cache layout (:mod:`ref2va_accept.quality._standins`): nothing in their name or place tells
them from VBench's files. Their bytes are deterministic, so they are recognised by their sha256:

- :data:`SHIPPED`: what every stand-in this project can build hashes to with the libraries it
  pins (torch 2.13.0, ``scorer-libraries.txt``); a test builds them and compares;
- the list a folder keeps of the stand-ins written into it (:data:`WRITTEN_LIST` at its top): a
  stand-in built with other library versions (the host's own torch writes other bytes) is
  recognised through it anywhere below that folder.

A file recognised so is a stand-in whatever the campaign says: its scores are labelled stand-in,
and where the campaign does not declare it (`stand_in: true`) they decide no lossy verdict
(lossy.weights_check). Loads no torch: the campaign and the lock use it too.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final

from ref2va_accept.core import atomic_write

__all__ = ["SHIPPED", "WRITTEN_LIST", "record_written", "stand_in_name"]

log = logging.getLogger(__name__)

# Weights name -> the sha256 of its stand-in (a folder's manifest for DreamSim), as
# make_standins writes it with the pinned libraries (ViT-L/14, 890 MB, was built twice here in
# two folders to the same bytes; the heavy tests build the others). MUSIQ (pyiqa) and DreamSim
# (torchvision, peft, open_clip) need libraries the judge's environment does not install:
# theirs are recognised through the folder's list only.
SHIPPED: Final[Mapping[str, str]] = MappingProxyType({
    "dino_vitb16": "af1b5a156efe6efd354aaff5b76b33a0c43dd6ffcef2d47d46e14039b127e18c",
    "clip_vitb32": "86a40ba7e120f39272b676a19444f0fe142060e379922b546858bfaf085fd1f0",
    "clip_vitl14": "cbfb8ec28a07e180cd2d76cde856c7726aaeaa00b0d2e436d9de9fa30336669f",
    "laion_aesthetic": "21775463883eb363d21f458262b390037bd9602d90c47d727d270b4ecc03ea6a",
    "raft": "dfa98a80d9836fd7c5dea646a5f7f4700866615b024d91a78c5842bb80022500",
    "amt_s": "03e6d64835373471c61d8a09ddad6857d6db7d4cb30d73a805e2c6c5fa164790",
})
_BY_HASH: Final[Mapping[str, str]] = MappingProxyType({v: k for k, v in SHIPPED.items()})

WRITTEN_LIST: Final = "ref2va-standins.json"
_SEARCH_UP = 4  # VBench's layout is at most three folders deep (raft_model/models/raft-things.pth)


def _listed(folder: Path) -> dict[str, str]:
    """sha256 -> weights name, as `folder`'s list records them; {} without one. A list that cannot
    be read is named in the log and recognises nothing (the shipped hashes still do)."""
    path = folder / WRITTEN_LIST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        log.warning("%s: not a list of stand-ins (%s); only the shipped hashes recognise "
                    "stand-ins below it", path.name, exc)
        return {}
    found = data.get("stand_ins") if isinstance(data, dict) else None
    if not isinstance(found, dict):
        log.warning("%s: no \"stand_ins\" object; only the shipped hashes recognise stand-ins "
                    "below it", path.name)
        return {}
    return {str(sha).lower(): str(name) for sha, name in found.items()}


def stand_in_name(sha256: str, near: Path | None = None) -> str | None:
    """The weights name whose stand-in these bytes are, or None: a shipped hash, or one the list
    of a folder at most four levels above `near` (the file itself) records."""
    sha = sha256.lower()
    if sha in _BY_HASH:
        return _BY_HASH[sha]
    if near is None:
        return None
    folder = Path(near).resolve().parent
    for _ in range(_SEARCH_UP):
        name = _listed(folder).get(sha)
        if name is not None:
            return name
        if folder.parent == folder:
            break
        folder = folder.parent
    return None


def record_written(folder: Path, made: Iterable[tuple[str, str]]) -> Path:
    """Add (weights name, sha256) pairs to `folder`'s list, written whole and atomically; an
    unreadable list is replaced by one that names what this call wrote (and the log says so)."""
    path = Path(folder) / WRITTEN_LIST
    listed = _listed(Path(folder))
    listed.update({sha.lower(): name for name, sha in made})
    body = {"what": "sha256 of seeded stand-in scorer weights written here by "
                    "`ref2va-accept scorers standins` (random weights, not VBench's)",
            "stand_ins": dict(sorted(listed.items(), key=lambda item: (item[1], item[0])))}
    atomic_write(path, json.dumps(body, indent=1) + "\n")
    return path

