"""The arm runner: from a track's plan to engine instances, requests and recorded outcomes;
live progress; the profiling scenario's run.

The modules are private; the other stages import these names from here.
"""

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
    say_now,
    scenario_item,
)

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
    "say_now",
    "scenario_item",
    "with_comparison",
]
