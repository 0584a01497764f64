"""The one mapping from a gate's (or a track's) result to the test outcome, by category."""

from __future__ import annotations

import pytest

from ref2va_accept.checks import Check, Reason
from ref2va_accept.gates import Gate, GateResult, Outcome, QualityGate, expect
from ref2va_accept.latency import LatencyProtocol
from ref2va_accept.lossless import LosslessGateRunner
from ref2va_accept.lossy import LossyGateRunner
from ref2va_accept.plugin import Baselines
from ref2va_accept.stats import latency_verdict
from ref2va_accept.verdicts import CheckResult, TrackVerdict

T = "5s-lossless"


def _check(name: Check, status: str = "pass", reason: Reason | None = None,
           detail: str = "") -> CheckResult:
    return CheckResult(T, "c1", name, status, reason, detail)  # type: ignore[arg-type]


def test_every_runner_implements_the_shared_interface() -> None:
    # Typed (mypy checks these assignments) and at run time, by the methods the scenarios call.
    quality: list[QualityGate] = [LosslessGateRunner(Baselines()), LossyGateRunner(Baselines())]
    gates: list[Gate] = [*quality, LatencyProtocol()]
    assert all(callable(getattr(g, "candidate", None)) for g in gates)
    assert all(callable(getattr(g, "baseline", None)) for g in quality)


def test_validity_comes_before_a_defect_then_open_then_the_latency_result() -> None:
    interference = _check(Check.RESOURCE_INTERFERENCE, "fail", Reason.RESOURCE_INTERFERENCE,
                          "during b0#0: device 1 pid 7")
    defect = _check(Check.CACHING_PROBE, "fail", Reason.CACHING_SUSPECTED, "repeats faster")
    opened = _check(Check.LOSSY_GATE, "open", None, "cannot decide: open dimensions x")
    result = GateResult.from_checks([defect, interference, opened])
    assert result.outcome is Outcome.INCONCLUSIVE
    assert result.message == "resource_interference: during b0#0: device 1 pid 7"
    assert GateResult.from_checks([opened, defect]).outcome is Outcome.FAILED
    assert GateResult.from_checks([opened]).message == "cannot decide: open dimensions x"
    slow = CheckResult(T, "c1", Check.LATENCY_RATIO, "pass", detail="failed: ratio 0.98",
                       latency=latency_verdict([300, 298, 305], [290, 300, 295]))
    assert GateResult.from_checks([slow]) == GateResult(Outcome.FAILED, "failed: ratio 0.98",
                                                        (slow,))
    fast = CheckResult(T, "c1", Check.LATENCY_RATIO, "pass",
                       latency=latency_verdict([300, 298, 305], [140, 141, 139]))
    assert GateResult.from_checks([fast, _check(Check.CACHING_PROBE)]).outcome is Outcome.PASSED


@pytest.mark.parametrize(("verdict", "outcome"), [
    ("supported", Outcome.PASSED), ("failed", Outcome.FAILED),
    ("inconclusive", Outcome.INCONCLUSIVE)])
def test_a_track_verdict_maps_to_the_same_outcomes(verdict: str, outcome: Outcome) -> None:
    v = TrackVerdict(T, "c1", verdict, (Reason.DRIFT,), (Check.TIMED_OUTPUT,), {})  # type: ignore[arg-type]
    result = GateResult.from_verdict(v)
    assert result.outcome is outcome
    assert result.message == "reasons: drift; open: timed_output"


def test_expect_passes_a_pass_and_fails_the_rest_naming_the_kind_first() -> None:
    expect(GateResult(Outcome.PASSED, "fine"))
    for outcome in (Outcome.FAILED, Outcome.INCONCLUSIVE, Outcome.OPEN):
        with pytest.raises(pytest.fail.Exception) as caught:
            expect(GateResult(outcome, "why"))
        assert str(caught.value) == f"{outcome.upper()}: why"
        assert not caught.value.pytrace
