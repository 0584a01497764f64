"""The harness's own speed, as pytest-benchmark benchmarks: `./ref2va bench` runs them all.

Each benchmark times its subject with pytest-benchmark and, interleaved round by round in the
same run, the baseline it is judged against (curl, `cmp -s`, an FFmpeg decode, the reference
engine's B0). The ratio of the two medians is printed at the end of the run, with its target, and
kept in the benchmark's `extra_info` (so `--benchmark-json FILE` has it too). A missed target is
reported, not failed, unless `--bench-enforce` is given: these are measurements, and a shared
machine moves them. A wrong answer from either side (a failed request, `cmp` finding a
difference) always fails the benchmark.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from benchmarks.support import Ratio


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ref2va benchmarks")
    group.addoption("--bench-rounds", type=int, default=5,
                    help="timed rounds per benchmark (each with its baseline), default 5")
    group.addoption("--bench-pairs", type=int, default=100,
                    help="client overhead: harness/curl request pairs, default 100")
    group.addoption("--bench-mib", type=int, default=1024,
                    help="comparator: MiB per dump folder, default 1024")
    group.addoption("--bench-enforce", action="store_true",
                    help="fail a benchmark whose ratio misses its target")


_RATIOS = pytest.StashKey[list[Ratio]]()


@pytest.fixture
def record_ratio(request: pytest.FixtureRequest, benchmark: Any
                 ) -> Callable[[Ratio], None]:
    """Keep a ratio for the summary and the benchmark's extra_info; enforce it if asked."""

    def record(ratio: Ratio) -> None:
        request.config.stash.setdefault(_RATIOS, []).append(ratio)
        benchmark.extra_info.update({
            "ratio": ratio.value, "baseline": ratio.baseline, "baseline_median_s": ratio.baseline_s,
            "subject_median_s": ratio.subject_s, "target": ratio.target, "target_met": ratio.met,
            "note": ratio.note})
        print(ratio.line())
        if request.config.getoption("bench_enforce") and ratio.met is False:
            pytest.fail(f"target missed: {ratio.line()}", pytrace=False)

    return record


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    ratios = config.stash.get(_RATIOS, [])
    if not ratios:
        return
    terminalreporter.section("ratios against the baseline measured in the same run")
    for ratio in ratios:
        terminalreporter.write_line(ratio.line())
