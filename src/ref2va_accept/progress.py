"""Live progress of a campaign run: which request is running, for how long, and what is left.

On the 910C host one 15 s request takes about half an hour and a track takes hours, so the
terminal says, as each request runs: track, arm, kind, request n of N (in the whole run), its
elapsed time, and an estimate of the run's remaining time.

- The plan is made once after collection, from the collected scenarios and the campaign: how
  many requests of which duration class each scenario sends. The counts come from the same
  protocol fields and seeds that the scenarios read (`lossless`, `lossy`, `latency`);
  tests/unit/test_progress.py runs those modules against a counting stand-in and checks that
  they send exactly what is planned, so the plan cannot drift from them unnoticed.
- Expected seconds per request: the campaign's frozen preflight medians
  (`protocol.expected_request_s`) when given, else the median of the run's own finished requests
  of that duration class. Engine starts, scoring and comparisons are not in the estimate.
- On a terminal, one line rewritten in place every second while a request runs and cleared when
  it ends, restoring what pytest had on that line. Elsewhere (CI logs, `| tee`), one line when a
  request starts, one when it ends, and a heartbeat every 60 s while it runs. Under `-q`, nothing.
  Nothing at all is written by a run that sends no request (the harness's own tests).
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from .campaign import DurationClass, LoadedCampaign, Protocol, duration_class
from .errors import Ref2VAError
from .latency import ordering
from .workload import Outcome, RequestStart

log = logging.getLogger(__name__)

PLUGIN_NAME = "ref2va-progress"
HEARTBEAT_S = 60.0
TICK_S = 1.0
PREFIX = "[ref2va]"


# -- how many requests each scenario sends ------------------------------------------------------
# Each count names the code it mirrors; test_progress.py runs that code and compares.
def lossless_baseline_requests() -> int:
    """lossless.run_baseline: watched + unobserved on one B0 instance, watched on a second."""
    return 3


def lossless_candidate_requests() -> int:
    """lossless.run_candidate: watched then unobserved on one candidate instance."""
    return 2


def lossy_baseline_requests(seeds: Sequence[int]) -> int:
    """lossy.run_baseline: the track's seeds on two independent B0 instances."""
    return 2 * len(seeds)


def lossy_candidate_requests(seeds: Sequence[int]) -> int:
    """lossy.run_candidate: the track's seeds on one candidate instance."""
    return len(seeds)


def latency_requests(protocol: Protocol, candidate: str) -> int:
    """latency.run_latency: per instance of the frozen ordering, warmups and measured repeats;
    on the candidate's instances the caching probe's distinct requests too."""
    return sum(protocol.warmups + protocol.repeats
               + (protocol.caching_probe_requests if arm == candidate else 0)
               for arm in ordering(protocol.ordering, protocol.order_seed, candidate))


@dataclass(frozen=True)
class Unit:
    """Requests one scenario sends; `key` is shared by scenarios that share them (B0's runs)."""

    key: str
    track: str
    requests: int

    @property
    def duration(self) -> DurationClass:
        return duration_class(self.track)


@dataclass(frozen=True)
class ScenarioItem:
    """What the plan needs of one collected test."""

    nodeid: str
    file: str  # the test file's name, e.g. test_lossless.py
    function: str
    track: str | None
    candidate: str | None


UnitsFor = Callable[[LoadedCampaign, str, str | None, str], tuple[Unit, ...]]


def _one(campaign: LoadedCampaign, track: str, candidate: str | None, nodeid: str
         ) -> tuple[Unit, ...]:
    return (Unit(nodeid, track, 1),)


def _seeds(campaign: LoadedCampaign, track: str) -> list[int]:
    seeds: list[int] = campaign.model.tracks[track].request.seeds  # type: ignore[index]
    return seeds


def _lossless_baseline(campaign: LoadedCampaign, track: str, candidate: str | None,
                       nodeid: str) -> tuple[Unit, ...]:
    # Shared through the session's Baselines: made by whichever of the track's items runs first.
    return (Unit(f"lossless-baseline/{track}", track, lossless_baseline_requests()),)


def _lossless_candidate(campaign: LoadedCampaign, track: str, candidate: str | None,
                        nodeid: str) -> tuple[Unit, ...]:
    return (*_lossless_baseline(campaign, track, candidate, nodeid),
            Unit(nodeid, track, lossless_candidate_requests()))


def _lossy_baseline(campaign: LoadedCampaign, track: str, candidate: str | None, nodeid: str
                    ) -> tuple[Unit, ...]:
    return (Unit(f"lossy-baseline/{track}", track,
                 lossy_baseline_requests(_seeds(campaign, track))),)


def _lossy_candidate(campaign: LoadedCampaign, track: str, candidate: str | None, nodeid: str
                     ) -> tuple[Unit, ...]:
    return (*_lossy_baseline(campaign, track, candidate, nodeid),
            Unit(nodeid, track, lossy_candidate_requests(_seeds(campaign, track))))


def _latency(campaign: LoadedCampaign, track: str, candidate: str | None, nodeid: str
             ) -> tuple[Unit, ...]:
    assert candidate is not None  # parametrized per candidate
    return (Unit(nodeid, track, latency_requests(campaign.model.protocol, candidate)),)


def _none(campaign: LoadedCampaign, track: str, candidate: str | None, nodeid: str
          ) -> tuple[Unit, ...]:
    return ()


# Every campaign scenario of tests/, by file and function. A scenario missing here is planned
# with no request (and logged); test_progress.py fails if one of the suite's is missing.
SCENARIOS: Mapping[tuple[str, str], UnitsFor] = {
    ("test_b0_output.py", "test_b0_returns_complete_mp4"): _one,
    # Its other requests are raw HTTP (bad input, the async job): short, not timed.
    ("test_lifecycle.py", "test_cancelled_async_job_leaves_server_able_to_serve"): _one,
    ("test_lifecycle.py", "test_bad_request_gets_400_and_server_stays_healthy"): _none,
    ("test_lifecycle.py", "test_stop_leaves_nothing_and_restart_works"): _none,
    ("test_lossless.py", "test_baseline_reproduces_itself"): _lossless_baseline,
    ("test_lossless.py", "test_candidate_is_bit_exact"): _lossless_candidate,
    ("test_lossy.py", "test_baseline_variability_leaves_room_to_decide"): _lossy_baseline,
    ("test_lossy.py", "test_candidate_within_the_lossy_gate"): _lossy_candidate,
    ("test_latency.py", "test_latency_against_matched_b0"): _latency,
    ("test_track_verdicts.py", "test_track_verdict"): _none,
}


@dataclass(frozen=True)
class Plan:
    """Per collected campaign scenario, the requests it will send, in collection order."""

    items: Mapping[str, tuple[Unit, ...]]
    unknown: tuple[str, ...] = ()

    def units(self) -> dict[str, Unit]:
        return {u.key: u for units in self.items.values() for u in units}

    @property
    def total(self) -> int:
        return sum(u.requests for u in self.units().values())

    def per_duration(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for unit in self.units().values():
            counts[unit.duration] = counts.get(unit.duration, 0) + unit.requests
        return counts


def plan_run(items: Iterable[ScenarioItem], campaign: LoadedCampaign) -> Plan:
    planned: dict[str, tuple[Unit, ...]] = {}
    unknown: list[str] = []
    for item in items:
        if item.track is None:
            continue  # not a campaign scenario: sends nothing through Arms
        units_for = SCENARIOS.get((item.file, item.function))
        if units_for is None:
            unknown.append(item.nodeid)
            log.warning("live progress: no request count known for %s; planned as none",
                        item.nodeid)
            units_for = _none
        planned[item.nodeid] = units_for(campaign, item.track, item.candidate, item.nodeid)
    return Plan(planned, tuple(unknown))


# -- where the run stands -----------------------------------------------------------------------
def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def fmt_duration(seconds: float) -> str:
    s = max(0, round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


@dataclass
class Progress:
    """The plan, what has run of it, and the remaining time; no I/O."""

    plan: Plan
    medians: Mapping[str, float] | None = None
    started: int = 0
    finished: dict[str, list[float]] = field(default_factory=dict)  # duration -> seconds (ok)
    done_units: set[str] = field(default_factory=set)
    done_items: set[str] = field(default_factory=set)
    current_item: str | None = None
    sent_in_item: int = 0

    def item_started(self, nodeid: str) -> None:
        self.current_item, self.sent_in_item = nodeid, 0

    def item_finished(self, nodeid: str) -> None:
        # Whatever it sent, its units are over (a failed B0 makes its candidates send nothing).
        self.done_items.add(nodeid)
        self.done_units |= {u.key for u in self.plan.items.get(nodeid, ())}
        if self.current_item == nodeid:
            self.current_item, self.sent_in_item = None, 0

    def request_started(self) -> int:
        self.started += 1
        self.sent_in_item += 1
        return self.started

    def request_finished(self, duration: str, seconds: float, ok: bool) -> None:
        if ok:  # a fast failure says nothing about how long a request takes
            self.finished.setdefault(duration, []).append(seconds)

    def remaining_requests(self) -> dict[str, int]:
        """Requests still to start, per duration class (the running one excluded)."""
        pending: dict[str, Unit] = {}
        for nodeid, units in self.plan.items.items():
            if nodeid in self.done_items:
                continue
            for unit in units:
                if unit.key not in self.done_units:
                    pending.setdefault(unit.key, unit)
        counts: dict[str, int] = {}
        for unit in pending.values():
            counts[unit.duration] = counts.get(unit.duration, 0) + unit.requests
        current = self.plan.items.get(self.current_item or "", ())
        if current and self.sent_in_item:
            # Every unit of one scenario is of its track, so of one duration class.
            duration = current[0].duration
            own = sum(u.requests for u in current if u.key in pending)
            counts[duration] = counts.get(duration, 0) - min(self.sent_in_item, own)
        return {d: n for d, n in counts.items() if n > 0}

    @property
    def total(self) -> int:
        """N of "request n of N": what started plus what is still planned."""
        return self.started + sum(self.remaining_requests().values())

    def expected_s(self, duration: str) -> float | None:
        if self.medians and duration in self.medians:
            return float(self.medians[duration])
        seen = self.finished.get(duration)
        return statistics.median(seen) if seen else None

    def source(self) -> str:
        if self.medians:
            return "from the frozen preflight medians"
        n = sum(len(v) for v in self.finished.values())
        if not n:
            return "no finished request yet"
        return f"estimate from {_count(n, 'finished request')}"

    def eta(self, running: str | None = None, elapsed: float = 0.0) -> str:
        """The run's remaining request time as text, e.g. "~3h10m (from the frozen ...)"."""
        total, unknown = 0.0, []
        remaining = self.remaining_requests()
        for duration, count in sorted(remaining.items()):
            expected = self.expected_s(duration)
            if expected is None:
                unknown.append(f"{count} x {duration}")
            else:
                total += count * expected
        if running is not None:
            expected = self.expected_s(running)
            if expected is None:
                unknown.append(f"the running {running} request")
            else:
                total += max(0.0, expected - elapsed)
        if not remaining and running is None:
            return "none left"
        if unknown and not total:
            return f"unknown ({self.source()})"
        text = f"{'>=' if unknown else '~'}{fmt_duration(total)} ({self.source()}"
        return text + (f"; not yet timed: {', '.join(unknown)})" if unknown else ")")

    def summary(self) -> str:
        counts = self.plan.per_duration()
        parts = ", ".join(f"{d}: {counts[d]}" for d in ("5s", "15s") if d in counts)
        scenarios = sum(1 for u in self.plan.items.values() if u)
        text = f"{PREFIX} plan: {_count(self.plan.total, 'request')} ({parts}) in " \
               f"{_count(scenarios, 'scenario')}"
        if self.medians:
            medians = ", ".join(f"{d} {self.medians[d]:.1f} s" for d in ("5s", "15s")
                                if d in self.medians)
            text += f"; expected per request {medians} from the frozen preflight medians"
        else:
            text += "; expected time per request estimated from this run's finished requests"
        return text + "; engine starts and scoring not included"


# -- writing it ---------------------------------------------------------------------------------
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

    @contextlib.contextmanager
    def _uncaptured(self) -> Iterator[None]:
        if self.capture is None:
            yield
        else:
            with self.capture.global_and_fixture_disabled():
                yield

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
        with self._uncaptured():
            self._move_below()
            self.tr._tw.line(text)
            self.tr.flush()

    def restore(self) -> None:
        """Put back what pytest had begun on its line before progress lines moved it."""
        displaced, self._displaced = self._displaced, None
        if displaced:
            with self._uncaptured():
                self.tr._tw.write(displaced, flush=True)

    def begin_rewrite(self) -> None:
        """Remember what pytest has on the current line; the ticker borrows the line."""
        tw = self.tr._tw
        saved = self._current()
        if saved and tw.width_of_current_line >= tw.fullwidth - 1:
            # A wrapped line cannot be restored with a carriage return: start a fresh one.
            with self._uncaptured():
                self._move_below()
            saved = ""
        self._saved_line = saved

    def rewrite(self, text: str) -> None:
        width = self.tr._tw.fullwidth - 1
        with self._uncaptured():
            self.tr.rewrite(text[:width], erase=True)
            self.tr.flush()

    def end_rewrite(self) -> None:
        """Clear the borrowed line and put back what pytest had there."""
        tw = self.tr._tw
        with self._uncaptured():
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
    explained = outcome.explain()
    return f"FAILED {took}: {explained[:120]}{'…' if len(explained) > 120 else ''}"


# -- pytest wiring ------------------------------------------------------------------------------
def _scenario(item: pytest.Item) -> ScenarioItem:
    params: dict[str, Any] = getattr(getattr(item, "callspec", None), "params", {})
    track = params.get("track_id")
    candidate = params.get("candidate_id")
    return ScenarioItem(item.nodeid, item.path.name,
                        getattr(item, "originalname", item.name),
                        track if isinstance(track, str) else None,
                        candidate if isinstance(candidate, str) else None)


class ProgressPlugin:
    """Registered by the ref2va plugin; `observer` is what the `arms` fixture hands to Arms."""

    def __init__(self, config: pytest.Config, campaign: Callable[[], LoadedCampaign]) -> None:
        self.config = config
        self.campaign = campaign
        self.observer: ProgressReporter | None = None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.config.get_verbosity() < 0:
            return  # -q: nothing extra
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        items = [_scenario(item) for item in session.items]
        if tr is None or not any(item.track for item in items):
            return  # the harness's own tests: no campaign scenario, no progress
        try:
            campaign = self.campaign()
        except Ref2VAError:
            return  # collection already failed with the campaign's error
        plan = plan_run(items, campaign)
        if not plan.total:
            return
        terminal = Terminal(tr, self.config.pluginmanager.get_plugin("capturemanager"))
        medians = campaign.model.protocol.expected_request_s
        self.observer = ProgressReporter(
            Progress(plan, dict(medians.items()) if medians else None), terminal,
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
