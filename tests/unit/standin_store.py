"""Stand-in checkpoints for tests that only read them: each built once per test session.

A stand-in is built from its name and seed alone (quality/_standins.py), so every folder of them a
session lays out holds the same bytes. Building them is what costs: CLIP's is traced in a fresh
interpreter, and a folder of the five the judge's environment builds is about 750 MB. Here each is
built once, in a store in the session's base temporary folder (shared by the xdist workers of one
run, each build under a lock), and a test's folder gets hard links to the store's files, laid out
as VBench's cache lays them out. The folder's list of stand-ins (known_standins.WRITTEN_LIST) is
written by make_standins itself, which finds the files there and hashes them as it does any folder
of stand-ins. Tests of the builder itself (same bytes every time, a library missing) call
make_standins on a folder of their own instead.

The set-up (`./ref2va`) has already built the reference campaign's own stand-in (CLIP ViT-B/32)
into the checkout's fixtures/standins, checked against the campaign's pin. A store copies a
stand-in from there instead of building it again (about 15 s of CPU each time, in each session
of a selftest) when its bytes hash to the shipped stand-in's (known_standins.SHIPPED); anything
else there is ignored and the store builds its own.

A linked file is shared: a test must not rewrite one in place (replacing it, as make_standins
does, is fine). The store checks each file's size and modification time against what it built,
and builds again where one moved.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ref2va_accept.core import file_sha256
from ref2va_accept.quality._known_standins import SHIPPED
from ref2va_accept.quality._standins import Standin, make_standins
from ref2va_accept.quality._weight_names import VBENCH_LAYOUT

__all__ = ["lay_out_standins", "store_folder"]

# Where the set-up writes the reference campaign's stand-ins (its scorer_weights_dir).
CHECKOUT_STANDINS = Path(__file__).resolve().parents[2] / "fixtures" / "standins"


def store_folder(factory: pytest.TempPathFactory) -> Path:
    """The session's store: beside the xdist workers' own base folders (popen-gwN) when there
    are workers, so that they share it; removed with the session's temporary folders."""
    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / "standin-store"
    folder.mkdir(exist_ok=True)
    return folder


@contextmanager
def _locked(store: Path) -> Iterator[None]:
    with open(store / ".lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]


def _stamp(path: Path) -> list[tuple[str, int, int]]:
    return [(str(p.relative_to(path.parent)), p.stat().st_size, p.stat().st_mtime_ns)
            for p in _files(path)]


def _built(store: Path, name: str) -> Path:
    """The store's copy of `name`, built when missing or when a file of it moved."""
    path = store / VBENCH_LAYOUT[name]
    stamp = store / f".{name}.stamp"
    if path.exists() and stamp.exists() and stamp.read_text() == repr(_stamp(path)):
        return path
    if not _copied_from_checkout(name, path):
        make_standins(store, [name], force=path.exists())
    stamp.write_text(repr(_stamp(path)))
    return path


def _copied_from_checkout(name: str, path: Path) -> bool:
    """Copy the checkout's stand-in `name` to `path` when it is a single file whose bytes are the
    shipped stand-in's; False (nothing written) otherwise. The copy is what is hashed, once: it
    holds the bytes the store keeps, however the checkout's file changes meanwhile."""
    source = CHECKOUT_STANDINS / VBENCH_LAYOUT[name]
    if name not in SHIPPED or not source.is_file():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    shutil.copyfile(source, partial)
    if file_sha256(partial) != SHIPPED[name]:
        partial.unlink()
        return False
    os.replace(partial, path)
    return True


def _link(source: Path, target: Path) -> None:
    if target.exists():  # kept, as make_standins keeps a file that is there
        return
    for file in _files(source):
        linked = target / file.relative_to(source) if source.is_dir() else target
        linked.parent.mkdir(parents=True, exist_ok=True)
        os.link(file, linked)


def lay_out_standins(factory: pytest.TempPathFactory, folder: Path, names: Iterable[str],
                     *, store: Path | None = None) -> list[Standin]:
    """What ``make_standins(folder, names)`` leaves and returns, from the session's store (or
    `store`: a test of the store itself damages its own, never the one the session shares)."""
    names = list(names)
    if store is None:
        store = store_folder(factory)
    store.mkdir(parents=True, exist_ok=True)
    with _locked(store):
        for name in names:
            _link(_built(store, name), Path(folder) / VBENCH_LAYOUT[name])
    return make_standins(folder, names)
