"""Per-track verdicts follow the documented order; an open check is never a pass."""

from __future__ import annotations

from ref2va_accept.verdicts import CheckResult, judge

T = "5s-lossless"


def _passing(candidate: str = "c1") -> list[CheckResult]:
    return [
        CheckResult(T, "b0", "b0_media", "pass"),
        CheckResult(T, "b0", "cleanup", "pass"),
        CheckResult(T, candidate, "candidate_media", "pass"),
        CheckResult(T, candidate, "cleanup", "pass"),
        CheckResult(T, "b0", "baseline_determinism", "pass"),
        CheckResult(T, candidate, "lossless_gate", "pass"),
        CheckResult(T, candidate, "enabled_path_audit", "pass"),
        CheckResult(T, candidate, "unobserved_output", "pass"),
        CheckResult(T, candidate, "timed_output", "pass"),
        CheckResult(T, candidate, "resource_interference", "pass"),
        CheckResult(T, candidate, "latency_ratio", "pass", data={"verdict": "supported"}),
    ]


def test_all_checks_passed_gives_the_interval_verdict() -> None:
    v = judge(T, "lossless", "c1", _passing())
    assert v.verdict == "supported" and v.open_checks == ()


def test_a_missing_gate_is_open_and_inconclusive() -> None:
    checks = [c for c in _passing() if c.name != "lossless_gate"]
    v = judge(T, "lossless", "c1", checks)
    assert v.verdict == "inconclusive" and v.open_checks == ("lossless_gate",)


def test_an_explicitly_open_check_blocks_support() -> None:
    checks = [*_passing(), CheckResult(T, "c1", "weights_present", "open")]
    v = judge(T, "lossless", "c1", checks)
    assert v.verdict == "inconclusive" and "weights_present" in v.open_checks


def test_candidate_defect_fails() -> None:
    checks = [*_passing(), CheckResult(T, "c1", "candidate_media", "fail", "invalid_media")]
    v = judge(T, "lossless", "c1", checks)
    assert v.verdict == "failed" and v.reasons == ("invalid_media",)


def test_baseline_failure_makes_it_inconclusive_even_with_a_defect() -> None:
    checks = [*_passing(),
              CheckResult(T, "b0", "b0_media", "fail", "baseline_request_failed"),
              CheckResult(T, "c1", "candidate_media", "fail", "invalid_media")]
    v = judge(T, "lossless", "c1", checks)
    assert v.verdict == "inconclusive"
    assert v.reasons == ("baseline_request_failed", "invalid_media")


def test_unfrozen_protocol_caps_a_supported_track() -> None:
    v = judge(T, "lossless", "c1", _passing(), cap_reason="protocol_not_frozen")
    assert v.verdict == "inconclusive" and v.reasons == ("protocol_not_frozen",)


def test_dirty_cleanup_is_inconclusive() -> None:
    checks = [*_passing(), CheckResult(T, "c1", "cleanup", "fail", "incomplete_cleanup")]
    assert judge(T, "lossless", "c1", checks).verdict == "inconclusive"


def test_checks_of_another_candidate_or_track_do_not_count() -> None:
    checks = [*_passing(), CheckResult(T, "c2", "candidate_media", "fail", "invalid_media"),
              CheckResult("15s-lossless", "c1", "candidate_media", "fail", "invalid_media")]
    assert judge(T, "lossless", "c1", checks).verdict == "supported"


def test_a_track_without_candidate_is_inconclusive_with_its_checks() -> None:
    v = judge(T, "lossless", None, [CheckResult(T, "b0", "b0_media", "pass")])
    assert v.verdict == "inconclusive" and "no_candidate" in v.reasons
    assert v.checks == {"b0_media": "pass"}
    assert "latency_ratio" in v.open_checks


def test_one_failing_instance_fails_the_check() -> None:
    checks = [CheckResult(T, "b0", "cleanup", "fail", "incomplete_cleanup"),
              CheckResult(T, "b0", "cleanup", "pass")]
    assert judge(T, "lossless", None, checks).checks["cleanup"] == "fail"
