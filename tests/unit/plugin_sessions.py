"""Pytest sessions run inside this process, as the harness's own tests start them: the judge's
plugin on a scenario module written into a pytester folder (:func:`run_plugin`), and the
checkout's own collection (:func:`collect_in_checkout`). A new interpreter costs seconds of
start-up and imports; a session here costs none of them and starts no process (the fast tier
refuses one: tests/conftest.py)."""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.unit.suite_runner import ROOT

# The scenario marks of pytest.ini, registered in the pytester session's own ini (it reads no
# other; --strict-markers is off there, but a scenario's marks must still mean what they mean).
MARKS = "[pytest]\nmarkers =\n" + "".join(
    f"    {m}: x\n" for m in ("5s", "15s", "lossless", "lossy", "acceptance", "quality", "perf",
                           "verdict", "profile"))
# pytest-benchmark asks git for the project's name in a subprocess at every session's option
# set-up (pytest_benchmark.utils.get_project_name); these sessions never benchmark, and a test of
# the fast tier starts no process (tests/conftest.py).
PLUGIN_ARGS = ("-p", "ref2va_accept.plugin", "-p", "no:cacheprovider", "-p", "no:benchmark")


def run_plugin(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """``pytest -p ref2va_accept.plugin ARGS`` in this process, in the pytester folder."""
    return pytester.runpytest_inprocess(*PLUGIN_ARGS, *args)


@dataclass(frozen=True)
class Collection:
    """What ``pytest --collect-only -q ARGS`` said from the checkout's root."""

    ret: int | pytest.ExitCode
    nodeids: list[str]
    out: str  # its standard output
    err: str  # its standard error


def collect_in_checkout(*args: str, env: dict[str, str] | None = None) -> Collection:
    """``pytest --collect-only -q ARGS`` from the checkout's root (its pytest.ini, conftest.py and
    plugin), run in this process: the same collection as in a new interpreter, without the
    seconds a new interpreter takes to start and import the judge, and usable in a fixture wider
    than a test, which pytester (one per test) is not."""

    class Collected:
        def __init__(self) -> None:
            self.nodeids: list[str] = []

        def pytest_collection_finish(self, session: pytest.Session) -> None:
            self.nodeids = [item.nodeid for item in session.items]

    collected = Collected()
    modules = set(sys.modules)
    out, err = io.StringIO(), io.StringIO()
    try:
        with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            patch.chdir(ROOT)
            for name, value in (env or {}).items():
                patch.setenv(name, value)
            # (No gc.collect() at the end to find unraisable exceptions: nothing runs here.)
            ret = pytest.main(["--collect-only", "-q", "-p", "no:benchmark", "-p",
                               "no:unraisableexception", *args], plugins=[collected])
    finally:
        # Forgotten, as pytester forgets them: the test modules and conftests it imported
        # (tests/quality/test_lossless.py is `test_lossless`, the name of many a pytester
        # scenario); the judge's own modules stay loaded.
        tests = ROOT / "tests"
        for name in set(sys.modules) - modules:
            file = getattr(sys.modules[name], "__file__", None)
            if file and Path(file).is_relative_to(tests):
                del sys.modules[name]
    return Collection(ret, collected.nodeids, out.getvalue(), err.getvalue())
