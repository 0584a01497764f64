"""What every section of the HTML report draws with: the table style, the verdict colours, a row
of escaped cells, a number as the evidence holds it, and a latency decision in brief."""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from ref2va_accept.evidence import LatencySummary

TABLE = "border='1' cellpadding='3' style='border-collapse:collapse'"
VERDICT_COLOURS = {"supported": "#1a7f37", "failed": "#cf222e", "inconclusive": "#9a6700"}


def cells(values: Iterable[Any], tag: str = "td") -> str:
    return "".join(f"<{tag}>{html.escape(str(v))}</{tag}>" for v in values)


def ratio_text(typed: LatencySummary) -> str:
    """"0.305 [0.262, 0.376] vs 0.5": ratio of medians, interval and target (plain text)."""
    return (f"{number(typed.ratio_of_medians, '.3f')} "
            f"[{number(typed.lower, '.3f')}, {number(typed.upper, '.3f')}]"
            f" vs {number(typed.target, 'g')}")


def number(value: Any, spec: str) -> str:
    """A number as the evidence holds it; "inf"/"nan" strings pass through, None is "-"."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-" if value is None else str(value)
    return format(value, spec)
