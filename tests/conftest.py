"""Spreading the selftest's untimed phase over xdist workers (``-n N --dist loadfile``).

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

from typing import Any

import pytest

SHARED_SCOPES = frozenset({"class", "module", "package", "session"})
# Modules whose every test is its own suite run (paths as node ids give them).
SPREAD = frozenset({
    "tests/engine/test_engine_stop.py",
    "tests/unit/test_host_path.py",
    "tests/unit/test_latency_faults.py",
    "tests/unit/test_plugin.py",
    "tests/unit/test_reason_codes.py",
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    wrong = sorted({f"{item.nodeid} uses {name}" for item in items
                    if module_of(item.nodeid) in SPREAD for name in shared_fixtures(item)})
    if wrong:
        raise pytest.UsageError(
            "tests/conftest.py: a module in SPREAD (its tests scheduled one by one over xdist "
            "workers) shares a fixture between tests, which would then run once per worker: "
            + "; ".join(wrong) + ". Take the module out of SPREAD or the fixture's scope down.")


try:
    from xdist.scheduler import LoadFileScheduling
except ImportError:  # xdist not installed: nothing is spread, the check above still holds
    pass
else:

    class SpreadFileScheduling(LoadFileScheduling):
        """``--dist loadfile``, except that the tests of a :data:`SPREAD` module are work units
        of their own."""

        def _split_scope(self, nodeid: str) -> str:
            module = module_of(nodeid)
            return nodeid if module in SPREAD else module

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "loadfile":
            return None
        return SpreadFileScheduling(config, log)
