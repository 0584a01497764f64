"""The HTML report's own sections (verdicts, latency, first divergence, profiles) and the
cells they share.

The modules are private; the other stages import these names from here.
"""

from ref2va_accept.report._cells import TABLE, VERDICT_COLOURS, number, ratio_text
from ref2va_accept.report._latency import latency_cell, latency_svg
from ref2va_accept.report._localize import localization_html, panel
from ref2va_accept.report._lossy import audio_comparison_text, lossy_tables_html
from ref2va_accept.report._profiles import profile_html, profiles_html
from ref2va_accept.report._sections import (
    budget_html,
    host_html,
    ledger_html,
    summary_html,
    verdict_table_html,
)

__all__ = [
    "TABLE",
    "VERDICT_COLOURS",
    "audio_comparison_text",
    "budget_html",
    "host_html",
    "latency_cell",
    "latency_svg",
    "ledger_html",
    "localization_html",
    "lossy_tables_html",
    "number",
    "panel",
    "profile_html",
    "profiles_html",
    "ratio_text",
    "summary_html",
    "verdict_table_html",
]
