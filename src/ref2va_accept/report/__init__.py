"""The HTML report's own sections (verdicts, latency, first divergence, profiles) and the
cells they share.

The modules are private; the other stages import these names from here.
"""

from typing import TYPE_CHECKING

from ref2va_accept.core import load_name

if TYPE_CHECKING:
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

# Each name and the private module that defines it, imported when the name is
# first used (core.load_name): a stage loads only what its user needs.
_WHERE = {
    "TABLE": "_cells",
    "VERDICT_COLOURS": "_cells",
    "audio_comparison_text": "_lossy",
    "budget_html": "_sections",
    "host_html": "_sections",
    "latency_cell": "_latency",
    "latency_svg": "_latency",
    "ledger_html": "_sections",
    "localization_html": "_localize",
    "lossy_tables_html": "_lossy",
    "number": "_cells",
    "panel": "_localize",
    "profile_html": "_profiles",
    "profiles_html": "_profiles",
    "ratio_text": "_cells",
    "summary_html": "_sections",
    "verdict_table_html": "_sections",
}

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


def __getattr__(name: str) -> object:
    return load_name(__name__, _WHERE, name)
