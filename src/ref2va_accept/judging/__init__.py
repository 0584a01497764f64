"""The gates and the verdicts: the lossless, lossy and latency gates, B0's gate
instances, the timed-output check, the warm-up demonstration, the localization pass,
and each track's verdict.

The modules are private; the other stages import these names from here.
"""

from typing import TYPE_CHECKING

from ref2va_accept.core import load_name

if TYPE_CHECKING:
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
    from ref2va_accept.judging._lossy import OPEN, LossyGateRunner, decide, fidelity_below
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

# Each name and the private module that defines it, imported when the name is
# first used (core.load_name): a stage loads only what its user needs.
_WHERE = {
    "BaselineGateRunner": "_gates",
    "Baselines": "_b0_gate",
    "DEFAULT_MIN_PSNR_DB": "_timed_output",
    "Gate": "_gates",
    "GateChecks": "_verdicts",
    "GateInstances": "_b0_gate",
    "GateOutcome": "_gates",
    "GateResult": "_gates",
    "InstanceRun": "_latency_run",
    "LatencyProtocol": "_latency",
    "LatencySchedules": "_latency",
    "LosslessGateRunner": "_lossless",
    "LossyGateRunner": "_lossy",
    "OPEN": "_lossy",
    "QualityGate": "_gates",
    "VALIDITY_REASONS": "_verdicts",
    "compare_decoded_mp4": "_decoded",
    "decide": "_lossy",
    "declared_time": "_lossless",
    "demonstrate": "_warmup_demo",
    "distinct_plan": "_latency_run",
    "enabled_path_problems": "_lossless",
    "fail_unless_passed": "_gates",
    "family_wise": "_verdicts",
    "fidelity_below": "_lossy",
    "judge": "_verdicts",
    "judge_latency": "_latency",
    "judge_timed_outputs": "_timed_output",
    "judge_tracks": "_verdicts",
    "lossy_timed_output_check": "_timed_output",
    "quality_stop": "_latency_run",
    "run_gate_instances": "_b0_gate",
    "run_latency": "_latency",
    "timed_output_check": "_timed_output",
}

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


def __getattr__(name: str) -> object:
    return load_name(__name__, _WHERE, name)
