"""Where a track's latency protocol stops, and which instances it did and did not start.

On a stand-in arm runner (latency_doubles.ChosenLatencyArms; no engine: each request answers a
latency the test chooses), so that every stop is shown by the instances it started: a candidate
whose quality gate failed starts none; a request failure ends that arm; a candidate no faster
than B0 stops once `supported` is out of reach, while B0 goes on for the others; a candidate at
0.4 of B0 runs its whole protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ref2va_accept.core import Check, Reason, Verdict
from ref2va_accept.evidence import AnyCheck
from ref2va_accept.judging import LatencySchedules, judge, quality_stop, run_latency
from tests.unit.check_records import make_check
from tests.unit.latency_doubles import TRACK, ChosenLatencyArms, plan_910c, run_state


def _speeds(ratio: dict[str, float], jitter: float = 0.03) -> Callable[[str, str, int], float]:
    def latency(arm: str, kind: str, n: int) -> float:
        wobble = 1 + jitter * ((n * 7 + len(arm)) % 5 - 2) / 2
        return 300.0 * ratio.get(arm, 1.0) * wobble
    return latency


def _latency_check(arms: ChosenLatencyArms, candidate: str) -> AnyCheck:
    return next(c for c in arms.evidence.checks
                if c.arm == candidate and c.name == Check.LATENCY_RATIO)


def _schedules(candidates: list[str]) -> LatencySchedules:
    schedules = LatencySchedules()
    schedules.cover(TRACK, candidates)
    return schedules


def test_a_fast_candidate_runs_its_whole_protocol_and_is_supported() -> None:
    arms = ChosenLatencyArms(plan_910c(), _speeds({"fast": 0.4}))
    run_latency(arms, "fast", _schedules(["fast"]))  # type: ignore[arg-type]
    assert arms.started.count("b0") == 3 and arms.started.count("fast") == 3
    check = _latency_check(arms, "fast")
    assert check.latency is not None and check.latency.verdict == "supported"
    assert "futility" not in check.data


def test_a_candidate_no_faster_than_b0_stops_once_supported_is_out_of_reach() -> None:
    arms = ChosenLatencyArms(plan_910c(), _speeds({"slow": 1.0}))
    run_latency(arms, "slow", _schedules(["slow"]))  # type: ignore[arg-type]
    started = arms.started.count("slow")
    assert started < 3, arms.started  # it did not run all three of its instances
    assert arms.started.count("b0") < 3  # and B0 had no other candidate to go on for
    check = _latency_check(arms, "slow")
    assert check.latency is not None and check.latency.verdict in ("failed", "inconclusive")
    if check.latency.verdict == "inconclusive":
        assert check.latency.reasons == ("supported_out_of_reach",)
        # The verdict row says why, apart from an interval that merely spans the target.
        passed = [make_check(TRACK, "slow", name, "pass") for name in (
            Check.B0_MEDIA, Check.CANDIDATE_MEDIA, Check.CLEANUP, Check.BASELINE_DETERMINISM,
            Check.LOSSLESS_GATE, Check.ENABLED_PATH_AUDIT, Check.UNOBSERVED_OUTPUT,
            Check.TIMED_OUTPUT, Check.RESOURCE_INTERFERENCE)]
        verdict = judge(TRACK, "lossless", "slow", [*passed, check])
        assert verdict.reasons == (Reason.LATENCY_OUT_OF_REACH,)
    assert check.json_dict()["data"]["futility"]["own_instances_not_started"] == 3 - started
    assert "supported out of reach" in " ".join(arms.evidence.notes)


def test_b0_shared_goes_on_for_the_candidates_still_in_reach() -> None:
    arms = ChosenLatencyArms(plan_910c(), _speeds({"fast": 0.4, "slow": 1.0, "other": 0.42}))
    schedules = _schedules(["fast", "slow", "other"])
    for candidate in ("fast", "slow", "other"):
        run_latency(arms, candidate, schedules)  # type: ignore[arg-type]
    assert arms.started.count("b0") == 3  # exactly its N, however many candidates
    assert arms.started.count("fast") == 3 and arms.started.count("other") == 3
    assert arms.started.count("slow") < 3
    verdicts = {c: _latency_check(arms, c).latency.verdict  # type: ignore[union-attr]
                for c in ("fast", "slow", "other")}
    assert verdicts["fast"] == verdicts["other"] == "supported"
    assert verdicts["slow"] != "supported"


def test_a_candidate_that_failed_its_gate_starts_no_latency_instance() -> None:
    arms = ChosenLatencyArms(plan_910c(), _speeds({"fast": 0.4, "slow": 0.4}))
    arms.evidence.add_check(make_check(TRACK, "slow", Check.LOSSLESS_GATE, "fail",
                                       Reason.QUALITY_GATE_FAILED, "not bit-exact"))
    schedules = _schedules(["fast", "slow"])
    for candidate in ("fast", "slow"):
        run_latency(arms, candidate, schedules)  # type: ignore[arg-type]
    assert "slow" not in arms.started and arms.started.count("fast") == 3
    check = _latency_check(arms, "slow")
    assert check.status == "open" and check.latency is None
    assert check.detail == "not measured: stopped on lossless_gate (quality_gate_failed)"
    verdict = judge(TRACK, "lossless", "slow", arms.evidence.checks)
    assert verdict.verdict == "failed" and Reason.QUALITY_GATE_FAILED in verdict.reasons


@pytest.mark.fast
def test_a_b0_that_failed_its_gate_stops_every_candidate() -> None:
    arms = ChosenLatencyArms(plan_910c(), _speeds({"fast": 0.4}))
    arms.evidence.add_check(make_check(TRACK, "b0", Check.BASELINE_DETERMINISM, "fail",
                                       Reason.BASELINE_NONDETERMINISTIC, "differs"))
    run_latency(arms, "fast", _schedules(["fast"]))  # type: ignore[arg-type]
    assert arms.started == []
    assert "B0's baseline_determinism" in _latency_check(arms, "fast").detail
    assert judge(TRACK, "lossless", "fast", arms.evidence.checks).verdict == "inconclusive"


@pytest.mark.fast
def test_an_open_gate_stops_the_latency_protocol_too() -> None:
    assert quality_stop([make_check(TRACK, "c", Check.LOSSLESS_GATE, "open")], TRACK,
                        "c") == "lossless_gate (open)"
    # Checks of another track or candidate, and the latency protocol's own, stop nothing.
    assert quality_stop([make_check("15s-lossless", "c", Check.LOSSLESS_GATE, "fail",
                                    Reason.QUALITY_GATE_FAILED),
                         make_check(TRACK, "d", Check.LOSSLESS_GATE, "fail",
                                    Reason.QUALITY_GATE_FAILED),
                         make_check(TRACK, "c", Check.RESOURCE_INTERFERENCE, "fail",
                                    Reason.RESOURCE_INTERFERENCE)], TRACK, "c") is None


def test_a_request_failure_ends_that_arm_and_no_other() -> None:
    def latency(arm: str, kind: str, n: int) -> float | None:
        if arm == "slow" and kind == "measured":
            return None
        return _speeds({"fast": 0.4, "slow": 0.4})(arm, kind, n)
    arms = ChosenLatencyArms(plan_910c(), latency)
    schedules = _schedules(["fast", "slow"])
    for candidate in ("fast", "slow"):
        run_latency(arms, candidate, schedules)  # type: ignore[arg-type]
    assert arms.started.count("slow") == 1 and arms.started.count("fast") == 3
    assert _latency_check(arms, "slow").reason == Reason.CANDIDATE_REQUEST_FAILED


@pytest.mark.fast
def test_a_timing_problem_never_masks_a_quality_failure_decided_without_timing() -> None:
    checks = [make_check(TRACK, "c", Check.LOSSLESS_GATE, "fail", Reason.QUALITY_GATE_FAILED),
              make_check(TRACK, "c", Check.LATENCY_RATIO, "fail", Reason.DRIFT, "B0 moved"),
              make_check(TRACK, "c", Check.RESOURCE_INTERFERENCE, "fail",
                         Reason.RESOURCE_INTERFERENCE)]
    verdict = judge(TRACK, "lossless", "c", checks)
    assert verdict.verdict == "failed"
    assert verdict.reasons[0] == Reason.QUALITY_GATE_FAILED and Reason.DRIFT in verdict.reasons
    # B0 not reproducing itself is no timing problem: the gate could not decide.
    b0 = make_check(TRACK, "b0", Check.BASELINE_DETERMINISM, "fail",
                    Reason.BASELINE_NONDETERMINISTIC)
    assert judge(TRACK, "lossless", "c", [*checks, b0]).verdict == "inconclusive"
    # A caching suspicion is measured by timing: drift still masks it.
    timed = [make_check(TRACK, "c", Check.CACHING_PROBE, "fail", Reason.CACHING_SUSPECTED),
             checks[1]]
    assert judge(TRACK, "lossless", "c", timed).verdict == "inconclusive"


# --- several candidates on one B0, and reruns ---------------------------------------------------

def _supported(candidate: str, p: float) -> list[AnyCheck]:
    from ref2va_accept.timing import latency_verdict

    latency = latency_verdict([300.0, 310.0, 295.0], [120.0, 124.0, 118.0], rule="welch-log/1")
    latency = latency.model_copy(update={"p_value": p})
    return [make_check(TRACK, candidate, Check.LATENCY_RATIO, "pass", latency=latency)]


@pytest.mark.fast
def test_holm_keeps_a_family_of_candidates_to_alpha() -> None:
    from ref2va_accept.judging import family_wise

    checks = [*_supported("a", 0.001), *_supported("b", 0.03), *_supported("c", 0.2)]
    rows = [judge(TRACK, "lossless", c, checks).model_copy(update={"verdict": Verdict.SUPPORTED})
            for c in ("a", "b", "c")]
    holm = {r.candidate: r.holm for r in family_wise(rows, checks, 0.045)}
    # a: 0.001 <= 0.045/3; b: 0.03 > 0.045/2, so b and everything after it stay unrejected.
    assert holm == {"a": "supported", "b": "not supported", "c": "not supported"}
    assert [r.p_value for r in family_wise(rows, checks, 0.045)] == [0.001, 0.03, 0.2]
    # One candidate: nothing to correct for.
    single = family_wise(rows[:1], checks, 0.045)
    assert single[0].holm is None and single[0].p_value == 0.001


@pytest.mark.fast
def test_a_rerun_is_numbered_and_names_what_the_earlier_attempts_gave() -> None:
    from ref2va_accept.evidence import LedgerEntry
    from ref2va_accept.history import LEDGER_SCHEMA

    state = run_state()
    state.ran_tracks.add("5s-lossless")

    def row() -> Any:
        return next(r for r in state.verdicts([]) if r.candidate == "lossless-text-kv")

    assert row().attempt is None  # no ledger read: nothing claimed
    name = state.campaign.model.name
    state.ledger_entries = tuple(LedgerEntry.model_validate(
        {"schema": LEDGER_SCHEMA, "run_status": "complete", **e}) for e in (
        {"kind": "attempt", "campaign": name, "track": "5s-lossless",
         "candidate": "lossless-text-kv", "run_id": "r1", "verdict": "inconclusive",
         "reasons": ["drift"]},
        {"kind": "run", "campaign": name, "run_id": "r1"},
        {"kind": "attempt", "campaign": name, "track": "5s-lossy",
         "candidate": "lossless-text-kv", "run_id": "r1", "verdict": "failed"},
        {"kind": "attempt", "campaign": "another", "track": "5s-lossless",
         "candidate": "lossless-text-kv", "run_id": "r0", "verdict": "failed"}))
    again = row()
    assert again.attempt == 2 and again.earlier == ("r1: inconclusive (drift)",)
    assert again.json_dict_full()["attempt"] == 2
