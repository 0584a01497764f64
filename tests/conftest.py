"""One xdist group per test module that shares a run between its tests.

The selftest's untimed phase spreads tests over workers with ``--dist loadgroup``: a test is
scheduled on its own, so the independent heavy runs of one module (a suite run per fault) go to
different workers, except that every test of a module using a fixture shared wider than a test
(module, class, package or session scope, defined in the module or in a conftest under tests/:
an engine started once, a campaign run once) gets ``xdist_group(<module>)``, so that the shared
run still happens once, on one worker. Without xdist the mark does nothing.
"""

from __future__ import annotations

import pytest

SHARED_SCOPES = frozenset({"class", "module", "package", "session"})


def shared_fixtures(item: pytest.Item) -> list[str]:
    """The project's own fixtures (not pytest's or a plugin's) that ``item`` uses and that live
    longer than one test."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return sorted(name for name, defs in info.name2fixturedefs.items()
                  if any(d.scope in SHARED_SCOPES and d.baseid for d in defs))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks (loadgroup)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None and shared_fixtures(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
