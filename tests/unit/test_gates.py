"""The one mapping from a gate's (or a track's) result to the test outcome, by category."""

from __future__ import annotations

import pytest

from ref2va_accept.core import Check, Reason
from ref2va_accept.evidence import AnyCheck, TrackVerdict
from ref2va_accept.judging import (
    Baselines,
    Gate,
    GateOutcome,
    GateResult,
    LatencyProtocol,
    LosslessGateRunner,
    LossyGateRunner,
    QualityGate,
    fail_unless_passed,
    judge,
)
from ref2va_accept.timing import latency_verdict
from tests.unit.check_records import make_check

pytestmark = pytest.mark.fast

T = "5s-lossless"


def _check(name: Check, status: str = "pass", reason: Reason | None = None,
           detail: str = "") -> AnyCheck:
    return make_check(T, "c1", name, status, reason, detail)


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
    assert result.outcome is GateOutcome.INCONCLUSIVE
    assert result.message == "resource_interference: during b0#0: device 1 pid 7"
    assert GateResult.from_checks([opened, defect]).outcome is GateOutcome.FAILED
    assert GateResult.from_checks([opened]).message == "cannot decide: open dimensions x"
    slow = make_check(T, "c1", Check.LATENCY_RATIO, "pass", detail="failed: ratio 0.98",
                      latency=latency_verdict([300, 298, 305], [290, 300, 295]))
    assert GateResult.from_checks([slow]) == GateResult(GateOutcome.FAILED, "failed: ratio 0.98",
                                                        (slow,))
    fast = make_check(T, "c1", Check.LATENCY_RATIO, "pass",
                      latency=latency_verdict([300, 298, 305], [140, 141, 139]))
    assert GateResult.from_checks([fast, _check(Check.CACHING_PROBE)]).outcome is GateOutcome.PASSED


@pytest.mark.parametrize(("verdict", "outcome"), [
    ("supported", GateOutcome.PASSED), ("failed", GateOutcome.FAILED),
    ("inconclusive", GateOutcome.INCONCLUSIVE)])
def test_a_track_verdict_maps_to_the_same_outcomes(verdict: str, outcome: GateOutcome) -> None:
    v = TrackVerdict(track=T, candidate="c1", verdict=verdict, reasons=(Reason.DRIFT,),
                     open_checks=(Check.TIMED_OUTPUT,), checks={})  # type: ignore[arg-type]
    result = GateResult.from_verdict(v)
    assert result.outcome is outcome
    assert result.message == "reasons: drift; open: timed_output"


def test_expect_passes_a_pass_and_fails_the_rest_naming_the_kind_first() -> None:
    fail_unless_passed(GateResult(GateOutcome.PASSED, "fine"))
    for outcome in (GateOutcome.FAILED, GateOutcome.INCONCLUSIVE, GateOutcome.OPEN):
        with pytest.raises(pytest.fail.Exception) as caught:
            fail_unless_passed(GateResult(outcome, "why"))
        assert str(caught.value) == f"{outcome.upper()}: why"
        assert not caught.value.pytrace


def _track(defect: Check | None, validity: Check | None, latency: str) -> list[AnyCheck]:
    """Every check a lossy track requires, passed, with one failure of each kind given."""
    checks = [make_check("5s-lossy", "b0", name, "pass")
              for name in (Check.B0_MEDIA, Check.CLEANUP, Check.BASELINE_VARIABILITY)]
    checks += [make_check("5s-lossy", "c1", name, "pass")
               for name in (Check.CANDIDATE_MEDIA, Check.CLEANUP, Check.LOSSY_GATE,
                            Check.TIMED_OUTPUT_FIDELITY, Check.RESOURCE_INTERFERENCE)]
    if defect is not None:
        reason = (Reason.CACHING_SUSPECTED if defect is Check.CACHING_PROBE
                  else Reason.QUALITY_GATE_FAILED)
        checks.append(make_check("5s-lossy", "c1", defect, "fail", reason))
    if validity is not None:
        reason = (Reason.RESOURCE_INTERFERENCE if validity is Check.RESOURCE_INTERFERENCE
                  else Reason.INCOMPLETE_CLEANUP)
        checks.append(make_check("5s-lossy", "b0", validity, "fail", reason))
    timed = {"supported": [140, 141, 139], "failed": [290, 300, 295],
             "inconclusive": [150, 160, 155]}[latency]
    return [*checks, make_check("5s-lossy", "c1", Check.LATENCY_RATIO, "pass",
                                latency=latency_verdict([300, 298, 305], timed))]


@pytest.mark.parametrize("defect", [None, Check.LOSSY_GATE, Check.CACHING_PROBE])
@pytest.mark.parametrize("validity", [None, Check.CLEANUP, Check.RESOURCE_INTERFERENCE])
@pytest.mark.parametrize("latency", ["supported", "failed", "inconclusive"])
def test_the_gate_and_the_verdict_read_the_one_verdict_order(
        defect: Check | None, validity: Check | None, latency: str) -> None:
    # verdicts.classify decides both: a gate holding a track's checks gives the track's verdict
    # as its outcome. A quality failure found without timing is not masked by a problem of the
    # timing alone (step 0): failed, for the gate as for the verdict; a timing defect
    # (caching) or a validity problem of the quality path leaves both inconclusive.
    checks = _track(defect, validity, latency)
    verdict = judge("5s-lossy", "lossy", "c1", checks).verdict
    outcome = GateResult.from_checks(checks).outcome
    assert outcome is {"supported": GateOutcome.PASSED, "failed": GateOutcome.FAILED,
                       "inconclusive": GateOutcome.INCONCLUSIVE}[verdict]
    if defect is Check.LOSSY_GATE and validity is Check.RESOURCE_INTERFERENCE:
        assert outcome is GateOutcome.FAILED
    if defect is Check.CACHING_PROBE and validity is not None:
        assert outcome is GateOutcome.INCONCLUSIVE
