"""Engines: the session's instance registry, the `arms` fixture that starts them, the B0 runs
shared by a track's candidates, and teardown on Ctrl-C or SIGTERM.

The registry lives in the session's `config.stash` (one per session, never a module global), and
its one audit subscriber (the run state: audit, device-memory wait, checkpoint) is registered
once, when the session is configured.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Generator, Iterator
from types import FrameType
from typing import Any

import pytest

from ref2va_accept.arms import PLUGIN_NAME as PROGRESS_PLUGIN
from ref2va_accept.arms import Arms, ProgressPlugin
from ref2va_accept.campaign import LoadedCampaign
from ref2va_accept.core import EngineStartError
from ref2va_accept.engines import InstanceRegistry
from ref2va_accept.evidence import Cleanup, EvidenceBundle
from ref2va_accept.judging import Baselines, LatencySchedules
from ref2va_accept.plugin._state import run_state

REGISTRY = pytest.StashKey[InstanceRegistry]()


def registry(config: pytest.Config) -> InstanceRegistry:
    """The session's engine registry."""
    return config.stash[REGISTRY]


def stop_all(config: pytest.Config) -> list[Cleanup]:
    """Stop and audit every instance still running (none when the session started none)."""
    found = config.stash.get(REGISTRY, None)
    return found.stop_all() if found is not None else []


class StopSignals:
    """SIGINT and SIGTERM for one session.

    The first ends the session as Ctrl-C does (KeyboardInterrupt): engines are stopped and
    audited, the status is `interrupted` and the report is written. A later one does not raise
    (that would cut the session's end short, leaving status `running` and no report): it SIGKILLs
    every live engine at once, and the session finishes its evidence. SIGINT is taken over also
    when inherited ignored (a shell's background job), so a Ctrl-C forwarded to us counts.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, engines: InstanceRegistry) -> None:
        self.engines = engines
        self.received = 0
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in self.SIGNALS:
            current = signal.getsignal(sig)
            if current in (signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler):
                self._previous[sig] = current
                signal.signal(sig, self)

    def restore(self) -> None:
        for sig, previous in self._previous.items():
            if signal.getsignal(sig) is self:
                signal.signal(sig, previous)
        self._previous.clear()

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.received += 1
        if self.received == 1:
            raise KeyboardInterrupt(f"signal {signum}")
        # os.write, not print: a signal handler may interrupt a write to the same stream.
        os.write(2, f"\nref2va: signal {signum} again: stopping every engine now (SIGKILL); "
                    "the evidence and report are still written\n".encode())
        self.engines.hurry()


SIGNALS = pytest.StashKey[StopSignals]()


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    engines = InstanceRegistry()
    engines.subscribe(lambda audit: run_state(config).after_stop(audit))
    config.stash[REGISTRY] = engines
    handlers = StopSignals(engines)
    handlers.install()
    config.stash[SIGNALS] = handlers


def pytest_unconfigure(config: pytest.Config) -> None:
    # Last resort after the session (its own end stops them before the verdicts).
    stop_all(config)
    handlers = config.stash.get(SIGNALS, None)
    if handlers is not None:
        handlers.restore()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """An engine that did not start is one line (what happened, and its log relative to the
    run's folder), not a traceback through the harness: the evidence has the log's tail."""
    report = yield
    if report.failed and call.excinfo is not None and call.excinfo.errisinstance(
            EngineStartError):
        report.longrepr = call.excinfo.getrepr(style="value")
    return report


@pytest.fixture
def arms(pytestconfig: pytest.Config, campaign: LoadedCampaign, evidence: EvidenceBundle,
         track_id: str) -> Iterator[Arms]:
    """Starts engine instances for this track's arms; each is stopped and audited at teardown.

    An instance that does not stop cleanly fails the test's teardown, after the audit is in the
    evidence: a leaked worker or a held port is a finding, not noise.
    """
    state = run_state(pytestconfig)
    state.ran_tracks.add(track_id)
    state.before_first_engine()
    engines = registry(pytestconfig)
    runner = Arms(campaign, state.plans[track_id], evidence, engines, outcomes=state.outcomes)
    progress = pytestconfig.pluginmanager.get_plugin(PROGRESS_PLUGIN)
    runner.observer = progress.observer if isinstance(progress, ProgressPlugin) else None
    yield runner
    dirty = [audit for audit in (engines.stop(i) for i in runner.started) if not audit.clean]
    handlers = pytestconfig.stash.get(SIGNALS, None)
    # After an interrupt this teardown runs inside the session's end: failing it there would cut
    # that end short (no verdicts, no report); the audit is in the evidence either way.
    if dirty and not (handlers is not None and handlers.received):
        pytest.fail("engine cleanup incomplete: " + "; ".join(
            f"{a.instance}: {', '.join(a.problems)}" for a in dirty), pytrace=False)


@pytest.fixture(scope="session")
def latency_schedules(pytestconfig: pytest.Config) -> LatencySchedules:
    """The session's latency schedules: a shared B0 runs once per track for every candidate."""
    return run_state(pytestconfig).latency


@pytest.fixture(scope="session")
def baselines(pytestconfig: pytest.Config) -> Baselines:
    """The session's B0 reference runs (b0_gate.Baselines): on the session's gate instances,
    a candidate's gate hosted by its first latency instance where the session measures it."""
    return run_state(pytestconfig).baselines
