"""The session's store of stand-ins (tests/unit/standin_store.py): built once, linked into each
folder as make_standins lays it out, built again where a test moved one of its files, and copied
from the checkout's stand-ins (the set-up's) only where those are the shipped bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ref2va_accept.quality._known_standins import SHIPPED, WRITTEN_LIST
from ref2va_accept.quality._standins import Standin, make_standins
from ref2va_accept.quality._weight_names import VBENCH_LAYOUT
from tests.unit.standin_store import lay_out_standins, store_folder

# It builds a (small) stand-in with torch, as its siblings build large ones.
pytestmark = pytest.mark.heavy

pytest.importorskip("torch")

NAME = "laion_aesthetic"  # one linear layer: the cheapest stand-in to build


def test_two_folders_share_one_build_and_read_as_a_build_of_their_own(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    # (A store of the test's own; the session's is the same code with another folder.)
    built = make_standins(tmp_path / "built", [NAME])  # what a build of its own leaves
    store = tmp_path / "store"
    first = lay_out_standins(tmp_path_factory, tmp_path / "a", [NAME], store=store)
    second = lay_out_standins(tmp_path_factory, tmp_path / "b", [NAME], store=store)
    assert [s.sha256 for s in first] == [s.sha256 for s in second] == [s.sha256 for s in built]
    assert first[0].path == tmp_path / "a" / VBENCH_LAYOUT[NAME]
    assert first[0].path.stat().st_ino == second[0].path.stat().st_ino  # one file on disk
    # Without a store named: the session's, shared by its workers, in its base folder.
    shared = [lay_out_standins(tmp_path_factory, tmp_path / f"s{i}", [NAME])[0] for i in (1, 2)]
    assert shared[0].path.stat().st_ino == shared[1].path.stat().st_ino
    assert (store_folder(tmp_path_factory) / VBENCH_LAYOUT[NAME]).stat().st_ino == \
        shared[0].path.stat().st_ino
    assert store_folder(tmp_path_factory).is_relative_to(
        tmp_path_factory.getbasetemp().parent)
    for folder in ("a", "b", "built"):  # each folder lists its stand-in, as a build does
        listed = json.loads((tmp_path / folder / WRITTEN_LIST).read_text())
        assert json.loads((tmp_path / "built" / WRITTEN_LIST).read_text()) == listed


def test_a_store_file_rewritten_in_place_is_built_again(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    # A store of its own: rewriting the session's would damage every folder linked to it.
    store = tmp_path / "store"
    first = lay_out_standins(tmp_path_factory, tmp_path / "a", [NAME], store=store)[0]
    (store / VBENCH_LAYOUT[NAME]).write_bytes(b"rewritten in place")  # what no test may do
    again = lay_out_standins(tmp_path_factory, tmp_path / "b", [NAME], store=store)[0]
    assert again.sha256 == make_standins(tmp_path / "built", [NAME])[0].sha256
    assert again.path.stat().st_ino != first.path.stat().st_ino
    assert first.path.read_bytes() == b"rewritten in place"  # the link it had shares the damage


@pytest.mark.parametrize("planted", ["the shipped bytes", "other bytes", "nothing"])
def test_a_store_copies_the_checkouts_standin_only_when_it_is_the_shipped_one(
        planted: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.unit import standin_store

    checkout = tmp_path / "checkout"  # what the set-up leaves in fixtures/standins
    if planted == "the shipped bytes":
        make_standins(checkout, [NAME])
    elif planted == "other bytes":
        (checkout / VBENCH_LAYOUT[NAME]).parent.mkdir(parents=True)
        (checkout / VBENCH_LAYOUT[NAME]).write_bytes(b"not a stand-in")
    monkeypatch.setattr(standin_store, "CHECKOUT_STANDINS", checkout)
    builds: list[Path] = []

    def building(folder: Path, names: list[str], **kw: object) -> list[Standin]:
        builds.append(Path(folder))
        return make_standins(folder, names, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(standin_store, "make_standins", building)
    store = tmp_path / "store"
    laid = lay_out_standins(tmp_path_factory, tmp_path / "a", [NAME], store=store)[0]
    assert laid.sha256 == SHIPPED[NAME]
    built_in_store = store in builds
    assert built_in_store is (planted != "the shipped bytes")
    if planted == "the shipped bytes":  # a copy, not a link to the checkout's file
        assert laid.path.stat().st_ino != (checkout / VBENCH_LAYOUT[NAME]).stat().st_ino
    if planted == "other bytes":  # left as it was, and its refused copy gone
        assert (checkout / VBENCH_LAYOUT[NAME]).read_bytes() == b"not a stand-in"
        assert not list(store.rglob("*.partial"))
