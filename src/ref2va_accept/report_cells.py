"""What every section of the HTML report draws with: the table style, the verdict colours, a row
of escaped cells, and a number as the evidence holds it."""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

TABLE = "border='1' cellpadding='3' style='border-collapse:collapse'"
VERDICT_COLOURS = {"supported": "#1a7f37", "failed": "#cf222e", "inconclusive": "#9a6700"}


def cells(values: Iterable[Any], tag: str = "td") -> str:
    return "".join(f"<{tag}>{html.escape(str(v))}</{tag}>" for v in values)


def number(value: Any, spec: str) -> str:
    """A number as the evidence holds it; "inf"/"nan" strings pass through, None is "-"."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-" if value is None else str(value)
    return format(value, spec)
