"""The latency protocol's judgement in the documented order, on synthetic instance runs, for the
instance design (the default) and the labelled request design."""

from __future__ import annotations

import dataclasses

import pytest

from ref2va_accept.judging import InstanceRun, distinct_plan, judge_latency
from ref2va_accept.timing import LatencySettings, candidate_schedule, warmup_done
from tests.unit.latency_doubles import INSTANCE, latency_outcome, latency_run, run_state

pytestmark = pytest.mark.fast

T, C = "5s-lossless", "fast"

REQUEST = dataclasses.replace(INSTANCE, replication="request", instances_per_arm=None,
                              warmups=1, max_warmups=1, steady_fraction=None, repeats=3,
                              ordering="ABA")


def _judge(*runs: InstanceRun, settings: LatencySettings = REQUEST
           ) -> dict[str, tuple[str, str | None, dict]]:
    checks = judge_latency(T, C, runs, settings)
    # As the evidence writes them: the latency result's verdict and interval inside data.
    return {c.name: (c.status, c.reason, c.json_dict()["data"]) for c in checks}


def _instances(b0: list[float], cand: list[float], **cand_kw: object) -> list[InstanceRun]:
    runs = []
    for b, c in zip(b0, cand, strict=True):
        runs += [latency_run("b0", [b]), latency_run(C, [c], **cand_kw)]  # type: ignore[arg-type]
    return runs


# -- the instance design ----------------------------------------------------------------------

def test_instance_design_interval_is_on_one_value_per_instance() -> None:
    found = _judge(*_instances([300, 310, 295], [140, 139, 142]), settings=INSTANCE)
    latency = found["latency_ratio"][2]
    assert latency["verdict"] == "supported" and latency["unit"] == "instance"
    assert latency["baseline_s"] == [300, 310, 295] and latency["candidate_s"] == [140, 139, 142]
    # n = 3 per arm at 95%: k = 1, so the interval is the extreme pairwise ratios.
    # (data["interval"] is the latency result; its own "interval" the ratio interval.)
    assert latency["interval"]["interval"]["upper"] == pytest.approx(142 / 295)
    assert "instance" in latency["interval"]["note"] and len(latency["instances"]) == 6


def test_instance_design_one_slow_candidate_instance_is_not_supported() -> None:
    # The slowest candidate instance must be at most half the fastest B0 instance.
    found = _judge(*_instances([300, 310, 295], [140, 139, 150]), settings=INSTANCE)
    assert found["latency_ratio"][2]["verdict"] == "inconclusive"
    found = _judge(*_instances([300, 310, 295], [200, 210, 190]), settings=INSTANCE)
    assert found["latency_ratio"][2]["verdict"] == "failed"


def test_b0_spread_between_and_within_instances_is_reported() -> None:
    runs = [latency_run("b0", [300], warmups=[305, 301]), latency_run(C, [140]),
            latency_run("b0", [330], warmups=[329, 331]), latency_run(C, [141]),
            latency_run("b0", [315], warmups=[316, 314]), latency_run(C, [139])]
    spread = _judge(*runs, settings=INSTANCE)["latency_ratio"][2]["b0_spread"]
    assert spread["instances"] == 3
    assert spread["between_instances"] == pytest.approx(0.0476, abs=1e-3)
    assert 0 < spread["within_instance"] < 0.01


def test_drift_between_first_and_last_b0_instance_is_not_evaluable() -> None:
    found = _judge(*_instances([300, 310, 345], [140, 139, 142]), settings=INSTANCE)
    assert found["latency_ratio"][:2] == ("fail", "drift")
    assert found["latency_ratio"][2]["drift"] == pytest.approx(0.15)
    # The same spread inside the tolerance decides normally.
    found = _judge(*_instances([300, 345, 310], [140, 139, 142]), settings=INSTANCE)
    assert found["latency_ratio"][2]["verdict"] == "supported"


def test_unsteady_warmup_is_not_evaluable_and_named() -> None:
    runs = _instances([300, 310, 295], [140, 139, 142])
    runs[3] = latency_run(C, [], warmups=[200, 150, 120, 100], steady=False)
    found = _judge(*runs, settings=INSTANCE)
    assert found["latency_ratio"][:2] == ("fail", "warmup_not_steady")


def test_warmup_rule() -> None:
    assert not warmup_done([300.0], INSTANCE)  # the minimum first
    assert warmup_done([300.0, 310.0], INSTANCE)  # 3.3% apart: steady
    assert not warmup_done([400.0, 300.0], INSTANCE)  # 25% apart: go on
    assert not warmup_done([400.0, 300.0, 250.0], INSTANCE)
    assert warmup_done([400.0, 300.0, 250.0, 200.0], INSTANCE)  # the bound (not steady)
    fixed = dataclasses.replace(INSTANCE, steady_fraction=None, max_warmups=2)
    assert warmup_done([400.0, 300.0], fixed)


def test_caching_probe_per_instance_needs_every_probed_instance() -> None:
    # Both probed instances' repeats are far faster than their distinct requests: a cache.
    runs = [latency_run("b0", [300]), latency_run(C, [100], [140]),
            latency_run("b0", [300]), latency_run(C, [101], [141]),
            latency_run("b0", [302]), latency_run(C, [99])]
    found = _judge(*runs, settings=INSTANCE)
    assert found["caching_probe"][:2] == ("fail", "caching_suspected")
    # One instance's slow distinct request (load that came and went) is noise.
    runs[3] = latency_run(C, [101], [103])
    found = _judge(*runs, settings=INSTANCE)
    assert found["caching_probe"][:2] == ("pass", None)


def test_candidate_schedule_interleaves_pairs_drawn_from_the_order_seed() -> None:
    order = candidate_schedule(INSTANCE, C)
    assert len(order) == 6 and order.count("b0") == 3
    assert all(set(order[i:i + 2]) == {"b0", C} for i in range(0, 6, 2))  # pairs
    assert order == candidate_schedule(INSTANCE, C)  # frozen
    orders = {tuple(candidate_schedule(dataclasses.replace(INSTANCE, order_seed=s), C))
              for s in range(40)}
    assert len(orders) == 8  # every pair's order is drawn
    assert distinct_plan(INSTANCE, order, [C]) == [
        [0] if p == order.index(C) else [1] if p == order.index(C, order.index(C) + 1) else []
        for p in range(6)]


# -- the request design (labelled) and the order of the judgement ---------------------------------

def test_a_fast_candidate_is_supported() -> None:
    found = _judge(latency_run("b0", [300, 298, 305]), latency_run(C, [140, 141, 139], [142, 140]),
                   latency_run("b0", [301, 299, 303]))
    assert found["latency_ratio"][2]["verdict"] == "supported"
    assert found["latency_ratio"][2]["unit"] == "request"
    assert "inside one instance" in found["latency_ratio"][2]["interval"]["note"]
    ab = dataclasses.replace(REQUEST, ordering="AB")
    latency = next(c for c in judge_latency(T, C, [latency_run("b0", [300, 298, 305]),
                                                  latency_run(C, [140, 141, 139])], ab)
                   if c.name == "latency_ratio")
    assert latency.latency is not None and latency.latency.verdict == "supported"  # typed
    # devices.kind none: nothing was probed, so interference is not applicable, never a pass.
    assert found["resource_interference"][0] == "not_applicable"
    assert found["caching_probe"][0] == "pass"


def test_interference_passes_only_where_devices_were_probed() -> None:
    runs = (latency_run("b0", [300, 298, 305]), latency_run(C, [140, 141, 139]),
            latency_run("b0", [301, 299, 303]))
    probed = dataclasses.replace(REQUEST, device_kind="npu", devices=(0, 1, 2, 3))
    status, reason, data = _judge(*runs, settings=probed)["resource_interference"]
    assert (status, reason, data["device_kind"]) == ("pass", None, "npu")
    none = judge_latency(T, C, runs, REQUEST)[0]
    assert none.status == "not_applicable" and "no device was probed" in none.detail


def test_no_speedup_is_failed() -> None:
    found = _judge(latency_run("b0", [300, 298, 305]), latency_run(C, [290, 300, 295]),
                   latency_run("b0", [301, 299, 303]))
    assert found["latency_ratio"][2]["verdict"] == "failed"


def test_interference_is_recorded_as_a_validity_failure() -> None:
    found = _judge(latency_run("b0", [300, 298, 305], interference=["during b0#0: device 1 pid 7"]),
                   latency_run(C, [140, 141, 139]), latency_run("b0", [301, 299, 303]))
    assert found["resource_interference"][:2] == ("fail", "resource_interference")


def test_baseline_request_failure_stops_the_comparison() -> None:
    found = _judge(latency_run("b0", [300, 298], failure="connection_lost"),
                   latency_run(C, [140, 141, 139]), latency_run("b0", [301, 299, 303]))
    assert found["latency_ratio"][:2] == ("fail", "baseline_request_failed")
    # A failed warm-up of B0 counts as well.
    run = latency_run("b0", [300, 298, 305])
    run.warmups.append(latency_outcome(None, "timeout"))
    found = _judge(run, latency_run(C, [140, 141, 139]), latency_run("b0", [301, 299, 303]))
    assert found["latency_ratio"][:2] == ("fail", "baseline_request_failed")


def test_candidate_request_failure_is_a_candidate_defect() -> None:
    found = _judge(latency_run("b0", [300, 298, 305]),
                   latency_run(C, [140, 141], failure="timeout"),
                   latency_run("b0", [301, 299, 303]))
    assert found["latency_ratio"][:2] == ("fail", "candidate_request_failed")


def test_drift_is_judged_before_a_candidate_defect() -> None:
    # The documented order: a run that is not evaluable says so, whatever the candidate did.
    found = _judge(latency_run("b0", [300, 298, 305]),
                   latency_run(C, [140, 141], failure="timeout"),
                   latency_run("b0", [360, 355, 365]))
    assert found["latency_ratio"][:2] == ("fail", "drift")


def test_drift_between_a_and_a_prime_is_not_evaluable() -> None:
    found = _judge(latency_run("b0", [300, 298, 305]), latency_run(C, [140, 141, 139]),
                   latency_run("b0", [360, 355, 365]))
    assert found["latency_ratio"][:2] == ("fail", "drift")
    assert found["latency_ratio"][2]["drift"] > 0.10


def test_repeated_requests_much_faster_than_distinct_ones_suggest_caching() -> None:
    found = _judge(latency_run("b0", [300, 298, 305]), latency_run(C, [100, 101, 99], [140, 141]),
                   latency_run("b0", [301, 299, 303]))
    assert found["caching_probe"][:2] == ("fail", "caching_suspected")
    # Just past the margin: repeats at 89.9% of the fastest distinct request.
    found = _judge(latency_run("b0", [300, 298, 305]),
                   latency_run(C, [89.9, 89.9, 89.9], [100, 130]),
                   latency_run("b0", [301, 299, 303]))
    assert found["caching_probe"][:2] == ("fail", "caching_suspected")


def test_one_slow_distinct_request_is_noise_not_caching() -> None:
    # Seen on a 2-core CI machine: repeats 2.18 s, distinct 2.32 s and 2.97 s (median 2.64 s).
    found = _judge(latency_run("b0", [6.1, 6.2, 6.0]),
                   latency_run(C, [2.181, 2.17, 2.285], [2.315, 2.966]),
                   latency_run("b0", [6.0, 6.1, 6.2]))
    assert found["caching_probe"][:2] == ("pass", None)
    found = _judge(latency_run("b0", [300, 298, 305]),
                   latency_run(C, [90.1, 90.1, 90.1], [100, 130]),
                   latency_run("b0", [301, 299, 303]))
    assert found["caching_probe"][:2] == ("pass", None)


def test_request_orderings() -> None:
    assert candidate_schedule(REQUEST, "c") == ["b0", "c", "b0"]
    abba = dataclasses.replace(REQUEST, ordering="ABBA")
    assert candidate_schedule(abba, "c") == ["b0", "c", "c", "b0"]
    ab = [dataclasses.replace(REQUEST, ordering="AB", order_seed=s) for s in range(20)]
    assert {tuple(candidate_schedule(s, "c")) for s in ab} == {("b0", "c"), ("c", "b0")}


# --- the order drawn per run (protocol.order_seed: per_run) -------------------------------------

def test_each_run_draws_its_own_order_seed_and_the_plans_carry_it() -> None:
    from ref2va_accept.timing import latency_schedule

    states = [run_state() for _ in range(6)]
    seeds = {s.order_seed for s in states}
    assert len(seeds) >= 5  # 31 random bits each: equal ones would be a broken draw
    orders = set()
    for state in states:
        latency = state.plans["5s-lossless"].latency
        assert latency.order_seed == state.order_seed and latency.order_drawn
        candidates = [a.id for a in state.plans["5s-lossless"].candidates]
        orders.add(tuple(latency_schedule(latency, "5s-lossless", candidates)))
    assert len(orders) >= 2


def test_a_given_order_seed_replays_that_order() -> None:
    from ref2va_accept.timing import latency_schedule

    a, b = run_state(order_seed=123), run_state(order_seed=123)
    assert a.order_seed == b.order_seed == 123
    la, lb = a.plans["5s-lossless"].latency, b.plans["5s-lossless"].latency
    ids = [c.id for c in a.plans["5s-lossless"].candidates]
    assert latency_schedule(la, "5s-lossless", ids) == latency_schedule(lb, "5s-lossless", ids)
