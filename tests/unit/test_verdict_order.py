"""The verdict order exactly as docs/protocol.md ("Verdict order") states it, as a table.

Every combination of a validity failure (or the freeze cap), a candidate defect, an open check
and each latency outcome is fed to `verdicts.judge`; the expected row is written from the
document's four steps, not from the code: 1. not evaluable -> inconclusive (validity reasons,
then the defects found too); 2. defect -> failed; 3. open -> inconclusive (`open_checks`);
4. the latency interval decides. `not_applicable` satisfies a required check and is shown as such.
"""

from __future__ import annotations

import itertools

import pytest

from ref2va_accept.core import Check, Reason
from ref2va_accept.evidence import AnyCheck
from ref2va_accept.judging import judge
from ref2va_accept.timing import latency_verdict
from tests.unit.check_records import make_check

pytestmark = pytest.mark.fast

T, C = "5s-lossy", "c1"
LATENCY = {  # per outcome, candidate latencies against B0's (300, 298, 305)
    "supported": (140.0, 141.0, 139.0),
    "failed": (290.0, 300.0, 295.0),
    "inconclusive": (150.0, 160.0, 155.0),
}


def _base(interference: str = "pass") -> list[AnyCheck]:
    return [
        make_check(T, "b0", Check.B0_MEDIA, "pass"),
        make_check(T, "b0", Check.CLEANUP, "pass"),
        make_check(T, "b0", Check.BASELINE_VARIABILITY, "pass"),
        make_check(T, C, Check.CANDIDATE_MEDIA, "pass"),
        make_check(T, C, Check.CLEANUP, "pass"),
        make_check(T, C, Check.LOSSY_GATE, "pass"),
        make_check(T, C, Check.TIMED_OUTPUT_FIDELITY, "pass"),
        make_check(T, C, Check.RESOURCE_INTERFERENCE, interference),
    ]


def _latency(outcome: str) -> AnyCheck:
    return make_check(T, C, Check.LATENCY_RATIO, "pass",
                      latency=latency_verdict((300.0, 298.0, 305.0), LATENCY[outcome]))


ROWS = list(itertools.product(
    (None, "b0_cleanup", "cap"),                 # not evaluable
    (False, True),                               # candidate defect
    (False, True),                               # a check recorded open
    ("supported", "failed", "inconclusive", None),  # latency result (None: never ran)
))


@pytest.mark.parametrize(("validity", "defect", "opened", "latency"), ROWS)
def test_the_documented_order(validity: str | None, defect: bool, opened: bool,
                              latency: str | None) -> None:
    checks = _base()
    if validity == "b0_cleanup":
        checks.append(make_check(T, "b0", Check.CLEANUP, "fail", Reason.INCOMPLETE_CLEANUP))
    if defect:
        checks.append(make_check(T, C, Check.LOSSY_GATE, "fail", Reason.QUALITY_GATE_FAILED))
    if opened:
        checks.append(make_check(T, C, Check.CACHING_PROBE, "open"))
    if latency is not None:
        checks.append(_latency(latency))
    cap = "protocol_not_frozen" if validity == "cap" else None
    verdict = judge(T, "lossy", C, checks, cap_reason=cap)

    defects = [Reason.QUALITY_GATE_FAILED] if defect else []
    open_checks = ([Check.LATENCY_RATIO] if latency is None else []) + (
        [Check.CACHING_PROBE] if opened else [])
    if validity is not None:  # 1.
        first = (Reason.INCOMPLETE_CLEANUP if validity == "b0_cleanup"
                 else Reason.PROTOCOL_NOT_FROZEN)
        expected = ("inconclusive", (first, *defects))
    elif defect:  # 2.
        expected = ("failed", tuple(defects))
    elif open_checks:  # 3.
        expected = ("inconclusive", (Reason.OPEN_CHECKS,))
    else:  # 4.
        assert latency is not None
        expected = (latency, (Reason(f"latency_{latency}"),))
    assert (verdict.verdict, verdict.reasons) == expected
    assert list(verdict.open_checks) == open_checks  # listed whatever decided


def test_the_table_covers_every_step() -> None:
    assert len(ROWS) == 48


@pytest.mark.parametrize(("statuses", "summary", "track_open"), [
    (("fail", "open", "pass", "not_applicable"), "fail", True),  # an open record is listed
    (("not_applicable", "open", "pass"), "open", True),
    (("not_applicable", "pass"), "pass", False),
    (("pass", "not_applicable"), "pass", False),
    (("not_applicable", "not_applicable"), "not_applicable", False),
])
def test_a_check_recorded_several_times_takes_the_most_severe_status(
        statuses: tuple[str, ...], summary: str, track_open: bool) -> None:
    # fail > open > pass > not_applicable; not_applicable satisfies a required check.
    checks = [c for c in _base() if c.name is not Check.RESOURCE_INTERFERENCE]
    checks += [make_check(T, C, Check.RESOURCE_INTERFERENCE, status,
                          Reason.RESOURCE_INTERFERENCE if status == "fail" else None)
               for status in statuses]
    verdict = judge(T, "lossy", C, [*checks, _latency("supported")])
    assert verdict.checks[Check.RESOURCE_INTERFERENCE] == summary
    assert (Check.RESOURCE_INTERFERENCE in verdict.open_checks) is track_open
    if summary == "not_applicable":
        assert verdict.verdict == "supported"
        assert verdict.json_dict_full()["checks"]["resource_interference"] == "not_applicable"


def test_not_applicable_names_no_reason_and_never_fails() -> None:
    with pytest.raises(ValueError, match="only a failed one"):
        make_check(T, C, Check.RESOURCE_INTERFERENCE, "not_applicable",
                   Reason.RESOURCE_INTERFERENCE)
    with pytest.raises(ValueError, match="status"):
        make_check(T, C, Check.RESOURCE_INTERFERENCE, "skipped")
