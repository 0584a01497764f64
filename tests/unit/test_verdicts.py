"""Per-track verdicts follow the documented order; an open check is never a pass; only the
vocabulary's check names and reasons can be recorded, and their category decides."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from ref2va_accept.core import Category, Check, Reason, required_checks
from ref2va_accept.evidence import AnyCheck, TrackVerdict, new_check
from ref2va_accept.judging import judge
from ref2va_accept.timing import latency_verdict
from tests.unit.check_records import SMALLEST, make_check

pytestmark = pytest.mark.fast

T = "5s-lossless"
MEDIA = SMALLEST[Check.CANDIDATE_MEDIA]


def _latency(candidate: str = "c1", baseline: tuple[float, ...] = (300, 298, 305),
             timed: tuple[float, ...] = (140, 141, 139)) -> AnyCheck:
    return make_check(T, candidate, Check.LATENCY_RATIO, "pass",
                      latency=latency_verdict(baseline, timed))


def _passing(candidate: str = "c1") -> list[AnyCheck]:
    return [
        make_check(T, "b0", "b0_media", "pass"),
        make_check(T, "b0", "cleanup", "pass"),
        make_check(T, candidate, "candidate_media", "pass"),
        make_check(T, candidate, "cleanup", "pass"),
        make_check(T, "b0", "baseline_determinism", "pass"),
        make_check(T, candidate, "lossless_gate", "pass"),
        make_check(T, candidate, "enabled_path_audit", "pass"),
        make_check(T, candidate, "unobserved_output", "pass"),
        make_check(T, candidate, "timed_output", "pass"),
        make_check(T, candidate, "resource_interference", "pass"),
        _latency(candidate),
    ]


def test_all_checks_passed_gives_the_interval_verdict() -> None:
    v = judge(T, "lossless", "c1", _passing())
    assert v.verdict == "supported" and v.open_checks == ()


def test_a_missing_gate_is_open_and_inconclusive() -> None:
    checks = [c for c in _passing() if c.name != "lossless_gate"]
    v = judge(T, "lossless", "c1", checks)
    assert v.verdict == "inconclusive" and v.open_checks == ("lossless_gate",)


def test_an_explicitly_open_check_blocks_support() -> None:
    # caching_probe is not required, but recorded open it still blocks support
    checks = [*_passing(), make_check(T, "c1", "caching_probe", "open")]
    v = judge(T, "lossless", "c1", checks)
    assert v.verdict == "inconclusive" and v.open_checks == ("caching_probe",)


def test_candidate_defect_fails() -> None:
    checks = [*_passing(), make_check(T, "c1", "candidate_media", "fail", "invalid_media")]
    v = judge(T, "lossless", "c1", checks)
    assert v.verdict == "failed" and v.reasons == ("invalid_media",)


def test_baseline_failure_makes_it_inconclusive_even_with_a_defect() -> None:
    checks = [*_passing(),
              make_check(T, "b0", "b0_media", "fail", "baseline_request_failed"),
              make_check(T, "c1", "candidate_media", "fail", "invalid_media")]
    v = judge(T, "lossless", "c1", checks)
    assert v.verdict == "inconclusive"
    assert v.reasons == ("baseline_request_failed", "invalid_media")


def test_unfrozen_protocol_caps_a_supported_track() -> None:
    v = judge(T, "lossless", "c1", _passing(), cap_reason="protocol_not_frozen")
    assert v.verdict == "inconclusive" and v.reasons == ("protocol_not_frozen",)


def test_dirty_cleanup_is_inconclusive() -> None:
    checks = [*_passing(), make_check(T, "c1", "cleanup", "fail", "incomplete_cleanup")]
    assert judge(T, "lossless", "c1", checks).verdict == "inconclusive"


def test_checks_of_another_candidate_or_track_do_not_count() -> None:
    checks = [*_passing(), make_check(T, "c2", "candidate_media", "fail", "invalid_media"),
              make_check("15s-lossless", "c1", "candidate_media", "fail", "invalid_media")]
    assert judge(T, "lossless", "c1", checks).verdict == "supported"


def test_a_track_without_candidate_is_inconclusive_with_its_checks() -> None:
    v = judge(T, "lossless", None, [make_check(T, "b0", "b0_media", "pass")])
    assert v.verdict == "inconclusive" and "no_candidate" in v.reasons
    assert v.checks == {"b0_media": "pass"}
    assert "latency_ratio" in v.open_checks


def test_one_failing_instance_fails_the_check() -> None:
    checks = [make_check(T, "b0", "cleanup", "fail", "incomplete_cleanup"),
              make_check(T, "b0", "cleanup", "pass")]
    assert judge(T, "lossless", None, checks).checks["cleanup"] == "fail"


def test_the_latency_result_decides_once_nothing_else_did() -> None:
    slow = [c for c in _passing() if c.name != "latency_ratio"]
    failed = judge(T, "lossless", "c1", [*slow, _latency(timed=(290, 300, 295))])
    assert failed.verdict == "failed" and failed.reasons == (Reason.LATENCY_FAILED,)
    close = judge(T, "lossless", "c1", [*slow, _latency(timed=(150, 160, 155))])
    assert close.verdict == "inconclusive" and close.reasons == ("latency_inconclusive",)


def test_the_latency_result_is_written_as_before() -> None:
    written = _latency().json_dict()
    assert written["status"] == "pass" and written["data"]["verdict"] == "supported"
    assert written["data"]["interval"]["interval"]["upper"] <= 0.5
    assert json.loads(json.dumps(written)) == written  # plain strings, not enum reprs
    with pytest.raises(ValueError, match="typed latency result"):
        new_check(T, "c1", "latency_ratio", "pass", data={"verdict": "supported"})
    # ... and no other check carries one, nor a latency_ratio check that did not pass
    latency = latency_verdict((300, 298, 305), (140, 141, 139))
    with pytest.raises(ValueError, match="typed latency result"):
        new_check(T, "c1", "lossless_gate", "pass", data={"interval": latency})
    with pytest.raises(ValueError, match="typed latency result"):
        make_check(T, "c1", "latency_ratio", "open", latency=latency)
    with pytest.raises(ValueError, match="verdict is its interval's"):
        new_check(T, "c1", "latency_ratio", "pass", data={
            **_latency().json_dict()["data"], "verdict": "failed"})


def test_a_check_is_frozen_and_revised_into_a_new_one_validated_again() -> None:
    check = make_check(T, "b0", "baseline_determinism", "pass", None, "bit-exact",
                       {"seed": 42, "points": []})
    with pytest.raises(ValidationError, match="frozen"):
        check.detail = "changed"  # type: ignore[misc]
    shared = check.revised(detail="bit-exact (shared)", gate_instances_served=["a", "b"])
    assert check.detail == "bit-exact" and "gate_instances_served" not in check.json_dict()["data"]
    assert shared.detail == "bit-exact (shared)"
    assert shared.json_dict()["data"] == {"seed": 42, "points": [],
                                          "gate_instances_served": ["a", "b"]}
    with pytest.raises(ValueError, match="gate_instances_servd"):
        check.revised(gate_instances_servd=["a"])


# -- the vocabulary ------------------------------------------------------------------------------
def test_an_unknown_check_name_cannot_be_recorded() -> None:
    with pytest.raises(ValueError) as caught:
        new_check(T, "c1", "weights_present", "open")
    message = str(caught.value)
    assert "'weights_present' is not in the vocabulary" in message
    assert "lossless_gate" in message and "latency_ratio" in message  # the allowed names


def test_a_misspelt_reason_cannot_be_recorded_nor_taken_for_a_defect() -> None:
    # Before the vocabulary, this validity reason misspelt would have made the track `failed`.
    with pytest.raises(ValueError) as caught:
        new_check(T, "b0", "b0_media", "fail", "baseline_request_faild")
    message = str(caught.value)
    assert "reason: 'baseline_request_faild' is not in the vocabulary" in message
    assert "baseline_request_failed" in message  # the allowed codes


@pytest.mark.parametrize(("status", "reason", "message"), [
    ("fail", None, "a failed check names its reason"),
    ("pass", "invalid_media", "a failed check names its reason"),
    ("open", "drift", "a failed check names its reason"),
    ("fail", "latency_supported", r"a verdict's reason \(category decision\)"),
    ("fail", "open_checks", r"a verdict's reason \(category open\)"),
    ("done", None, "status 'done' is not one of"),
])
def test_a_check_records_a_reason_only_when_it_failed_and_only_a_check_reason(
        status: str, reason: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        new_check(T, "c1", "candidate_media", status, reason, data=MEDIA)


def test_strings_of_the_vocabulary_become_its_members() -> None:
    check = make_check(T, "b0", "cleanup", "fail", "incomplete_cleanup")
    assert check.name is Check.CLEANUP and check.reason is Reason.INCOMPLETE_CLEANUP
    assert check.reason.category is Category.VALIDITY


def test_required_checks_come_from_the_vocabulary() -> None:
    assert required_checks("lossless") == (
        "b0_media", "candidate_media", "cleanup", "baseline_determinism", "lossless_gate",
        "enabled_path_audit", "unobserved_output", "timed_output", "resource_interference",
        "latency_ratio")
    assert required_checks("lossy") == (
        "b0_media", "candidate_media", "cleanup", "baseline_variability", "lossy_gate",
        "timed_output_fidelity", "resource_interference", "latency_ratio")
    with pytest.raises(ValueError, match="quality class"):
        required_checks("lossyish")


def test_every_reason_has_a_category_and_the_verdict_follows_it() -> None:
    for reason in Reason:
        if reason.category not in (Category.VALIDITY, Category.DEFECT):
            continue
        verdict = judge(T, "lossless", "c1",
                        [*_passing(), make_check(T, "c1", "candidate_media", "fail", reason)])
        expected = "inconclusive" if reason.category is Category.VALIDITY else "failed"
        assert verdict.verdict == expected and verdict.reasons == (reason,), reason


def test_a_verdict_cap_must_be_a_validity_reason() -> None:
    with pytest.raises(ValueError, match="not in the vocabulary"):
        judge(T, "lossless", "c1", _passing(), cap_reason="protocol_not_frozn")
    with pytest.raises(ValueError, match="not a validity one"):
        judge(T, "lossless", "c1", _passing(), cap_reason="invalid_media")


def test_a_verdict_speaks_only_the_vocabulary_too() -> None:
    made = TrackVerdict(track="5s-lossy", candidate="c", verdict="inconclusive",
                        reasons=("open_checks",), open_checks=("lossy_gate",),
                        checks={"lossy_gate": "open"})
    assert made.reasons == (Reason.OPEN_CHECKS,) and made.open_checks == (Check.LOSSY_GATE,)
    with pytest.raises(ValueError, match="reason: 'open_check' is not in the vocabulary"):
        TrackVerdict(track="5s-lossy", candidate="c", verdict="inconclusive",
                     reasons=("open_check",), open_checks=(), checks={})
    with pytest.raises(ValueError, match="check name: 'lossy_gat' is not in the vocabulary"):
        TrackVerdict(track="5s-lossy", candidate="c", verdict="inconclusive",
                     reasons=("open_checks",), open_checks=("lossy_gat",), checks={})
    with pytest.raises(ValueError, match="'passed' is not one of"):
        TrackVerdict(track="5s-lossy", candidate="c", verdict="passed", reasons=(), open_checks=(),
                     checks={})  # type: ignore[arg-type]


def _localized(found: bool, where: str, module: str | None, step: int | None) -> AnyCheck:
    from ref2va_accept.judging.localize import Localization, Target

    target = Target("dit" if step is not None else "encoders", step)
    return Localization(T, "c1", "dit.step002", 42, target, found=found, where=where,
                        module=module, sentence="s").check()


@pytest.mark.parametrize(("check", "row"), [
    (_localized(True, "code between dit.blocks.2 and dit.blocks.3", "dit.blocks.2", 2),
     "code between dit.blocks.2 and dit.blocks.3 (step 2)"),
    (_localized(True, "", "text_encoder.layers.0.fc1", None), "text_encoder.layers.0.fc1"),
    (_localized(True, "", None, 4), "outside any module (step 4)"),
    (_localized(False, "dit.blocks.1", "dit.blocks.1", 2), ""),  # open: nothing named
])
def test_the_row_names_where_a_localization_pass_found_the_parting(check: AnyCheck,
                                                                   row: str) -> None:
    assert judge(T, "lossless", "c1", [*_passing(), check]).localized == row
    # another candidate's pass names nothing in this one's row
    assert judge(T, "lossless", "c2", [*_passing("c2"), check]).localized == ""


def test_the_row_names_the_stand_in_weights_its_scores_came_from_once_each() -> None:
    weights = {"weights": [{"name": "ViT-B-32.pt", "sha256": "ab" * 32, "stand_in": True,
                            "declared": True}], "stand_ins": ["ViT-B-32.pt"], "undeclared": []}
    checks = [make_check(T, arm, Check.SCORER_WEIGHTS, "pass", None, "x", weights)
              for arm in ("b0", "c1")]
    assert judge(T, "lossless", "c1", [*_passing(), *checks]).stand_in_weights == ("ViT-B-32.pt",)
    real = {**weights, "stand_ins": []}
    assert judge(T, "lossless", "c1", [*_passing(), make_check(
        T, "c1", Check.SCORER_WEIGHTS, "pass", None, "x", real)]).stand_in_weights == ()
