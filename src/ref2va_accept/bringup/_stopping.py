"""How a bring-up ends when it does not finish: its exit codes, and SIGINT/SIGTERM.

The first signal interrupts the step under way (as Ctrl-C does): the engines it started are
stopped in upstream's order by the step's own cleanup and the registry's, the page is written and
the command exits 128 + the signal's number. A later signal does not interrupt the cleanup: it
SIGKILLs every live engine at once (InstanceRegistry.hurry), and the page is still written.
Inside a pytest session (`pytest -m bringup`) the session's own handlers stay in place: they
raise KeyboardInterrupt the same way.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any

from ref2va_accept.core import EXIT_OK, EXIT_PROBLEM
from ref2va_accept.engines import InstanceRegistry

EXIT_FINISHED = EXIT_OK  # finished, no row contradicted
EXIT_CONTRADICTED = EXIT_PROBLEM  # finished, a row contradicted
EXIT_STOPPED_EARLY = 3  # a step raised: the bring-up stopped there (the page says where)
# Interrupted by a signal: 128 + its number, as a shell reports it (130 SIGINT, 143 SIGTERM).
EXIT_SIGNALLED_BASE = 128


class BringupInterrupted(KeyboardInterrupt):
    """A stop signal arrived while a bring-up ran."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


def signal_of(exc: KeyboardInterrupt) -> int:
    """The signal behind an interrupt: our own carries it; pytest's handler says `signal N`;
    a plain KeyboardInterrupt is Ctrl-C."""
    if isinstance(exc, BringupInterrupted):
        return exc.signum
    words = str(exc).split()
    if len(words) == 2 and words[0] == "signal" and words[1].isdigit():
        return int(words[1])
    return int(signal.SIGINT)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class StopSignals:
    """SIGINT and SIGTERM while one bring-up runs (installed only over the default handlers, and
    only in the main thread)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, engines: InstanceRegistry) -> None:
        self.engines = engines
        self.received: int | None = None
        self.settled = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in self.SIGNALS:
            current = signal.getsignal(sig)
            if current in (signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler):
                self._previous[sig] = current
                signal.signal(sig, self)
        return self

    def __exit__(self, *_exc: object) -> None:
        for sig, previous in self._previous.items():
            if signal.getsignal(sig) is self:
                signal.signal(sig, previous)
        self._previous.clear()

    def settle(self) -> None:
        """The steps are over: from now on a signal hurries the stops instead of raising."""
        self.settled = True

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None and not self.settled:
            self.received = signum
            raise BringupInterrupted(signum)
        self.received = signum
        # os.write, not print: a signal handler may interrupt a write to the same stream.
        os.write(2, f"\nref2va-accept bringup: {signal_name(signum)} again: stopping every "
                    "engine now (SIGKILL); the page is still written\n".encode())
        self.engines.hurry()
