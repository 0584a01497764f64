"""What the lossless and the lossy gate run alike: B0's reference run judged from its gate
instances and recorded, checks recorded as they are made, and a candidate's gate on its first
latency instance.

Each gate (judging/_lossless.py, judging/_lossy.py) keeps what is its own: which requests it
sends on B0's and the candidate's instances, how it judges them, and which steps of the hosted
gate (latency_run.GateHost: before the warm-ups, the warm-ups themselves, after the measured
requests, once the instance is stopped) it takes; a step it does not take does nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Generic, TypeVar

from ref2va_accept.judging._b0_gate import GateRuns, mark_shared, run_gate_instances
from ref2va_accept.judging._verdicts import GateChecks

if TYPE_CHECKING:
    from ref2va_accept.arms import Arms, Outcome
    from ref2va_accept.engines import EngineInstance
    from ref2va_accept.evidence import AnyCheck
    from ref2va_accept.judging._gates import BaselineGateRunner
    from ref2va_accept.judging._latency_run import InstanceRun

B = TypeVar("B", bound=GateChecks)


def record(arms: Arms, checks: list[AnyCheck]) -> list[AnyCheck]:
    """Each of the checks into the evidence, in their order; the same list back."""
    for check in checks:
        arms.evidence.add_check(check)
    return checks


def reference_run(arms: Arms, runs: GateRuns | None,
                  judge: Callable[[GateRuns], tuple[B, Mapping[str, object]]]) -> B:
    """B0's reference run of the arm runner's track, judged from B0's gate instances (`runs`:
    those this track shares with others of its gate group, judging/_b0_gate.py; made here for
    this track alone when None). `judge` gives the baseline and what its checks' data add when
    the instances served several tracks (mark_shared).

    Every check lands in the evidence before this returns; the instances are stopped by then.
    """
    if runs is None:
        runs = run_gate_instances({arms.plan.track_id: arms})
    baseline, served = judge(runs)
    baseline = dataclasses.replace(baseline, checks=mark_shared(baseline.checks, runs, **served))
    record(arms, list(baseline.checks))
    return baseline


class GateOnInstance(Generic[B]):
    """A candidate's quality gate on its first latency instance (latency_run.GateHost), against the
    B0 reference run its `runner` makes once per track; each step returns the checks it
    recorded, and a step the gate does not take records nothing."""

    def __init__(self, runner: BaselineGateRunner[B], candidate: str) -> None:
        self.runner, self.candidate = runner, candidate

    def before(self, arms: Arms, engine: EngineInstance) -> list[AnyCheck]:
        return []

    def warmups(self, arms: Arms) -> list[Outcome]:
        return []

    def after(self, arms: Arms, engine: EngineInstance, run: InstanceRun) -> list[AnyCheck]:
        return []

    def settle(self, arms: Arms, run: InstanceRun) -> list[AnyCheck]:
        return []
