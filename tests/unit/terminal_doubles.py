"""Stand-ins for what the progress reporter draws on and counts: a pytest TerminalReporter 120
columns wide on a stream (FakeTTY where it must be a terminal), a clock the test moves, what a
terminal shows after raw output (screen), and a small plan, a request and its outcome."""

from __future__ import annotations

import io

import pytest
from _pytest.terminal import TerminalReporter

from ref2va_accept.arms import Outcome, RequestStart
from ref2va_accept.planning import Plan, WorkUnit
from tests.unit.timed_samples import timed_sample


def progress_plan() -> Plan:
    """Six requests: a shared 5 s B0 unit of 3 (in scenarios a and b), b's own 2, c's one 15 s."""
    base = WorkUnit("lossless-baseline/5s-lossless", "5s-lossless", 3)
    return Plan({
        "a": (base,),
        "b": (base, WorkUnit("b", "5s-lossless", 2)),
        "c": (WorkUnit("c", "15s-lossy", 1),),
    })


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def terminal_reporter(config: pytest.Config, stream: io.StringIO) -> TerminalReporter:
    """pytest's terminal reporter writing to `stream`, 120 columns wide."""
    tr = TerminalReporter(config, stream)
    tr._tw.fullwidth = 120
    return tr


def request_outcome(ok: bool, latency_s: float) -> Outcome:
    """The outcome of a 5s-lossless B0 measured request (an HTTP 500 where not ok)."""
    sample = timed_sample("s1", "b0", "5s-lossless", "measured", 0, 42, ok=ok,
                          failure=None if ok else "http_status", detail=None if ok else "HTTP 500",
                          latency_s=latency_s)
    return Outcome(sample, {"video": {}} if ok else None, ())


REQUEST = RequestStart("5s-lossless", "b0", "measured", 0, 42)


def screen(raw: str) -> list[str]:
    """What a terminal shows after `raw`: carriage returns rewind, later text overwrites."""
    lines, col = [[]], 0  # type: list[list[str]], int
    for ch in raw:
        if ch == "\n":
            lines.append([])
            col = 0
        elif ch == "\r":
            col = 0
        else:
            line = lines[-1]
            line.extend(" " * (col - len(line) + 1)) if col >= len(line) else None
            line[col] = ch
            col += 1
    return ["".join(line).rstrip() for line in lines]
