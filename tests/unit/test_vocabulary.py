"""The one vocabulary (vocabulary.py): its values are the strings the evidence has always
written, a member is written as that string, anything else is refused by name, and the
campaign schema and the statistics share its defaults."""

from __future__ import annotations

import inspect
import json
from enum import StrEnum

import pytest

from ref2va_accept.campaign import Protocol
from ref2va_accept.core import (
    DEFAULT_CONFIDENCE,
    DEFAULT_DECISION_RULE,
    DEFAULT_TARGET_RATIO,
    ArmRole,
    Check,
    CheckStatus,
    DecisionRule,
    IntervalReason,
    LatencyDecisionReason,
    QualityClass,
    Unit,
    Verdict,
    enum_member,
)
from ref2va_accept.evidence import TrackVerdict
from ref2va_accept.timing import _stats as stats
from ref2va_accept.timing import latency_verdict
from tests.unit.check_records import make_check

pytestmark = pytest.mark.fast

# The strings the evidence, the ledger and the lock wrote before the vocabulary existed.
WRITTEN: dict[type[StrEnum], tuple[str, ...]] = {
    CheckStatus: ("pass", "fail", "open", "not_applicable"),
    Verdict: ("supported", "failed", "inconclusive"),
    QualityClass: ("lossless", "lossy"),
    ArmRole: ("b0", "candidate"),
    Unit: ("instance", "request"),
    DecisionRule: ("ratio-interval-moses/1", "welch-log/1"),
    LatencyDecisionReason: ("warmup_not_steady", "drift"),
    IntervalReason: ("interval_upper_at_or_below_target", "interval_lower_above_target",
                     "interval_spans_target", "too_few_samples", "no_spread",
                     "supported_out_of_reach"),
}


@pytest.mark.parametrize("kind", list(WRITTEN), ids=lambda k: k.__name__)
def test_each_value_is_the_string_the_evidence_wrote(kind: type[StrEnum]) -> None:
    assert tuple(m.value for m in kind) == WRITTEN[kind]
    for value in WRITTEN[kind]:
        written = json.dumps({"k": kind(value), kind(value): [kind(value)]})
        assert written == json.dumps({"k": value, value: [value]})
        assert kind(value) == value and f"{kind(value)}" == value


def test_a_value_outside_the_vocabulary_is_refused_naming_it_and_the_allowed_ones() -> None:
    assert enum_member(Verdict, "failed", "verdict") is Verdict.FAILED
    assert enum_member(Verdict, Verdict.FAILED, "verdict") is Verdict.FAILED
    with pytest.raises(ValueError, match=r"verdict: 'fail' is not in the vocabulary "
                                         r"\(supported, failed, inconclusive\)"):
        enum_member(Verdict, "fail", "verdict")


def test_records_hold_members_whether_given_members_or_strings() -> None:
    check = make_check("5s-lossless", "b0", Check.CLEANUP, "pass")
    assert check.status is CheckStatus.PASS and check.json_dict()["status"] == "pass"
    assert type(check.json_dict()["status"]) is str
    row = TrackVerdict(track="5s-lossless", candidate="c1", verdict="failed", reasons=(),
                       open_checks=(), checks={"cleanup": "fail"})  # type: ignore[arg-type]
    assert row.verdict is Verdict.FAILED and row.checks == {Check.CLEANUP: CheckStatus.FAIL}
    assert json.dumps(row.json_dict_full()) == json.dumps(TrackVerdict(
        track="5s-lossless", candidate="c1", verdict=Verdict.FAILED, reasons=(), open_checks=(),
        checks={Check.CLEANUP: CheckStatus.FAIL}).json_dict_full())
    with pytest.raises(ValueError, match="status: 'skipped' is not in the vocabulary"):
        TrackVerdict(track="5s-lossless", candidate="c1", verdict="failed", reasons=(),
                     open_checks=(), checks={"cleanup": "skipped"})  # type: ignore[arg-type]
    latency = latency_verdict([300.0, 298.0, 305.0], [140.0, 141.0, 139.0])
    assert latency.verdict is Verdict.SUPPORTED and latency.unit is Unit.REQUEST
    assert latency.reasons == (IntervalReason.UPPER_AT_OR_BELOW_TARGET,)
    assert latency.json_dict()["reasons"] == ["interval_upper_at_or_below_target"]
    with pytest.raises(ValueError, match="interval_upper_at_or_below_target"):
        type(latency)(**{**latency.__dict__, "reasons": ("fast",)})


def test_the_schema_and_the_statistics_default_to_the_same_constants() -> None:
    fields = Protocol.model_fields
    assert fields["target_ratio"].default == DEFAULT_TARGET_RATIO == 0.5
    assert fields["confidence"].default == DEFAULT_CONFIDENCE == 0.95
    assert fields["decision_rule"].default is DEFAULT_DECISION_RULE is DecisionRule.RANK
    assert fields["replication"].default is Unit.INSTANCE
    verdict = inspect.signature(stats.latency_verdict).parameters
    assert verdict["target"].default == DEFAULT_TARGET_RATIO
    assert verdict["confidence"].default == DEFAULT_CONFIDENCE
    assert verdict["rule"].default is DEFAULT_DECISION_RULE
    for function in (stats.interval_k, stats.ratio_interval, stats.welch_log_interval):
        assert inspect.signature(function).parameters["confidence"].default == DEFAULT_CONFIDENCE


def test_the_schema_reads_the_vocabulary_from_yaml_strings_and_refuses_others() -> None:
    base = {"warmups": 1, "repeats": 3, "ordering": "ABA", "order_seed": 1,
            "timeouts": {"5s": {"request_s": 60}}, "replication": "request"}
    protocol = Protocol.model_validate({**base, "decision_rule": "welch-log/1"})
    assert protocol.replication is Unit.REQUEST and protocol.decision_rule is DecisionRule.WELCH
    assert protocol.model_dump(mode="json")["decision_rule"] == "welch-log/1"
    with pytest.raises(ValueError, match="Input should be 'ratio-interval-moses/1' or "
                                         "'welch-log/1'"):
        Protocol.model_validate({**base, "decision_rule": "welch"})
    with pytest.raises(ValueError, match="Input should be 'instance' or 'request'"):
        Protocol.model_validate({**base, "replication": "server"})
