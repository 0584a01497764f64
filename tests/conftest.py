"""The fast tier's guard, and spreading the selftest's untimed phase over xdist workers.

The fast tier (``./ref2va fast``, ``pytest -m fast``): a test marked ``fast`` runs in this
process only. While its setup and its call run, every way of starting a process
(:data:`SPAWNERS`: subprocess, multiprocessing, fork, posix_spawn, os.system) fails the test
with a message naming it (:func:`in_process_only`); a module whose tests start an engine, a
pytest session in a subprocess or a script is not marked.

Spreading (``-n N --dist loadfile``):

``--dist loadfile`` sends each test file to one worker, so that a module's shared run (a fixture
wider than a test: an engine started once, a campaign run once) happens once. The modules in
:data:`SPREAD` have no such run: each of their tests is an independent suite run of its own (a
fault, a reason code, a signal), and file by file they queued on one worker while the others
idled. Under ``--dist loadfile`` their tests are scheduled one by one
(:class:`SpreadFileScheduling`).

Whether a module may be spread is checked, not assumed: a collection that finds a test of a
:data:`SPREAD` module using a project fixture wider than a test stops with a usage error naming
both, in every session (with or without xdist).

(``--dist loadgroup`` with ``xdist_group`` marks would say the same per module, but with pytest
9.2 and pytest-xdist 3.8 it groups nothing: xdist writes the group into ``item._nodeid``, which
pytest 9.2's structured node ids no longer read; pytest-dev/pytest-xdist#1386.)
"""

from __future__ import annotations

import _posixsubprocess
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Collection, Generator, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, NoReturn

import pytest

FAST = "fast"
# Every way a test can start a process, as (object, attribute, the name a failure gives):
# subprocess (run, Popen, check_output, asyncio's subprocesses, os.popen) goes through
# Popen._execute_child; multiprocessing's spawn and forkserver through _posixsubprocess.fork_exec,
# its fork through os.fork; os.spawn* and pty.fork through os.fork or os.forkpty.
SPAWNERS: tuple[tuple[Any, str, str], ...] = (
    (subprocess.Popen, "_execute_child", "subprocess.Popen"),
    (_posixsubprocess, "fork_exec", "_posixsubprocess.fork_exec"),
    (os, "fork", "os.fork"),
    (os, "forkpty", "os.forkpty"),
    (os, "posix_spawn", "os.posix_spawn"),
    (os, "posix_spawnp", "os.posix_spawnp"),
    (os, "system", "os.system"),
)


def _refusal(nodeid: str, name: str) -> Callable[..., NoReturn]:
    def refused(*_args: Any, **_kwargs: Any) -> NoReturn:
        pytest.fail(
            f"{nodeid} is marked fast (in-process only: no engine, no subprocess, no pytest "
            f"session in a subprocess, no network, no sleeping) but started a process through "
            f"{name}; keep the test in-process, or take the mark off it (pytestmark = "
            f"pytest.mark.fast in its module, or the test's own mark) so that it runs in the "
            f"selftest only", pytrace=True)
    return refused


@contextmanager
def in_process_only(nodeid: str) -> Iterator[None]:
    """Every function of :data:`SPAWNERS` fails the test ``nodeid`` while this block runs."""
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in SPAWNERS
             if hasattr(owner, attr)]
    try:
        for owner, attr, name in SPAWNERS:
            if hasattr(owner, attr):
                setattr(owner, attr, _refusal(nodeid, name))
        yield
    finally:
        for owner, attr, original in saved:
            setattr(owner, attr, original)


def _guarded(item: pytest.Item) -> AbstractContextManager[None]:
    return in_process_only(item.nodeid) if item.get_closest_marker(FAST) else nullcontext()


# The setup (fixtures a fast test needs, a module's shared ones included) and the call; not the
# teardown, where the last test of a session tears down every session-wide fixture, its own or not.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with _guarded(item):
        return (yield)


SHARED_SCOPES = frozenset({"class", "module", "package", "session"})
# Modules whose every test is its own suite run (paths as node ids give them).
SPREAD = frozenset({
    "tests/engine/test_engine_stop.py",
    "tests/unit/test_host_path.py",
    "tests/unit/test_latency_faults.py",
    "tests/unit/test_signals.py",
})


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


# Wider than a test, yet harmless once per worker: tests/unit/conftest.py's session ledger only
# points an environment variable at a file of the worker's own.
PER_WORKER_SAFE = frozenset({"_session_ledger"})


def shared_fixtures(item: pytest.Item) -> list[str]:
    """The project's own fixtures (not pytest's or a plugin's) that ``item`` uses and that live
    longer than one test, but for those safe to set up once per worker."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return sorted(name for name, defs in info.name2fixturedefs.items()
                  if name not in PER_WORKER_SAFE
                  and any(d.scope in SHARED_SCOPES and d.baseid for d in defs))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    write_fast_ids(config, items)
    wrong = sorted({f"{item.nodeid} uses {name}" for item in items
                    if module_of(item.nodeid) in SPREAD for name in shared_fixtures(item)})
    if wrong:
        raise pytest.UsageError(
            "tests/conftest.py: a module in SPREAD (its tests scheduled one by one over xdist "
            "workers) shares a fixture between tests, which would then run once per worker: "
            + "; ".join(wrong) + ". Take the module out of SPREAD or the fixture's scope down.")


# The order the work units start in. xdist starts the units with the most tests first: a module
# of a hundred in-process tests went out before a test that runs a campaign for a minute, and
# the single tests of the SPREAD modules (each a suite run) started last, running on while the
# other workers had nothing left. A test marked fast takes milliseconds, any other seconds to
# minutes (an engine, a subprocess): a unit costs what its tests count that way, the costliest
# starts first, and the fast modules fill the end. The first worker writes which of the
# collected tests are fast to a file the controller names (FAST_IDS), read at the first
# assignment; without it every test counts the same.
FAST_IDS = "ref2va_fast_ids"
FAST_TEST_COST = 0.01
FAST_IDS_DIR = pytest.StashKey[str]()


def unit_cost(nodeids: Iterable[str], fast: Collection[str]) -> float:
    return sum(FAST_TEST_COST if nodeid in fast else 1.0 for nodeid in nodeids)


def write_fast_ids(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On the first worker, at collection (before it tells the controller its collection is
    done, and so before any work is assigned), the node ids of its fast tests."""
    workerinput = getattr(config, "workerinput", {})
    if workerinput.get(FAST_IDS) and workerinput.get("workerid") == "gw0":
        Path(workerinput[FAST_IDS]).write_text("".join(
            f"{item.nodeid}\n" for item in items if item.get_closest_marker(FAST)))


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(FAST_IDS_DIR, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def fast_ids_file(config: pytest.Config) -> Path:
    """Where the first worker writes the fast tests' node ids (a folder of the controller's)."""
    if FAST_IDS_DIR not in config.stash:
        config.stash[FAST_IDS_DIR] = tempfile.mkdtemp(prefix="ref2va-fast-ids-")
    return Path(config.stash[FAST_IDS_DIR]) / "fast.txt"


try:
    from xdist.scheduler import LoadFileScheduling
except ImportError:  # xdist not installed: nothing is spread, the check above still holds
    pass
else:

    class SpreadFileScheduling(LoadFileScheduling):
        """``--dist loadfile``, except that the tests of a :data:`SPREAD` module are work units
        of their own, and that the costliest unit left (:func:`unit_cost`) starts next."""

        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            self._fast_file = fast_ids_file(config)
            self._fast: frozenset[str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            module = module_of(nodeid)
            return nodeid if module in SPREAD else module

        def _assign_work_unit(self, node: Any) -> None:
            if self._fast is None:
                self._fast = frozenset(self._fast_file.read_text().splitlines()
                                       if self._fast_file.is_file() else ())
            fast = self._fast
            costliest = max(self.workqueue, key=lambda scope: unit_cost(self.workqueue[scope],
                                                                        fast))
            self.workqueue.move_to_end(costliest, last=False)
            super()._assign_work_unit(node)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "loadfile":
            return None
        return SpreadFileScheduling(config, log)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(node: Any) -> None:
        node.workerinput[FAST_IDS] = str(fast_ids_file(node.config))
