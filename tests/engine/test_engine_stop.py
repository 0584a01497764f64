"""An idle engine stops on SIGTERM every time, however the signals arrive (issue 13).

The judge stops an instance with SIGTERM to its process group and then SIGTERM to each process it
knows, milliseconds apart. The engine's signal handler used to take a lock; a second signal that
landed while the first handler held it re-entered the handler, which then waited forever on its
own thread: no "Shutting down", SIGKILL after the grace.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import uvicorn

from engine.reference.__main__ import _Server
from engine.reference.runner import GenerationRunner
from tests.engine.conftest import B0_PROFILE, REPO_ROOT, engine_env, running_engine

pytestmark = pytest.mark.engine

# Judge-style stops of a fresh engine each (an engine start is ~2-4 s of CPU). The deadlock this
# file is named for is caught by the in-process test below every time; end to end, the old
# handler planted back failed 1 of 20 such stops (2026-12-07), so repeating them is a weak net
# for it. Five check that the whole stop path (group SIGTERM, a dense burst, a clean exit 0
# with "Shutting down") holds more than once, at a quarter of the twenty's cost.
STOPS = 5
GRACE_S = 10.0  # the reference campaign's engine.shutdown_grace_s


def test_a_signal_inside_the_handler_does_not_deadlock() -> None:
    # The exact interleaving, made deterministic: a second signal while the first handler holds
    # the runner's lock is a nested call to handle_exit on the same thread.
    runner = GenerationRunner(generator=object())  # type: ignore[arg-type]
    server = _Server(uvicorn.Config(app=None), on_exit=[runner.cancel_all])
    loop = asyncio.new_event_loop()
    server._loop = loop
    done = threading.Event()

    def nested() -> None:
        with runner._lock:  # where the first handler was when the second signal came
            server.handle_exit(signal.SIGTERM, None)
            server.handle_exit(signal.SIGTERM, None)
        done.set()

    worker = threading.Thread(target=nested, daemon=True)
    worker.start()
    # On failure the daemon thread stays blocked holding the lock; nothing here touches it again.
    assert done.wait(5.0), "handle_exit blocked on a lock its own thread held"
    assert server.should_exit
    loop.run_until_complete(asyncio.sleep(0))  # the scheduled cancellation runs on the loop
    loop.close()
    assert runner.closed
    runner.shutdown()


def _stop_like_the_judge(process: subprocess.Popen[bytes]) -> tuple[int | None, float]:
    """Group SIGTERM, then a burst of SIGTERMs to the main process (the judge's second round,
    made dense so that one lands inside the first handler); (exit code or None, seconds)."""
    started = time.monotonic()
    os.killpg(process.pid, signal.SIGTERM)
    end = started + 0.3
    while time.monotonic() < end and process.poll() is None:
        try:
            os.kill(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            break
        time.sleep(random.uniform(0.0, 0.0005))
    try:
        code: int | None = process.wait(GRACE_S)
    except subprocess.TimeoutExpired:
        code = None
    return code, time.monotonic() - started


def test_idle_engine_stops_cleanly_every_time(tmp_path: Path) -> None:
    outcomes: list[tuple[int | None, float]] = []
    for _ in range(STOPS):
        with running_engine(B0_PROFILE, tmp_path, new_session=True) as engine:
            outcomes.append(_stop_like_the_judge(engine.process))
            log = engine.log()
        # None: it outlived the grace and running_engine's stop had to SIGKILL it.
        assert outcomes[-1][0] == 0, (outcomes, log[-3000:])
        assert "Shutting down" in log
    assert max(seconds for _, seconds in outcomes) < GRACE_S


def test_engine_started_with_stop_signals_ignored_still_stops(tmp_path: Path) -> None:
    # A shell's background job starts with SIGINT ignored; the engine resets what it inherited.
    def ignore_stop_signals() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    with running_engine(B0_PROFILE, tmp_path, new_session=True,
                        preexec_fn=ignore_stop_signals) as engine:
        code, _ = _stop_like_the_judge(engine.process)
    assert code == 0


_KILLED_TEST = """
import sys, time
from pathlib import Path
from tests.engine.conftest import B0_PROFILE, running_engine
with running_engine(B0_PROFILE, Path(sys.argv[1]), new_session=True) as engine:
    print(engine.process.pid, flush=True)
    time.sleep(600)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's prctl")
def test_an_engine_outlives_no_test_process_killed_before_its_teardown(tmp_path: Path) -> None:
    # A worker killed mid-test runs no teardown; its engine, in a session of its own, must still
    # go (one did live on for an hour after a killed selftest).
    with subprocess.Popen([sys.executable, "-c", _KILLED_TEST, str(tmp_path)], cwd=REPO_ROOT,
                          env=engine_env(), stdout=subprocess.PIPE, text=True) as test:
        try:
            line = test.stdout.readline() if test.stdout else ""
            assert line.strip().isdigit(), f"the test process printed {line!r}"
            engine = int(line)
        finally:
            test.kill()  # as a killed worker dies: no teardown runs
    deadline = time.monotonic() + GRACE_S + 5
    while Path(f"/proc/{engine}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = Path(f"/proc/{engine}").exists()
    if alive:
        os.kill(engine, signal.SIGKILL)
    assert not alive, "the engine outlived the test process that started it"
