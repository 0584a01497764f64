"""Live progress of a campaign run: which request is running, for how long, and what is left.

On the 910C host one 15 s request takes about half an hour and a track takes hours, so the
terminal says, as each request runs: track, arm, kind, request n of N (in the whole run), its
elapsed time, and an estimate of the run's remaining time (the plan is
planning/_request_plan.py's, the estimate planning/_run_progress.py's).

- On a terminal, one line rewritten in place every second while a request runs and cleared when
  it ends, restoring what pytest had on that line. Elsewhere (CI logs, `| tee`), one line when a
  request starts, one when it ends, and a heartbeat every 60 s while it runs. Under `-q`, nothing.
  Nothing at all is written by a run that sends no request (the harness's own tests).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import pytest

from ref2va_accept.arms._arms import Outcome, RequestStart
from ref2va_accept.campaign import LoadedCampaign, duration_class
from ref2va_accept.core import Ref2VAError
from ref2va_accept.planning import (
    PREFIX,
    Prices,
    Progress,
    ScenarioItem,
    TrackPlan,
    fmt_duration,
    plan_run,
)

log = logging.getLogger(__name__)

PLUGIN_NAME = "ref2va-progress"
HEARTBEAT_S = 60.0
TICK_S = 1.0


def say_now(config: pytest.Config, line: str) -> None:
    """One line on the terminal now, even from inside a test or a fixture's set-up.

    pytest captures output while a test and its fixtures run: a line written to its terminal
    reporter then lands in the test's captured output (shown only if it fails), and all the
    terminal shows is pytest's progress line broken in two. Output capture is set aside for
    the write, as live logging does.
    """
    plugins = config.pluginmanager
    reporter = plugins.get_plugin("terminalreporter")
    if reporter is None:
        return
    with _uncaptured(plugins.get_plugin("capturemanager")):
        reporter.write_line(line)


@contextlib.contextmanager
def _uncaptured(capture: Any) -> Iterator[None]:
    """pytest's output capture (its capture manager) set aside; nothing to do without one."""
    if capture is None:
        yield
    else:
        with capture.global_and_fixture_disabled():
            yield


class Terminal:
    """Writes through pytest's terminal reporter, with pytest's output capture set aside.

    A request runs inside a test, while pytest captures output; like live logging, progress
    suspends that capture for each write, so it reaches the terminal and not the test's report.
    What pytest had begun on the current line (the file's name and its dots, or the test's id
    under -v) is moved below progress lines and put back, once, before pytest writes the result
    (`restore`), so its own output reads as without progress.
    """

    def __init__(self, reporter: Any, capture: Any = None) -> None:
        self.tr = reporter
        self.capture = capture
        self._saved_line = ""
        self._displaced: str | None = None

    @property
    def isatty(self) -> bool:
        return bool(self.tr.isatty())

    def _current(self) -> str:
        return str(getattr(self.tr._tw, "_current_line", ""))

    def _move_below(self) -> None:
        tw = self.tr._tw
        if self._displaced is None:
            self._displaced = self._current()
        if tw.width_of_current_line:
            tw.line()

    def line(self, text: str) -> None:
        """One whole line of progress, below what pytest had begun on the current one."""
        with _uncaptured(self.capture):
            self._move_below()
            self.tr._tw.line(text)
            self.tr.flush()

    def restore(self) -> None:
        """Put back what pytest had begun on its line before progress lines moved it."""
        displaced, self._displaced = self._displaced, None
        if displaced:
            with _uncaptured(self.capture):
                self.tr._tw.write(displaced, flush=True)

    def begin_rewrite(self) -> None:
        """Remember what pytest has on the current line; the ticker borrows the line."""
        tw = self.tr._tw
        saved = self._current()
        if saved and tw.width_of_current_line >= tw.fullwidth - 1:
            # A wrapped line cannot be restored with a carriage return: start a fresh one.
            with _uncaptured(self.capture):
                self._move_below()
            saved = ""
        self._saved_line = saved

    def rewrite(self, text: str) -> None:
        width = self.tr._tw.fullwidth - 1
        with _uncaptured(self.capture):
            self.tr.rewrite(text[:width], erase=True)
            self.tr.flush()

    def end_rewrite(self) -> None:
        """Clear the borrowed line and put back what pytest had there."""
        tw = self.tr._tw
        with _uncaptured(self.capture):
            self.tr.rewrite("", erase=True)
            tw.write("\r" + self._saved_line, flush=True)
        # pytest measures the current line to place its [ 42%]: it must see only its own text.
        tw._current_line = self._saved_line


Mode = Literal["tty", "plain"]


class ProgressReporter:
    """The Arms observer: tells the terminal about each request as it runs."""

    def __init__(self, progress: Progress, terminal: Terminal, mode: Mode, *,
                 clock: Callable[[], float] = time.monotonic, tick_s: float | None = TICK_S,
                 heartbeat_s: float = HEARTBEAT_S) -> None:
        self.progress = progress
        self.terminal = terminal
        self.mode = mode
        self.clock = clock
        self.tick_s = tick_s  # None: no ticker thread (tests call tick() themselves)
        self.heartbeat_s = heartbeat_s
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._running: RequestStart | None = None
        self._number = 0
        self._started_at = 0.0
        self._beats = 0
        self._announced = False

    def _describe(self, request: RequestStart) -> str:
        return f"{request.track} {request.arm} {request.kind}"

    def _head(self) -> str:
        return f"{PREFIX} request {self._number}/{self.progress.total}"

    def _eta(self, elapsed: float = 0.0) -> str:
        running = duration_class(self._running.track) if self._running else None
        return f"run ETA {self.progress.eta(running, elapsed)}"

    # RequestObserver
    def on_engine_start(self, track: str, arm: str) -> None:
        with self._lock:
            self.progress.engine_started()

    def on_request_start(self, request: RequestStart) -> None:
        with self._lock:
            if not self._announced:
                self._announced = True
                self.terminal.line(self.progress.summary())
            self._number = self.progress.request_started()
            self._running = request
            self._started_at = self.clock()
            self._beats = 0
            if self.mode == "plain":
                self.terminal.line(f"{self._head()} start: {self._describe(request)} "
                                   f"seed {request.seed} · {self._eta()}")
            else:
                self.terminal.begin_rewrite()
                self._render(0.0)
        if self.tick_s is not None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run_ticker, name=PLUGIN_NAME,
                                            daemon=True)
            self._thread.start()

    def on_request_end(self, request: RequestStart, outcome: Outcome | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            elapsed = self.clock() - self._started_at
            ok = outcome is not None and outcome.complete
            latency = outcome.sample.latency_s if outcome is not None else None
            self.progress.request_finished(duration_class(request.track),
                                           latency if latency is not None else elapsed, ok)
            self._running = None
            if self.mode == "plain":
                self.terminal.line(f"{self._head()} end: {self._describe(request)}: "
                                   f"{_outcome_text(outcome, elapsed)} · {self._eta()}")
            else:
                self.terminal.end_rewrite()

    def _run_ticker(self) -> None:
        assert self.tick_s is not None
        while not self._stop.wait(self.tick_s):
            self.tick()

    def tick(self) -> None:
        """Once a second while a request runs: rewrite the line, or a heartbeat when due."""
        with self._lock:
            if self._running is None:
                return
            elapsed = self.clock() - self._started_at
            if self.mode == "tty":
                self._render(elapsed)
            elif elapsed >= (self._beats + 1) * self.heartbeat_s:
                self._beats = int(elapsed // self.heartbeat_s)
                self.terminal.line(f"{self._head()} running {fmt_duration(elapsed)}: "
                                   f"{self._describe(self._running)} · {self._eta(elapsed)}")

    def _render(self, elapsed: float) -> None:
        assert self._running is not None
        self.terminal.rewrite(f"{self._head()} {self._describe(self._running)} "
                              f"{fmt_duration(elapsed)} · {self._eta(elapsed)}")

    def close(self) -> None:
        """Stop a ticker left running (an interrupted run)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


def _outcome_text(outcome: Outcome | None, elapsed: float) -> str:
    if outcome is None:
        return f"no outcome (interrupted or raised) after {fmt_duration(elapsed)}"
    latency = outcome.sample.latency_s
    took = f"{latency:.1f} s" if latency is not None else f"{elapsed:.1f} s elapsed"
    if outcome.complete:
        return f"ok {took}, complete MP4"
    if outcome.says_capture_stopped:
        return (f"stopped {took}: the engine cut it once its capture was written, as a "
                "localization request asks (the pass checks the capture whole)")
    explained = outcome.explain()
    return f"FAILED {took}: {explained[:120]}{'…' if len(explained) > 120 else ''}"


# -- pytest wiring ------------------------------------------------------------------------------
def scenario_item(item: pytest.Item) -> ScenarioItem:
    """What the run plan needs of a collected test."""
    params: dict[str, Any] = getattr(getattr(item, "callspec", None), "params", {})
    track = params.get("track_id")
    candidate = params.get("candidate_id")
    return ScenarioItem(item.nodeid, item.path.name,
                        getattr(item, "originalname", item.name),
                        track if isinstance(track, str) else None,
                        candidate if isinstance(candidate, str) else None)


class ProgressPlugin:
    """Registered by the ref2va plugin; `observer` is what the `arms` fixture hands to Arms."""

    def __init__(self, config: pytest.Config, campaign: Callable[[], LoadedCampaign],
                 plans: Callable[[], Mapping[str, TrackPlan]]) -> None:
        # The run's own plans (made once by the plugin's run state), not a second copy.
        self.plans = plans
        self.config = config
        self.campaign = campaign
        self.observer: ProgressReporter | None = None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.config.get_verbosity() < 0:
            return  # -q: nothing extra
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        items = [scenario_item(item) for item in session.items]
        if tr is None or not any(item.track for item in items):
            return  # the harness's own tests: no campaign scenario, no progress
        try:
            campaign, plans = self.campaign(), self.plans()
        except Ref2VAError:
            return  # the session is stopping with the campaign's error, said once
        plan = plan_run(items, plans)
        if not plan.total:
            return
        terminal = Terminal(tr, self.config.pluginmanager.get_plugin("capturemanager"))
        medians = campaign.model.protocol.expected_request_s
        prices = Prices.of(campaign)
        scoring = {track: prices.score_s(p) for track, p in plans.items()
                   if p.quality == "lossy" and not prices.unscored(p)}
        self.observer = ProgressReporter(
            Progress(plan, dict(medians.items()) if medians else None,
                     {str(d): s for d, s in prices.start_s.items()} or None, scoring or None),
            terminal,
            "tty" if terminal.isatty else "plain")

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        if self.observer is not None:
            self.observer.progress.item_started(nodeid)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self) -> None:
        # Before the terminal reporter writes this phase's result on its line.
        if self.observer is not None:
            self.observer.terminal.restore()

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        if self.observer is not None:
            self.observer.progress.item_finished(nodeid)

    def pytest_sessionfinish(self) -> None:
        if self.observer is not None:
            self.observer.close()
