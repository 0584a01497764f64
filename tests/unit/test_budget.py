"""The campaign's budget: spent (the ledger's run entries), planned (the frozen protocol at the
preflight medians) and the ceilings with their recorded authorizations; a run past a ceiling is
refused before any engine starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ref2va_accept.campaign import load_campaign
from ref2va_accept.cli import main
from ref2va_accept.core import CampaignError
from ref2va_accept.evidence import LedgerEntry
from ref2va_accept.history import LEDGER_SCHEMA, append
from ref2va_accept.planning import _budget as budget
from ref2va_accept.planning import plan_campaign
from tests.unit.ledger_entries import ledger_runs
from tests.unit.suite_runner import ROOT, campaign_variant

pytestmark = pytest.mark.fast

HOST = ROOT / "fixtures/campaigns/910c.yaml"
REFERENCE = ROOT / "fixtures/campaigns/reference.yaml"


def test_one_5s_track_fits_a_fresh_budget_and_the_second_does_not() -> None:
    # Starts and scoring priced: one 15 s lossy candidate (27.7 h) no longer fits at all.
    campaign = load_campaign(HOST)
    plans = {k: v for k, v in plan_campaign(campaign).items() if k == "5s-lossless"}
    fresh = budget.check_budget(campaign, plans, [])
    assert fresh.refusal() is None and fresh.devices == 4
    assert fresh.planned_wall_s is not None and 3 < fresh.planned_wall_s[1] / 3600 < 5
    said = "\n".join(budget.budget_lines(fresh))
    assert "every engine start, stop, request and score priced" in said
    # Spent and planned add up: a second run of it would pass 16 wall-hours (and 64 device-h).
    again = budget.check_budget(campaign, plans, ledger_runs(15.2))
    line = again.refusal()
    assert line is not None and "wall-hours (spent 15.20 + planned at most" in line
    assert "> 16" in line and "logical-device-hours" in line and "budget.authorizations" in line
    # Attempts in the ledger cost nothing by themselves; only run entries are charged.
    attempt = LedgerEntry.model_validate({"schema": LEDGER_SCHEMA, "kind": "attempt",
                                          "run_id": "r", "run_status": "complete", "wall_s": 99})
    assert budget.spent([attempt]).wall_s == 0
    assert budget.spent(ledger_runs(2, 1.5)).wall_s == 3.5 * 3600


def test_a_recorded_authorization_raises_the_ceilings(tmp_path: Path) -> None:
    data = yaml.safe_load(HOST.read_text())
    data["budget"]["authorizations"] = [{"by": "the requester", "at": "2026-12-01",
                                         "wall_hours": 16, "device_hours": 64,
                                         "note": "final four-track confirmation"}]
    copy = tmp_path / "910c.yaml"
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    for rel in ("../../engine", "../inputs"):  # the copy resolves the same profiles and inputs
        (tmp_path / rel.split("/")[-1]).symlink_to((HOST.parent / rel).resolve())
    data = yaml.safe_load(copy.read_text())
    for arm in [data["baseline"], *data["candidates"]]:
        arm["profile"] = arm["profile"].replace("../../engine", "engine")
    for track in data["tracks"].values():
        for pinned in track["inputs"].values():
            pinned["path"] = pinned["path"].replace("../inputs", "inputs")
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    campaign = load_campaign(copy)
    plans = {k: v for k, v in plan_campaign(campaign).items() if k == "5s-lossless"}
    result = budget.check_budget(campaign, plans, ledger_runs(15.2))
    assert result.wall_ceiling_h == 32 and result.device_ceiling_h == 128
    assert result.refusal() is None and len(result.authorizations) == 1


def test_an_authorization_says_who_when_and_how_much(tmp_path: Path) -> None:
    path = campaign_variant(tmp_path / "c")
    data = yaml.safe_load(path.read_text())
    data["budget"]["authorizations"] = [{"by": "", "at": "2026-12-01", "wall_hours": 1,
                                         "device_hours": 0}]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(CampaignError, match=r"budget\.authorizations\[0\]\.by"):
        load_campaign(path)


def test_without_preflight_medians_only_what_was_spent_can_refuse() -> None:
    campaign = load_campaign(REFERENCE)  # freezes no expected_request_s
    plans = plan_campaign(campaign)
    unknown = budget.check_budget(campaign, plans, ledger_runs(3, devices=0))
    assert unknown.planned_wall_s is None and unknown.refusal() is None
    assert any("not estimated" in line for line in budget.budget_lines(unknown))
    spent = budget.check_budget(campaign, plans, ledger_runs(10, 7, devices=0))
    assert spent.refusal() is not None and "17.00 wall-hours (spent 17.00) > 16" in spent.refusal()


def test_the_plan_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger_file = tmp_path / "host.ledger.jsonl"
    assert main(["plan", str(HOST), "--track", "5s-lossless", "--file", str(ledger_file)]) == 0
    assert "a run of these tracks would be allowed" in capsys.readouterr().out
    assert main(["plan", str(HOST), "--file", str(ledger_file)]) == 1  # all four: 55.8 h
    assert "over: " in capsys.readouterr().out
    append(ledger_file, ledger_runs(15.2))
    assert main(["plan", str(HOST), "--track", "5s-lossless", "--file", str(ledger_file),
                 "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["refused"].startswith("ref2va: the budget")
    assert main(["plan", str(HOST), "--track", "20s-lossy"]) == 2


