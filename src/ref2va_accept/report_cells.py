"""What every section of the HTML report draws with: the table style, the verdict colours, a row
of escaped cells, a number as the evidence holds it, and a latency decision in brief."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

from .records import LatencyRatioCheck, LatencySummary, check_record

TABLE = "border='1' cellpadding='3' style='border-collapse:collapse'"
VERDICT_COLOURS = {"supported": "#1a7f37", "failed": "#cf222e", "inconclusive": "#9a6700"}


def cells(values: Iterable[Any], tag: str = "td") -> str:
    return "".join(f"<{tag}>{html.escape(str(v))}</{tag}>" for v in values)


def latency_check(check: LatencyRatioCheck | Mapping[str, Any] | None) -> LatencyRatioCheck | None:
    """A latency_ratio check, typed; one given as its recorded mapping is read into its record
    (a ValueError naming the check when it is not a valid latency_ratio check)."""
    if check is None or isinstance(check, LatencyRatioCheck):
        return check
    typed = check_record(check)
    if not isinstance(typed, LatencyRatioCheck):
        raise ValueError(f"{typed.track}/{typed.arm}: a {typed.name} check is not a "
                         "latency_ratio check")
    return typed


def latency_summary(check: LatencyRatioCheck | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A recorded latency_ratio check's decision in brief (ratio of medians, interval bounds,
    target, verdict) as the ledger writes it; None when it has no interval (the protocol ended
    before a decision). See records.LatencySummary."""
    summary = LatencySummary.of(latency_check(check))
    return None if summary is None else summary.json_dict()


def ratio_text(summary: LatencySummary | Mapping[str, Any]) -> str:
    """"0.305 [0.262, 0.376] vs 0.5": ratio of medians, interval and target (plain text). A
    summary given as its recorded mapping (a ledger entry's) is read into its record first."""
    typed = (summary if isinstance(summary, LatencySummary)
             else LatencySummary.model_validate(summary))
    return (f"{number(typed.ratio_of_medians, '.3f')} "
            f"[{number(typed.lower, '.3f')}, {number(typed.upper, '.3f')}]"
            f" vs {number(typed.target, 'g')}")


def number(value: Any, spec: str) -> str:
    """A number as the evidence holds it; "inf"/"nan" strings pass through, None is "-"."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-" if value is None else str(value)
    return format(value, spec)
