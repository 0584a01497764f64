"""What the frozen protocol costs on the host, as `verify` prints it: counted by the run's code."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ref2va_accept.campaign import load_campaign
from ref2va_accept.cost import candidate_cost, describe
from ref2va_accept.plan import plan_campaign

ROOT = Path(__file__).resolve().parents[2]
MEDIAN = {"5s": 292.148, "15s": 1702.939}


@pytest.fixture(scope="module")
def host_plans():  # type: ignore[no-untyped-def]
    return plan_campaign(load_campaign(ROOT / "fixtures/campaigns/910c.yaml"))


def test_instance_design_costs_six_starts_and_a_range_of_warmups(host_plans) -> None:  # type: ignore[no-untyped-def]
    cost = candidate_cost(host_plans["15s-lossless"], "cache-dit-lossless-guard", MEDIAN)
    # 3 B0 + 3 candidate instances, each 2..3 warm-ups and 1 measured.
    assert cost.starts == 6
    assert (cost.b0.least, cost.b0.most) == (9, 12)
    # The candidate's: 9..12 in the protocol, 2 caching-probe requests, 2 lossless-gate requests.
    assert (cost.candidate_requests.least, cost.candidate_requests.most) == (13, 16)
    at_target, upper = cost.host_seconds()  # type: ignore[misc]
    assert at_target == pytest.approx(12 * 1702.939 + 16 * 1702.939 * 0.5)
    assert upper == pytest.approx(28 * 1702.939)


def test_request_design_as_before_costs_less_and_is_labelled(host_plans) -> None:  # type: ignore[no-untyped-def]
    plan = host_plans["5s-lossy"]
    old = dataclasses.replace(plan.latency, replication="request", instances_per_arm=None,
                              ordering="ABA", warmups=1, max_warmups=1, steady_fraction=None,
                              repeats=3)
    cost = candidate_cost(dataclasses.replace(plan, latency=old), "cache-dit", MEDIAN)
    # B0, candidate, B0 again: (1 + 3) each; the candidate adds 2 probes and its 2 seeds.
    assert (cost.starts, cost.b0.most, cost.candidate_requests.most) == (3, 8, 8)
    lines = describe({"5s-lossy": dataclasses.replace(plan, latency=old)}, MEDIAN)
    assert lines[0].startswith("protocol: request design: ABA")


def test_without_frozen_medians_no_host_time_is_invented(host_plans) -> None:  # type: ignore[no-untyped-def]
    lines = describe(host_plans, None)
    assert all("h /" not in line for line in lines)
    assert "no preflight medians frozen" in lines[-1]
    lines = describe(host_plans, MEDIAN)
    assert "26.0 h at the target ratio" in lines[-1]
