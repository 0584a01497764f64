"""Every price `plan` uses, labelled by where it comes from (measured by a bring-up, an estimate,
a bound, unpriced), and the search priced with all of them: stops, localization in the outcome
mix, scoring on the device it runs on, and the what-if table's break-even values."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from ref2va_accept.campaign import load_campaign
from ref2va_accept.cli import main
from ref2va_accept.cli._plan import pass_pricer
from ref2va_accept.core import CampaignError
from ref2va_accept.planning import (
    Prices,
    campaign_costs,
    device_seconds,
    plan_campaign,
    search_cost,
    what_if,
)
from tests.unit.suite_runner import ROOT

pytestmark = pytest.mark.fast

HOST = ROOT / "fixtures/campaigns/910c.yaml"
REFERENCE = ROOT / "fixtures/campaigns/reference.yaml"


def _host(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """910c.yaml edited, written beside links to the profiles and inputs it names."""
    data = yaml.safe_load(HOST.read_text())
    edit(data)
    for rel in ("../../engine", "../inputs"):
        link = tmp_path / rel.split("/")[-1]
        if not link.exists():
            link.symlink_to((HOST.parent / rel).resolve())
    for arm in [data["baseline"], *data["candidates"]]:
        arm["profile"] = arm["profile"].replace("../../engine", "engine")
    for track in data["tracks"].values():
        for pinned in track["inputs"].values():
            pinned["path"] = pinned["path"].replace("../inputs", "inputs")
    data["engine"]["workdir"] = "."
    copy = tmp_path / "910c.yaml"
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    return copy


def _plan(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    main(["plan", str(path), "--file", str(path.with_suffix(".ledger.jsonl"))])
    return capsys.readouterr().out


def _measured(data: dict[str, Any]) -> None:
    """Every price the host campaign uses, as a bring-up's patch leaves it."""
    protocol = data["protocol"]
    protocol["expected_stop_s"] = {"5s": 30, "15s": 30}
    protocol["capture_overhead"] = {"level1": 1.2, "level2": 1.6}
    data["scoring"]["measured_with"] = "standins"
    data["measured"] = {f"{field}.{d}": "bringup-20261206T000000Z-abcdef"
                        for field in ("protocol.expected_start_s", "protocol.expected_stop_s",
                                      "protocol.expected_request_s",
                                      "scoring.seconds_per_output")
                        for d in ("5s", "15s")} | {
        "protocol.capture_overhead": "bringup-20261206T000000Z-abcdef"}


def test_every_price_is_labelled_by_where_it_comes_from(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(HOST, capsys)
    assert "  engine start: 5s 600 s, 15s 600 s - estimate (protocol.expected_start_s; " \
        "`ref2va-accept bringup` measures it)" in out
    assert ("  engine stop: 5s 180 s, 15s 180 s - a bound: engine.shutdown_grace_s 60 s + "
            "devices.memory_release.timeout_s 120 s (protocol.expected_stop_s; "
            "`ref2va-accept bringup` measures it)") in out
    assert "  scoring one output on cpu: 5s 2278 s, 15s 6657 s - estimate" in out
    assert "  capture overhead (x a plain request): level1, level2 - unpriced" in out
    # Measured, every one of them is said so, with the bring-up that measured it.
    measured = _plan(_host(tmp_path, _measured), capsys)
    prices = measured.split("ceilings:")[0]
    assert prices.count("measured by bringup-20261206T000000Z-abcdef") == 5, prices
    assert ("scoring one output on cpu: 5s 2278 s, 15s 6657 s - measured by bringup-20261206T"
            "000000Z-abcdef with the shipped stand-in weights (the same networks)") in prices
    for word in ("estimate", "bound", "unpriced", "at least"):
        assert word not in prices
    assert "at least" not in measured and "worst case (" not in measured.split("search:")[0]


def test_a_price_measured_for_one_duration_class_only_says_which(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]
                                                                ) -> None:
    def edit(data: dict[str, Any]) -> None:
        data["measured"] = {"protocol.expected_start_s.5s": "bringup-x"}

    out = _plan(_host(tmp_path, edit), capsys)
    assert ("  engine start: 5s 600 s (measured by bringup-x), 15s 600 s (estimate) - mixed "
            "(protocol.expected_start_s; `ref2va-accept bringup` measures it)") in out


@pytest.mark.parametrize(("measured", "says"), [
    ({"protocol.expected_stop_s": "b"}, "protocol.expected_stop_s is measured, but the campaign "
                                        "does not set it"),
    ({"protocol.expected_start_s.25s": "b"}, "protocol.expected_start_s has no '25s'"),
    ({"protocol.warmup_steps": "b"}, "one of protocol.expected_start_s"),
    ({"protocol.expected_start_s": ""}, "at least 1 character"),
])
def test_a_measured_record_names_only_prices_the_campaign_sets(
        tmp_path: Path, measured: dict[str, str], says: str) -> None:
    def edit(data: dict[str, Any]) -> None:
        data["measured"] = measured

    with pytest.raises(CampaignError, match=r"measured") as caught:
        load_campaign(_host(tmp_path, edit))
    assert says in str(caught.value)


@pytest.mark.parametrize("protocol", [{"expected_stop_s": {"5s": -1}},
                                      {"capture_overhead": {"level1": 0.9}},
                                      {"capture_overhead": {"level3": 1.2}}])
def test_a_stop_or_capture_price_out_of_range_is_refused(tmp_path: Path,
                                                         protocol: dict[str, Any]) -> None:
    with pytest.raises(CampaignError, match=r"protocol\.(expected_stop_s|capture_overhead)"):
        load_campaign(_host(tmp_path, lambda data: data["protocol"].update(protocol)))


def test_absent_price_fields_stay_out_of_the_lock() -> None:
    canonical = load_campaign(REFERENCE).model.model_dump(mode="json")
    assert "measured" not in canonical
    assert not {"expected_stop_s", "capture_overhead"} & set(canonical["protocol"])
    assert "scoring" not in canonical  # the default, left out as before


def test_plan_changes_with_the_stop_price_and_names_localization_in_the_mix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bound = _plan(HOST, capsys)
    cheaper = _plan(_host(tmp_path, lambda d: d["protocol"].update(
        expected_stop_s={"5s": 30, "15s": 30})), capsys)
    search = [line for line in bound.splitlines() if line.startswith("  ")]
    assert search != [line for line in cheaper.splitlines() if line.startswith("  ")]
    assert "engine stop: 5s 30 s, 15s 30 s - estimate" in cheaper
    assert ("  localization in the outcome mix: each of the 7 lossless directions that fails its "
            "gate starts a pass (0.97 wall-h each, its stops in): 3.5 expected at the mix, its "
            "capture overhead unpriced") in bound
    # Unpriced overhead: the figures that include a pass are lower bounds, never a worst case.
    assert "  each direction at its costliest outcome: at least " in bound
    assert "  what-if, each price alone (the others as priced): the search fits up to" in bound


def test_scoring_on_the_cpu_costs_wall_time_and_no_device_hours() -> None:
    campaign = load_campaign(HOST)
    plans = {t: p for t, p in plan_campaign(campaign).items() if t == "5s-lossy"}
    cpu = Prices.of(campaign)
    costs = campaign_costs(plans, cpu)
    scoring = sum(c.scoring_s for c in costs)
    assert scoring > 0
    wall = sum(c.host_s_at_target or 0 for c in costs)
    device = device_seconds(costs, cpu, 4)
    assert device is not None and device[0] == pytest.approx((wall - scoring) * 4)
    npu = dataclasses.replace(cpu, scoring_device="npu:0")
    on_npu = device_seconds(campaign_costs(plans, npu), npu, 4)
    assert on_npu is not None and on_npu[0] == pytest.approx((wall - scoring) * 4 + scoring)


def test_each_what_if_value_is_where_the_search_stops_fitting() -> None:
    campaign = load_campaign(HOST)
    plans = dict(plan_campaign(campaign))
    prices = Prices.of(campaign)
    # Host-like: a 300 s start, scoring at 5% of the two-core CPU's price, a measured overhead.
    prices = dataclasses.replace(
        prices, start_s={"5s": 300.0, "15s": 300.0},
        scoring_s={d: {k: v * 0.05 for k, v in dims.items()}
                   for d, dims in prices.scoring_s.items()},
        capture_overhead={"level1": 1.1, "level2": 1.3})
    pricer = pass_pricer(4)
    found = search_cost(campaign, plans, prices, pricer, 4)
    assert found is not None and found.worst_s is not None
    table = what_if(campaign, plans, found, pricer, 16, 64)
    labels = [k.label for k, _, _ in table]
    assert labels == ["engine start (5s)", "engine stop (5s)", "request (5s)",
                      "scoring one output (5s, cpu)", "capture overhead level 1",
                      "capture overhead level 2"]
    checked = 0
    for knob, worst, mix in table:
        for pick, limit in (("worst", worst), ("mix", mix)):
            if limit is None or limit == float("inf"):
                continue
            at = search_cost(campaign, plans, knob.set(prices, limit), pricer, 4)
            assert at is not None
            wall, device = getattr(at, f"{pick}_s"), getattr(at, f"{pick}_device_s")
            # At the value the table gives, one ceiling is met exactly and none is passed.
            fill = max(wall / (16 * 3600), device / (64 * 3600))
            assert fill == pytest.approx(1.0), (knob.label, pick)
            checked += 1
    assert checked >= 6


def test_a_campaign_without_prices_prints_no_bringup_figure(capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    out = _plan(REFERENCE, capsys)
    line = next(x for x in out.splitlines() if x.startswith("bring-up"))
    assert "worst case" not in line and "wall-h" not in line
    assert ": not priced: the campaign freezes no protocol.expected_start_s (5s, 15s); " in line
    assert "search:" not in out  # the reference campaign declares none
