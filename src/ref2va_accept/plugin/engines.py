"""Engines: the session's instance registry, the `arms` fixture that starts them, the B0 runs
shared by a track's candidates, and teardown on Ctrl-C or SIGTERM.

The registry lives in the session's `config.stash` (one per session, never a module global), and
its one audit subscriber (the run state: audit, device-memory wait, checkpoint) is registered
once, when the session is configured.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Generator, Iterator
from types import FrameType
from typing import Any, TypeVar

import pytest

from ..campaign import LoadedCampaign
from ..errors import EngineStartError
from ..evidence import EvidenceBundle
from ..progress import PLUGIN_NAME as PROGRESS_PLUGIN
from ..progress import ProgressPlugin
from ..server import CleanupAudit, InstanceRegistry
from ..workload import Arms
from .state import run_state

T = TypeVar("T")
REGISTRY = pytest.StashKey[InstanceRegistry]()


def registry(config: pytest.Config) -> InstanceRegistry:
    """The session's engine registry."""
    return config.stash[REGISTRY]


def stop_all(config: pytest.Config) -> list[CleanupAudit]:
    """Stop and audit every instance still running (none when the session started none)."""
    found = config.stash.get(REGISTRY, None)
    return found.stop_all() if found is not None else []


def _interrupt_on_sigterm(signum: int, frame: FrameType | None) -> None:
    # A SIGTERM to the harness (CI cancelling, a scheduler) must tear engines down like Ctrl-C.
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    engines = InstanceRegistry()
    engines.subscribe(lambda audit: run_state(config).after_stop(audit))
    config.stash[REGISTRY] = engines
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt_on_sigterm)


def pytest_unconfigure(config: pytest.Config) -> None:
    # Last resort after the session (its own end stops them before the verdicts).
    stop_all(config)


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
    if dirty:
        pytest.fail("engine cleanup incomplete: " + "; ".join(
            f"{a.instance_id}: {', '.join(a.problems)}" for a in dirty), pytrace=False)


class Baselines:
    """B0's reference runs, made once per track and gate and shared by the track's candidates."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, str], Any] = {}

    def get_or_make(self, gate: str, track_id: str, make: Callable[[], T]) -> T:
        key = (gate, track_id)
        if key not in self._made:
            self._made[key] = make()
        made: T = self._made[key]
        return made


@pytest.fixture(scope="session")
def baselines() -> Baselines:
    """The session's B0 reference runs (see Baselines)."""
    return Baselines()
