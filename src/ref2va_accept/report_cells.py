"""What every section of the HTML report draws with: the table style, the verdict colours, a row
of escaped cells, and a number as the evidence holds it."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

TABLE = "border='1' cellpadding='3' style='border-collapse:collapse'"
VERDICT_COLOURS = {"supported": "#1a7f37", "failed": "#cf222e", "inconclusive": "#9a6700"}


def cells(values: Iterable[Any], tag: str = "td") -> str:
    return "".join(f"<{tag}>{html.escape(str(v))}</{tag}>" for v in values)


def latency_summary(check: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A recorded latency_ratio check's decision in brief (ratio of medians, interval bounds,
    target, verdict); None when it has no interval (the protocol ended before a decision)."""
    interval = ((check or {}).get("data") or {}).get("interval")
    if not isinstance(interval, Mapping):
        return None
    bounds = interval.get("interval") or {}
    return {"ratio_of_medians": interval.get("ratio_of_medians"), "lower": bounds.get("lower"),
            "upper": bounds.get("upper"), "target": interval.get("target"),
            "verdict": interval.get("verdict")}


def ratio_text(summary: Mapping[str, Any]) -> str:
    """"0.305 [0.262, 0.376] vs 0.5": ratio of medians, interval and target (plain text)."""
    return (f"{number(summary.get('ratio_of_medians'), '.3f')} "
            f"[{number(summary.get('lower'), '.3f')}, {number(summary.get('upper'), '.3f')}]"
            f" vs {number(summary.get('target'), 'g')}")


def number(value: Any, spec: str) -> str:
    """A number as the evidence holds it; "inf"/"nan" strings pass through, None is "-"."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-" if value is None else str(value)
    return format(value, spec)
