"""A pytest plugin for the selftest's own upkeep (`-p tests.cpu_by_file --cpu-by-file N`): the N
test files that took the most CPU, at the end of the session.

The selftest is bound by CPU, not by waiting: on two cores its minutes are about its CPU seconds
halved. pytest's `--durations` gives wall time, which on a shared CPU is mostly other work's, and
charges a module fixture's set-up to the first test that asked for it. This counts, per test
file, what a test's run (set-up, call and teardown) cost its own process and the child processes
it waited for (engines, judges, pytest sessions it started, and what they waited for in turn),
by getrusage. A child is counted when it is reaped: an engine a module fixture starts is charged
at its teardown, to the same file. Under pytest-xdist each worker counts its own files and the
table is merged; the session line adds what the workers spent outside any test (collection:
importing torch, OpenCV and SciPy) and the main process's own CPU.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass, field
from typing import Any

import pytest

OPTION = "--cpu-by-file"
KEY = "cpu_by_file"


def cpu_seconds() -> tuple[float, float]:
    """(this process, its reaped children): user plus system CPU seconds."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@dataclass
class FileCpu:
    own: float = 0.0
    children: float = 0.0
    tests: int = 0

    @property
    def total(self) -> float:
        return self.own + self.children


@dataclass
class Tally:
    files: dict[str, FileCpu] = field(default_factory=dict)
    processes: float = 0.0  # every process that counted, whole: tests, collection, the rest
    lost: int = 0  # xdist workers that ended without handing their tally over

    def add(self, path: str, own: float, children: float, tests: int = 1) -> None:
        cpu = self.files.setdefault(path, FileCpu())
        cpu.own += own
        cpu.children += children
        cpu.tests += tests

    def as_message(self) -> dict[str, Any]:
        """What a worker hands the main process (execnet carries plain data only)."""
        return {"processes": self.processes,
                "files": {p: [c.own, c.children, c.tests] for p, c in self.files.items()}}

    def merge(self, message: dict[str, Any]) -> None:
        self.processes += float(message["processes"])
        for path, (own, children, tests) in message["files"].items():
            self.add(path, float(own), float(children), int(tests))

    def lines(self, top: int) -> list[str]:
        ranked = sorted(self.files.items(), key=lambda item: item[1].total, reverse=True)
        tests_cpu = sum(c.total for c in self.files.values())
        said = [f"{c.total:8.1f} s  {path} ({c.tests} test{'s' if c.tests != 1 else ''}; "
                f"{c.own:.1f} s in the test process, {c.children:.1f} s in its children)"
                for path, c in ranked[:top]]
        said.append(f"tests: {tests_cpu:.1f} s of CPU in {len(ranked)} file(s) "
                    f"(top {min(top, len(ranked))} above); the session's processes in all: "
                    f"{self.processes:.1f} s (collection and what ran between tests included)")
        if self.lost:
            said.append(f"incomplete: {self.lost} xdist worker(s) ended without handing their "
                        "tally over (crashed); what their tests took is missing above")
        return said


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(OPTION, type=int, default=0, metavar="N",
                     help="list the N test files that took the most CPU (own and reaped "
                          "children) at the end")


class _CpuByFile:
    def __init__(self, config: pytest.Config, top: int) -> None:
        self.config = config
        self.top = top
        self.tally = Tally()
        self.start = cpu_seconds()

    def _since_start(self, *, children: bool) -> float:
        """CPU seconds this process spent since the plugin started, its reaped children's too."""
        now = cpu_seconds()
        return now[0] - self.start[0] + (now[1] - self.start[1] if children else 0.0)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Any:
        before = cpu_seconds()
        yield
        after = cpu_seconds()
        self.tally.add(item.nodeid.split("::", 1)[0], after[0] - before[0],
                       after[1] - before[1])

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:  # an xdist worker: hand the tally over
            self.tally.processes = self._since_start(children=True)
            workeroutput[KEY] = self.tally.as_message()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any) -> None:
        message = getattr(node, "workeroutput", {}).get(KEY)
        if message is None:  # a worker that crashed: what it counted is lost, and said so
            self.tally.lost += 1
        else:
            self.tally.merge(message)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if getattr(self.config, "workeroutput", None) is not None:
            return  # a worker says nothing: the main process prints the merged table
        # With xdist the workers counted themselves (their message), and the main process adds
        # its own CPU only: its children are those workers. Without, everything it reaped.
        distributed = self.config.pluginmanager.hasplugin("dsession")
        self.tally.processes += self._since_start(children=not distributed)
        terminalreporter.write_sep("=", f"CPU by test file, top {self.top}")
        for line in self.tally.lines(self.top):
            terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    top = config.getoption(OPTION)
    if top > 0:
        config.pluginmanager.register(_CpuByFile(config, top), "cpu-by-file")
