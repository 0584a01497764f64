"""The gates and the verdicts: the lossless, lossy and latency gates, B0's gate
instances, the timed-output check, the warm-up demonstration, the localization pass,
and each track's verdict.

The modules are private; the other stages import these names from here.
"""

from ref2va_accept.judging._b0_gate import Baselines, GateInstances, run_gate_instances
from ref2va_accept.judging._decoded import compare_decoded_mp4
from ref2va_accept.judging._gates import (
    BaselineGateRunner,
    Gate,
    GateOutcome,
    GateResult,
    QualityGate,
    fail_unless_passed,
)
from ref2va_accept.judging._latency import (
    LatencyProtocol,
    LatencySchedules,
    judge_latency,
    run_latency,
)
from ref2va_accept.judging._latency_run import InstanceRun, distinct_plan, quality_stop
from ref2va_accept.judging._lossless import (
    LosslessGateRunner,
    declared_time,
    enabled_path_problems,
)
from ref2va_accept.judging._lossy import LossyGateRunner
from ref2va_accept.judging._lossy_errors import OPEN, decide, fidelity_below
from ref2va_accept.judging._timed_output import (
    DEFAULT_MIN_PSNR_DB,
    judge_timed_outputs,
    lossy_timed_output_check,
    timed_output_check,
)
from ref2va_accept.judging._verdicts import (
    VALIDITY_REASONS,
    GateChecks,
    family_wise,
    judge,
    judge_tracks,
)
from ref2va_accept.judging._warmup_demo import demonstrate

__all__ = [
    "DEFAULT_MIN_PSNR_DB",
    "OPEN",
    "VALIDITY_REASONS",
    "BaselineGateRunner",
    "Baselines",
    "Gate",
    "GateChecks",
    "GateInstances",
    "GateOutcome",
    "GateResult",
    "InstanceRun",
    "LatencyProtocol",
    "LatencySchedules",
    "LosslessGateRunner",
    "LossyGateRunner",
    "QualityGate",
    "compare_decoded_mp4",
    "decide",
    "declared_time",
    "demonstrate",
    "distinct_plan",
    "enabled_path_problems",
    "fail_unless_passed",
    "family_wise",
    "fidelity_below",
    "judge",
    "judge_latency",
    "judge_timed_outputs",
    "judge_tracks",
    "lossy_timed_output_check",
    "quality_stop",
    "run_gate_instances",
    "run_latency",
    "timed_output_check",
]
