"""Pytest sessions run inside this process, as the harness's own tests start them: the judge's
plugin on a scenario module written into a pytester folder (:func:`run_plugin`), the checkout's
own collection (:func:`collect_in_checkout`) and the checkout's own scenarios run as a user runs
them (:func:`run_in_checkout`). A new interpreter costs seconds of start-up and imports; a session
here costs none of them (the collection and the pytester sessions start no process at all: the
fast tier refuses one, tests/conftest.py).

What a session here shares with the test that starts it, and why that is safe: the plugin keeps
its run's state in the session's stash (the engine registry, the run state), installs its
SIGINT/SIGTERM handlers only over the defaults and restores them at the session's end, stops its
engines and tells its reaper DONE before it returns; environment variables are set for the
session only. A test whose subject is the process itself (signals, exit codes a shell sees,
process groups, what a fresh interpreter reads at start) keeps `suite_runner.run_pytest`."""

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
class Session:
    """What ``python -m pytest ARGS`` would have returned, as a subprocess.CompletedProcess has
    it (so a test reads ``returncode``, ``stdout`` and ``stderr`` whichever way it ran)."""

    returncode: int
    stdout: str
    stderr: str


def session_of(result: pytest.RunResult) -> Session:
    """A pytester session's exit code and output, read as a subprocess's."""
    return Session(int(result.ret), "\n".join(result.outlines), "\n".join(result.errlines))


def _in_checkout(args: list[str], env: dict[str, str] | None,
                 plugins: list[object]) -> tuple[int | pytest.ExitCode, str, str]:
    """``pytest ARGS`` from the checkout's root, in this process: its exit code, standard output
    and standard error."""
    modules = set(sys.modules)
    out, err = io.StringIO(), io.StringIO()
    try:
        with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            patch.chdir(ROOT)
            for name, value in (env or {}).items():
                patch.setenv(name, value)
            ret = pytest.main(args, plugins=plugins)
    finally:
        # Forgotten, as pytester forgets them: the test modules and conftests it imported
        # (tests/quality/test_lossless.py is `test_lossless`, the name of many a pytester
        # scenario); the judge's own modules stay loaded.
        tests = ROOT / "tests"
        for name in set(sys.modules) - modules:
            file = getattr(sys.modules[name], "__file__", None)
            if file and Path(file).is_relative_to(tests):
                del sys.modules[name]
    return ret, out.getvalue(), err.getvalue()


def run_in_checkout(*args: str, env: dict[str, str] | None = None) -> Session:
    """``python -m pytest ARGS`` from the checkout's root (its pytest.ini, conftest.py and
    plugin), run in this process: the same session, engines and evidence as in a new
    interpreter, without the seconds one takes to start and import the judge. No timeout
    around it, as a subprocess had: the campaign's own start-up and request timeouts bound the
    engines, and only a hang of the judge itself would go on."""
    ret, out, err = _in_checkout(["-p", "no:benchmark", *args], env, [])
    return Session(int(ret), out, err)


def judge_5s_lossless(campaign: Path, evidence: Path, candidate: str, *extra: str) -> Session:
    """The 5 s lossless track's quality and verdict scenarios, B0 and one candidate, as a user
    runs them (`-rA`: every outcome in the summary), in this process."""
    return run_in_checkout("tests/quality/test_lossless.py", "tests/verdicts", "-m",
                           "lossless and 5s", "-k", f"baseline or {candidate}", "-rA",
                           "--campaign", str(campaign), "--evidence-dir", str(evidence), *extra)


@dataclass(frozen=True)
class Collection:
    """What ``pytest --collect-only -q ARGS`` said from the checkout's root."""

    ret: int | pytest.ExitCode
    nodeids: list[str]
    out: str  # its standard output
    err: str  # its standard error
    # Each collected test's marks, by node id, as -m reads them (its own and its parents').
    marks: dict[str, frozenset[str]]


def collect_in_checkout(*args: str, env: dict[str, str] | None = None) -> Collection:
    """``pytest --collect-only -q ARGS`` from the checkout's root (its pytest.ini, conftest.py and
    plugin), run in this process: the same collection as in a new interpreter, without the
    seconds a new interpreter takes to start and import the judge, and usable in a fixture wider
    than a test, which pytester (one per test) is not."""

    class Collected:
        def __init__(self) -> None:
            self.nodeids: list[str] = []
            self.marks: dict[str, frozenset[str]] = {}

        def pytest_collection_finish(self, session: pytest.Session) -> None:
            self.nodeids = [item.nodeid for item in session.items]
            self.marks = {item.nodeid: frozenset(m.name for m in item.iter_markers())
                          for item in session.items}

    collected = Collected()
    # (No gc.collect() at the end to find unraisable exceptions: nothing runs here.)
    ret, out, err = _in_checkout(["--collect-only", "-q", "-p", "no:benchmark", "-p",
                                  "no:unraisableexception", *args], env, [collected])
    return Collection(ret, collected.nodeids, out, err, collected.marks)
