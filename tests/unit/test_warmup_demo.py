"""Cheap warm-ups only where the host has shown them to be as good as full ones.

A campaign may warm its instances up with fewer denoising steps (`protocol.warmup_steps`) only
with the host's demonstration that the first measured request after them is within
steady_fraction of one after full warm-ups; the run then sends its warm-ups with that many steps,
prices them at their share, and keeps them out of the within-instance spread.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from ref2va_accept.campaign import load_campaign
from ref2va_accept.core import CampaignError, Check, Reason
from ref2va_accept.judging import LatencySchedules, demonstrate, run_latency
from ref2va_accept.planning import Prices, candidate_cost, plan_campaign
from ref2va_accept.timing import InstanceTimes
from tests.unit.latency_doubles import TRACK, ChosenLatencyArms, plan_910c
from tests.unit.suite_runner import campaign_variant

DEMO = {"warmup_steps": 4, "run_id": "20261203T000000Z-abcdef", "measured_at": "2026-12-03",
        "per_duration": {"5s": {"full_s": [7.0, 7.2], "cheap_s": [7.1, 7.3]},
                         "15s": {"full_s": [12.0, 12.4], "cheap_s": [12.1, 12.5]}}}


def _campaign(tmp_path: Path, **protocol: Any) -> Path:
    path = campaign_variant(tmp_path / "c")
    data = yaml.safe_load(path.read_text())
    data["protocol"].update(protocol)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.fast
def test_a_cheap_warmup_without_its_demonstration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CampaignError) as caught:
        # (the reference campaign, which this copies, carries its own demonstration)
        load_campaign(_campaign(tmp_path, warmup_steps=4, warmup_demonstration=None))
    assert "pytest -m warmup_demonstration --warmup-steps 4" in str(caught.value)


@pytest.mark.fast
@pytest.mark.parametrize(("change", "says"), [
    ({"warmup_steps": 8}, "measured warm-ups of 8 steps"),
    # The reference campaign's steady_fraction is 0.25.
    ({"per_duration": {"5s": {"full_s": [7.0], "cheap_s": [9.0]},
                       "15s": {"full_s": [12.0], "cheap_s": [12.0]}}},
     "took 1.286 of one after full"),
    ({"per_duration": {"5s": {"full_s": [7.0], "cheap_s": [7.0]}}},
     "found none for 15s"),
])
def test_a_demonstration_that_does_not_show_it_is_refused(tmp_path: Path, change: dict,
                                                          says: str) -> None:
    demo = {**DEMO, **change}
    with pytest.raises(CampaignError, match=says):
        load_campaign(_campaign(tmp_path, warmup_steps=4, warmup_demonstration=demo))


@pytest.mark.fast
def test_a_demonstrated_cheap_warmup_is_used_priced_and_kept_out_of_the_spread(
        tmp_path: Path) -> None:
    campaign = load_campaign(_campaign(tmp_path, warmup_steps=4, warmup_demonstration=DEMO))
    plan = plan_campaign(campaign)["5s-lossless"]
    assert plan.latency.warmup_steps == 4
    prices = Prices({"5s": 100.0}, {"5s": 0.0})
    cheap = candidate_cost(plan, "lossless-text-kv", prices)
    full = candidate_cost(dataclasses.replace(
        plan, latency=dataclasses.replace(plan.latency, warmup_steps=None)),
        "lossless-text-kv", prices)
    # 6 instances x at most 4 warm-ups, all at B0's median in the upper figure: at 4 of 50
    # steps each costs 8% of a request.
    saved = full.host_seconds()[1] - cheap.host_seconds()[1]  # type: ignore[index]
    assert saved == pytest.approx(6 * plan.latency.max_warmups * 100.0 * (1 - 4 / 50))
    # The within-instance spread is of the measured requests alone.
    times = InstanceTimes("b0", (1.0, 1.02), (9.0,))
    assert times.steady_window(plan.latency) == (9.0,)


def test_the_latency_protocol_sends_its_warmups_with_the_cheap_steps() -> None:
    sent: list[tuple[str, int | None]] = []

    class Recording(ChosenLatencyArms):
        def request(self, engine: Any, arm: str, *, kind: str, index: int, seed: int,
                    **kw: Any) -> Any:
            sent.append((kind, kw.get("steps")))
            return super().request(engine, arm, kind=kind, index=index, seed=seed)

    arms = Recording(plan_910c(warmup_steps=4),
                     lambda arm, kind, n: 300.0 * (0.4 if arm == "fast" else 1.0) * (1 + n / 500))
    schedules = LatencySchedules()
    schedules.cover(TRACK, ["fast"])
    run_latency(arms, "fast", schedules)  # type: ignore[arg-type]
    assert {steps for kind, steps in sent if kind == "warmup"} == {4}
    assert {steps for kind, steps in sent if kind == "measured"} == {None}


@pytest.mark.fast
@pytest.mark.parametrize(("cheap_factor", "passes"), [(1.02, True), (1.3, False)])
def test_the_demonstration_compares_the_request_after_each_warmup(cheap_factor: float,
                                                                  passes: bool) -> None:
    starts: list[int | None] = []

    class Demo(ChosenLatencyArms):
        def request(self, engine: Any, arm: str, *, kind: str, index: int, seed: int,
                    **kw: Any) -> Any:
            if kind == "warmup" and (not starts or starts[-1] != id(engine)):
                starts.append(id(engine))
                engine.cheap = kw.get("steps") is not None
            factor = cheap_factor if getattr(engine, "cheap", False) and kind == "measured" \
                else 1.0
            self.latency = lambda a, k, n, f=factor: 300.0 * f * (1 + n / 1000)
            return super().request(engine, arm, kind=kind, index=index, seed=seed)

    arms = Demo(plan_910c(), lambda a, k, n: 300.0)
    check = demonstrate(arms, 4)  # type: ignore[arg-type]
    assert arms.started == ["b0"] * 4
    assert check.name == Check.WARMUP_DEMONSTRATION
    assert (check.status == "pass") is passes
    if not passes:
        assert check.reason == Reason.WARMUP_NOT_STEADY
    assert len(check.data.full_s) == len(check.data.cheap_s) == 2
    assert check.data.per_duration_yaml.startswith('"5s": {full_s: [')


@pytest.mark.fast
def test_the_demonstration_runs_only_when_asked_for_by_name() -> None:
    from tests.unit.plugin_sessions import collect_in_checkout

    plain = collect_in_checkout("tests/perf").out
    assert "test_warmup.py" not in plain and "test_latency.py" in plain
    asked = collect_in_checkout("tests/perf", "-m", "warmup_demonstration").nodeids
    collected = [nodeid for nodeid in asked if "test_warmup.py" in nodeid]
    assert len(collected) == 2  # one track per duration class (the lossless ones)
