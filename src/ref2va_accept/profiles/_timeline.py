"""Intervals on one timeline: the union of busy spans, and how two sets of spans overlap.

torch_npu's overlap analysis (step_trace_time.csv) splits a step into computing, communication
not overlapped by computing, the overlap of the two, and free time. The same definitions are
applied here where a source gives only spans (a Chrome trace, or the copies among the kernels).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["Spans", "length", "ms", "split", "union"]

Spans = list[tuple[float, float]]


def ms(us: float) -> float:
    """Microseconds (every profiler's unit) as milliseconds, to the microsecond."""
    return round(us / 1000.0, 3)


def union(spans: Iterable[tuple[float, float]]) -> Spans:
    """The spans merged where they touch or overlap, sorted (zero-length spans dropped)."""
    merged: Spans = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def length(spans: Sequence[tuple[float, float]]) -> float:
    """The total length of already-merged spans."""
    return sum(end - start for start, end in spans)


def _intersection(a: Spans, b: Spans) -> float:
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        low, high = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if high > low:
            total += high - low
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def split(busy: Iterable[tuple[float, float]], other: Iterable[tuple[float, float]],
          window: tuple[float, float]) -> dict[str, float]:
    """A window's time split as the overlap analysis does: ``busy`` (computing), ``other``
    not overlapped by busy, the overlap of the two, and free (neither)."""
    low, high = window
    a = union((max(s, low), min(e, high)) for s, e in busy)
    b = union((max(s, low), min(e, high)) for s, e in other)
    both = _intersection(a, b)
    computing, other_total = length(a), length(b)
    total = max(0.0, high - low)
    return {"total": total, "computing": computing, "other_not_overlapped": other_total - both,
            "overlapped": both, "free": max(0.0, total - computing - other_total + both)}
