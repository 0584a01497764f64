"""The arm runner: from a track's plan to engine instances, requests and recorded outcomes;
live progress; the profiling scenario's run.

The modules are private; the other stages import these names from here.
"""

from typing import TYPE_CHECKING

from ref2va_accept.core import load_name

if TYPE_CHECKING:
    from ref2va_accept.arms._arms import (
        Arms,
        Diagnostics,
        Outcome,
        OutcomeLog,
        RequestStart,
        build_request,
        describe_exit,
    )
    from ref2va_accept.arms._profiling import profile_arm, with_comparison
    from ref2va_accept.arms._progress import (
        PLUGIN_NAME,
        ProgressPlugin,
        ProgressReporter,
        Terminal,
        scenario_item,
    )

# Each name and the private module that defines it, imported when the name is
# first used (core.load_name): a stage loads only what its user needs.
_WHERE = {
    "Arms": "_arms",
    "Diagnostics": "_arms",
    "Outcome": "_arms",
    "OutcomeLog": "_arms",
    "PLUGIN_NAME": "_progress",
    "ProgressPlugin": "_progress",
    "ProgressReporter": "_progress",
    "RequestStart": "_arms",
    "Terminal": "_progress",
    "build_request": "_arms",
    "describe_exit": "_arms",
    "profile_arm": "_profiling",
    "with_comparison": "_profiling",
    "scenario_item": "_progress",
}

__all__ = [
    "PLUGIN_NAME",
    "Arms",
    "Diagnostics",
    "Outcome",
    "OutcomeLog",
    "ProgressPlugin",
    "ProgressReporter",
    "RequestStart",
    "Terminal",
    "build_request",
    "describe_exit",
    "profile_arm",
    "scenario_item",
    "with_comparison",
]


def __getattr__(name: str) -> object:
    return load_name(__name__, _WHERE, name)
