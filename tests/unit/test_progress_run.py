"""Progress as the user sees it over real time: the TTY ticker thread redraws the request's line
while it runs (it sleeps, the real clock is what it shows), and the plugin's plain lines in a
pytest session of their own on a fake scenario whose request fails at once (in this process,
with pytester: plugin_sessions.run_plugin)."""

from __future__ import annotations

import re
import threading
import time

import pytest

from ref2va_accept.arms import ProgressReporter, Terminal
from ref2va_accept.planning import Progress
from tests.unit.plugin_sessions import MARKS, Session, run_plugin, session_of
from tests.unit.suite_runner import ROOT
from tests.unit.terminal_doubles import (
    REQUEST,
    FakeTTY,
    progress_plan,
    request_outcome,
    screen,
    terminal_reporter,
)

pytest_plugins = ["pytester"]

REFERENCE = ROOT / "fixtures/campaigns/reference.yaml"


def test_tty_ticker_thread_updates_and_stops(pytestconfig: pytest.Config) -> None:
    stream = FakeTTY()
    tr = terminal_reporter(pytestconfig, stream)
    reporter = ProgressReporter(Progress(progress_plan(), {"5s": 100.0, "15s": 1000.0}),
                                Terminal(tr), "tty", tick_s=0.01)
    reporter.progress.item_started("a")
    reporter.on_request_start(REQUEST)
    time.sleep(0.3)
    assert any(t.name == "ref2va-progress" for t in threading.enumerate())
    reporter.on_request_end(REQUEST, request_outcome(True, 0.3))
    assert not any(t.name == "ref2va-progress" for t in threading.enumerate())
    rewrites = stream.getvalue().count("\r[ref2va] request 1/6")
    assert rewrites >= 3, stream.getvalue()
    time.sleep(0.05)
    assert stream.getvalue().count("\r[ref2va] request 1/6") == rewrites  # nothing after the end
    assert screen(stream.getvalue())[-1] == ""


# -- through pytest, with the plugin ------------------------------------------------------------
FAKE_SCENARIO = '''
from types import SimpleNamespace

import ref2va_accept.arms._arms as workload
from tests.unit.timed_samples import timed_sample


class Client:
    """Stands in for the HTTP client: the request fails at once, as an unreachable server would."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def generate(self, request, *, arm, track, kind, index, seed):
        return timed_sample("s1", arm, track, kind, index, seed, ok=False,
                            failure="connect", detail="fake client"), b""


def test_b0_returns_complete_mp4(arms, track_id, monkeypatch):
    monkeypatch.setattr(workload, "TimedClient", Client)
    engine = SimpleNamespace(base_url="http://fake", snapshot_tree=lambda: None,
                             spec=SimpleNamespace(instance_id=track_id + ".b0.1"))
    if arms.observer is not None:  # as Arms.start tells it
        arms.observer.on_engine_start(track_id, "b0")
    outcome = arms.request(engine, "b0", kind="smoke", index=0)
    assert not outcome.sample.ok


def test_harness_own():
    pass
'''


def _run_fake(pytester: pytest.Pytester, *args: str) -> Session:
    pytester.makeini(MARKS)
    pytester.makepyfile(test_b0_output=FAKE_SCENARIO)
    return session_of(run_plugin(pytester, "-p", "no:randomly", "test_b0_output.py",
                                 "--campaign", str(REFERENCE),
                                 "--evidence-dir", str(pytester.path / "evidence"), *args))


def test_plugin_reports_a_scenarios_requests_in_plain_lines(pytester: pytest.Pytester) -> None:
    result = _run_fake(pytester, "-m", "5s and lossless")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("[ref2va]")]
    assert lines[0].startswith("[ref2va] plan: 1 request (5s: 1) in 1 scenario; expected time "
                               "per request estimated from this run's finished requests")
    assert lines[1] == ("[ref2va] request 1/1 start: 5s-lossless b0 smoke seed 42 · run ETA "
                        "unknown (no finished request yet)")
    assert re.fullmatch(r"\[ref2va\] request 1/1 end: 5s-lossless b0 smoke: FAILED [\d.]+ s "
                        r"elapsed: request failed \(connect\): fake client · run ETA none left",
                        lines[2]), lines[2]
    assert len(lines) == 3
    assert "test_b0_output.py ." in result.stdout  # pytest's own line put back for its result


def test_plugin_is_silent_under_q_and_for_the_harness_own_tests(
        pytester: pytest.Pytester) -> None:
    quiet = _run_fake(pytester, "-q", "-m", "5s and lossless")
    assert quiet.returncode == 0, quiet.stdout[-3000:]
    assert "passed" in quiet.stdout and "[ref2va]" not in quiet.stdout + quiet.stderr
    own = _run_fake(pytester, "-k", "harness_own")
    assert own.returncode == 0, own.stdout[-3000:]
    assert "1 passed" in own.stdout and "[ref2va]" not in own.stdout + own.stderr
