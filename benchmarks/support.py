"""What the benchmarks share: the repository root and a ratio against a same-run baseline."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Ratio:
    """One benchmark's subject against its baseline, both measured in this run."""

    name: str
    subject: str
    subject_s: float
    baseline: str
    baseline_s: float
    target: str
    met: bool | None  # None: no target
    note: str = ""

    @property
    def value(self) -> float:
        return self.subject_s / self.baseline_s

    def line(self) -> str:
        verdict = "" if self.met is None else (" (target met)" if self.met else " (TARGET MISSED)")
        note = f"; {self.note}" if self.note else ""
        return (f"{self.name}: {self.subject} {self.subject_s:.4g} s / {self.baseline} "
                f"{self.baseline_s:.4g} s = {self.value:.3f}, target {self.target}{verdict}{note}")


def median_of(benchmark: Any) -> float:
    """The median of the rounds pytest-benchmark timed."""
    return float(benchmark.stats.stats.median)


def median(values: list[float]) -> float:
    return float(statistics.median(values))
