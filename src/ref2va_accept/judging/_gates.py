"""What the lossless gate, the lossy gate and the latency protocol share, and the one mapping
from a result to a pytest outcome that every scenario (and the per-track verdict) uses.

A gate judges one candidate of a track on the plan's arm runner, records every check in the
evidence as it goes, and returns a `GateResult`: passed, failed (a candidate defect),
inconclusive (the run is not evaluable) or open (something could not be decided).
`fail_unless_passed` turns it into the test's outcome: passed passes; everything else fails, its
kind first in the message, since an inconclusive or open gate is neither a pass nor something to
skip.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import pytest

from ref2va_accept.core import CheckStatus, Verdict
from ref2va_accept.evidence import AnyCheck, TrackVerdict
from ref2va_accept.judging._verdicts import GateChecks, Step, classify

if TYPE_CHECKING:
    from ref2va_accept.arms import Arms
    from ref2va_accept.judging._b0_gate import GateRuns

T = TypeVar("T")
B = TypeVar("B", bound=GateChecks)


class GateOutcome(StrEnum):
    """What a gate (or a track) gives its scenario: the test's outcome, not a verdict."""

    PASSED = "passed"
    FAILED = "failed"
    INCONCLUSIVE = "inconclusive"
    OPEN = "open"


@dataclass(frozen=True)
class GateResult:
    """A gate's (or a track's) outcome, why, and the checks it recorded."""

    outcome: GateOutcome
    message: str
    checks: tuple[AnyCheck, ...] = ()

    @classmethod
    def from_checks(cls, checks: Sequence[AnyCheck]) -> GateResult:
        """The verdict's order (verdicts.classify, nothing required of a gate): a validity
        failure makes the result inconclusive, a defect failed (first when found without
        timing, whatever the timing's own validity problems), an open check open; otherwise
        the latency result's own verdict where there is one, else passed. The message gives
        the checks that decided."""
        def said(found: Sequence[AnyCheck]) -> str:
            return "; ".join(f"{c.reason}: {c.detail}" if c.reason else c.detail for c in found)

        found = classify(checks)
        if found.step is Step.LATENCY:
            if found.latency is None or found.verdict is Verdict.SUPPORTED:
                return cls(GateOutcome.PASSED, said(checks), tuple(checks))
            return cls(_OUTCOMES[found.verdict], said(found.deciding), tuple(checks))
        outcome = GateOutcome.OPEN if found.step is Step.OPEN else _OUTCOMES[found.verdict]
        return cls(outcome, said(found.deciding), tuple(checks))

    @classmethod
    def from_verdict(cls, verdict: TrackVerdict) -> GateResult:
        detail = (f"reasons: {', '.join(verdict.reasons) or '-'}; open: "
                  f"{', '.join(verdict.open_checks) or '-'}")
        return cls(_OUTCOMES[verdict.verdict], detail)

    @classmethod
    def inconclusive(cls, message: str) -> GateResult:
        return cls(GateOutcome.INCONCLUSIVE, message)


# A verdict's outcome: only `supported` passes.
_OUTCOMES: dict[Verdict, GateOutcome] = {Verdict.SUPPORTED: GateOutcome.PASSED,
                                         Verdict.FAILED: GateOutcome.FAILED,
                                         Verdict.INCONCLUSIVE: GateOutcome.INCONCLUSIVE}


def fail_unless_passed(result: GateResult) -> None:
    """The scenario's outcome: passed returns; failed, inconclusive or open fails the test with
    FAILED / INCONCLUSIVE / OPEN first in its message (no traceback: the message is the finding).
    """
    if result.outcome is not GateOutcome.PASSED:
        pytest.fail(f"{result.outcome.upper()}: {result.message}", pytrace=False)


class BaselineCache(Protocol):
    """B0's reference runs, made once per gate and track and shared by its candidates, and the
    B0 instances they come from (once per gate group: judging/_b0_gate.py)."""

    localize: bool  # run the localization pass after a lossless bit-exact failure
    localize_b0: dict[tuple[Any, ...], Any]  # B0's captures, reused by the session's passes

    def get_or_make(self, gate: str, track_id: str, make: Callable[[], T]) -> T: ...

    def gate_runs(self, arms: Arms) -> GateRuns: ...

    def hosted_gate(self, arms: Arms, candidate: str) -> list[AnyCheck] | None:
        """The candidate's gate checks as its first latency instance hosted them, or None when
        its gate runs on an instance of its own (latency.LatencySchedules.hosted_gate)."""


class Gate(Protocol):
    """Judge one candidate of the arm runner's track; every check lands in the evidence."""

    def candidate(self, arms: Arms, candidate: str) -> GateResult: ...


class QualityGate(Gate, Protocol):
    """A gate with a B0 reference run of its own, judged before any candidate."""

    def baseline(self, arms: Arms) -> GateResult: ...


class BaselineGateRunner(Generic[B]):
    """A quality gate as the scenarios run it (a QualityGate): B0's reference run made once per
    track and gate and shared by its candidates; a candidate is judged only against one where
    nothing failed.
    The lossless and lossy gates are this runner with their own `make_baseline` and `judge`."""

    name: str

    def __init__(self, baselines: BaselineCache) -> None:
        self.baselines = baselines

    def make_baseline(self, arms: Arms) -> B:
        raise NotImplementedError

    def judge(self, arms: Arms, candidate: str, baseline: B) -> Sequence[AnyCheck]:
        raise NotImplementedError

    def prepare(self, arms: Arms) -> None:
        """B0's reference run made now (its checks recorded), before a schedule that hosts
        candidates' gates chooses whom it measures."""
        self.made(arms)

    def made(self, arms: Arms) -> B:
        """B0's reference run of the arm runner's track, made on first use."""
        return self.baselines.get_or_make(self.name, arms.plan.track_id,
                                          lambda: self.make_baseline(arms))

    def baseline(self, arms: Arms) -> GateResult:
        made = self.made(arms)
        if not made.judgeable:
            return GateResult.inconclusive(made.explain())
        return GateResult.from_checks(made.checks)

    def candidate(self, arms: Arms, candidate: str) -> GateResult:
        made = self.made(arms)
        if not made.judgeable:
            return GateResult.inconclusive(f"B0 cannot be judged against: {made.explain()}")
        # A B0 check left open (e.g. a spread that could not be computed) keeps the candidate's
        # outcome open too, unless the candidate decided something worse itself.
        opened = [c for c in made.checks if c.status is CheckStatus.OPEN]
        # On its first latency instance when the session measures it too (docs/protocol.md),
        # else on an instance of its own.
        hosted = self.baselines.hosted_gate(arms, candidate)
        checks = hosted if hosted is not None else self.judge(arms, candidate, made)
        return GateResult.from_checks([*checks, *opened])
