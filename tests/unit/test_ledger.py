"""The campaign's ledger: the candidate record in the campaign, one entry per candidate attempt
appended at each run's end whatever its status, never rewritten, printed by `ref2va-accept
ledger` and listed in the report.

Two runs appending to one ledger, as a user runs them, are checked in
test_mislabelled_cache_run.py (test_a_run_appends_its_attempts_and_the_report_lists_the_record):
the first of its two sessions of the 5 s lossless track (on one frozen 4-step copy) is the one
that judges mislabelled-cache, which had a session of its own before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ref2va_accept.campaign import load_campaign
from ref2va_accept.cli import main
from ref2va_accept.core import CampaignError
from ref2va_accept.evidence import EvidenceBundle, TrackVerdict
from ref2va_accept.evidence.sanitize import Sanitizer
from ref2va_accept.history import _ledger as ledger
from ref2va_accept.judging import judge_latency
from tests.unit.check_records import make_check
from tests.unit.latency_doubles import INSTANCE, latency_run
from tests.unit.plugin_sessions import run_in_checkout
from tests.unit.suite_runner import (
    CHEAP_STEPS,
    ROOT,
    bundle,
    campaign_variant,
)

REFERENCE = ROOT / "fixtures/campaigns/reference.yaml"


def _copy_with(tmp_path: Path, **candidate: Any) -> Path:
    path = campaign_variant(tmp_path / "c")
    data = yaml.safe_load(path.read_text())
    data["candidates"][0].update(candidate)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.fast
def test_a_scope_change_needs_a_recorded_scope_decision(tmp_path: Path) -> None:
    with pytest.raises(CampaignError, match=r"candidates\[0\]\.scope_decision: a recorded scope "
                                            r"decision .* found none"):
        load_campaign(_copy_with(tmp_path / "a", change_class="scope_change"))
    decided = {"decided_by": "the requester", "decided_at": "2026-11-30",
               "decision": "25 steps instead of 50 may be judged on the lossy tracks"}
    loaded = load_campaign(_copy_with(tmp_path / "b", change_class="scope_change",
                                      scope_decision=decided))
    assert loaded.model.candidates[0].scope_decision is not None
    with pytest.raises(CampaignError, match="no scope decision unless change_class is scope_chan"):
        load_campaign(_copy_with(tmp_path / "c", change_class="quantization",
                                 scope_decision=decided))
    with pytest.raises(CampaignError, match=r"change_class: Input should be 'implementation'"):
        load_campaign(_copy_with(tmp_path / "d", change_class="faster"))


@pytest.mark.fast
def test_the_baseline_carries_no_candidate_record(tmp_path: Path) -> None:
    path = campaign_variant(tmp_path / "c")
    data = yaml.safe_load(path.read_text())
    data["baseline"]["change_class"] = "implementation"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(CampaignError, match="no candidate record on the baseline"):
        load_campaign(path)


@pytest.mark.fast
def test_every_shipped_candidate_has_its_record() -> None:
    for name in ("reference.yaml", "910c.yaml"):
        for arm in load_campaign(ROOT / "fixtures/campaigns" / name).model.candidates:
            assert arm.hypothesis and arm.attribution and arm.change_class, (name, arm.id)


def _bundle(tmp_path: Path, status: str) -> EvidenceBundle:
    found = EvidenceBundle.create(tmp_path / "evidence", "20261201T000000Z-abcdef",
                                  Sanitizer((), ()))
    runs = [latency_run("b0", [300], warmups=[340, 305]),
            latency_run("lossless-text-kv", [140], [150]),
            latency_run("b0", [310]), latency_run("lossless-text-kv", [139]),
            latency_run("b0", [295]), latency_run("lossless-text-kv", [142])]
    for check in judge_latency("5s-lossless", "lossless-text-kv", runs, INSTANCE):
        found.add_check(check)
    found.add_check(make_check("5s-lossless", "reduction-order", "lossless_gate", "fail",
                               "quality_gate_failed", "not bit-exact",
                               {"seed": 42, "points": [], "first_divergence": "dit.step000"}))
    found.finish(status, lambda checks: [
        TrackVerdict(track="5s-lossless", candidate="lossless-text-kv", verdict="supported",
                     reasons=("latency_supported",), open_checks=(), checks={}),
        TrackVerdict(track="5s-lossless", candidate="reduction-order", verdict="failed",
                     reasons=("quality_gate_failed",), open_checks=(), checks={}),
        TrackVerdict(track="5s-lossless", candidate=None, verdict="inconclusive",
                     reasons=("open_checks",), open_checks=(), checks={})])
    return found


@pytest.mark.fast
@pytest.mark.parametrize("status", ["complete", "interrupted", "stopped"])
def test_each_candidate_verdict_is_an_entry_whatever_the_run_status(tmp_path: Path,
                                                                     status: str) -> None:
    entries = ledger.candidate_entries(_bundle(tmp_path, status), load_campaign(REFERENCE),
                                       campaign_lock="c" * 64)
    assert [(e.candidate, e.verdict) for e in entries] == [
        ("lossless-text-kv", "supported"), ("reduction-order", "failed")]  # no track-only row
    first, second = entries
    assert {e.run_status for e in entries} == {status}
    latency = first.latency
    assert latency is not None and latency.verdict == "supported" and latency.target == 0.5
    assert latency.ratio_of_medians is not None and round(latency.ratio_of_medians, 3) == 0.467
    assert latency.lower is not None and latency.upper is not None
    assert (round(latency.lower, 3), round(latency.upper, 3)) == (0.448, 0.481)
    assert first.change_class == "implementation" and first.hypothesis
    assert first.attribution is not None and first.attribution["kind"] == "local_patch"
    # What it changes against B0's launch profile.
    assert first.profile_diff is not None and first.profile_diff["declared"] == "lossless"
    assert second.quality == {"gate": "lossless_gate", "status": "fail",
                              "reason": "quality_gate_failed", "detail": "not bit-exact",
                              "first_divergence": "dit.step000"}
    assert second.latency is None
    # The line each is appended as holds every key it was made with, none added.
    line = ledger.entry_json(first)
    assert line["latency"] == {"lower": latency.lower, "ratio_of_medians": latency.ratio_of_medians,
                               "target": 0.5, "upper": latency.upper, "verdict": "supported"}
    assert list(line) == sorted(line) and line["schema"] == ledger.LEDGER_SCHEMA


@pytest.mark.fast
def test_entries_are_appended_never_rewritten_and_a_torn_tail_is_said(tmp_path: Path) -> None:
    path = tmp_path / "c.ledger.jsonl"
    entries = ledger.candidate_entries(_bundle(tmp_path / "a", "complete"),
                                       load_campaign(REFERENCE), campaign_lock=None)
    ledger.append(path, entries)
    before = path.read_bytes()
    ledger.append(path, entries[:1])
    assert path.read_bytes().startswith(before) and len(ledger.read_ledger(path).entries) == 3
    with path.open("a") as handle:
        handle.write('{"schema": "ref2va-ledger/1", "run_')  # a run killed mid-append
    record = ledger.read_ledger(path)
    assert record.torn_tail and len(record.entries) == 3
    assert record.entries[0] == entries[0]  # read back as it was appended
    path.write_bytes(before + b"not json\n" + before)
    with pytest.raises(ledger.LedgerError, match=r"c\.ledger\.jsonl: line 3: not a ledger "
                                                 r"entry \(Invalid JSON"):
        ledger.read_ledger(path)
    # A line that is JSON but not an entry of the records, and one a field of which is wrong.
    path.write_bytes(before + b'{"schema": "other/1"}\n')
    with pytest.raises(ledger.LedgerError, match=r"line 3: not a ledger entry \(schema: Input "
                                                 r"should be 'ref2va-ledger/1'\)$"):
        ledger.read_ledger(path)
    path.write_bytes(before + b'{"schema": "ref2va-ledger/1", "run_id": "r", '
                              b'"run_status": "complete", "attempt": "second"}\n')
    with pytest.raises(ledger.LedgerError, match=r"line 3: not a ledger entry \(attempt: Input "
                                                 r"should be a valid integer"):
        ledger.read_ledger(path)
    assert ledger.read_ledger(tmp_path / "none.jsonl").entries == ()


@pytest.mark.fast
def test_the_ledger_command(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ledger.LEDGER_ENV, raising=False)
    campaign = campaign_variant(tmp_path / "c")
    assert main(["ledger", str(campaign)]) == 0
    assert "no entries yet" in capsys.readouterr().out
    entries = ledger.candidate_entries(_bundle(tmp_path, "interrupted"), load_campaign(REFERENCE),
                                       campaign_lock=None)
    ledger.append(ledger.ledger_path(campaign), entries)
    assert main(["ledger", str(campaign)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["at", "run", "status", "track"]
    assert "interrupted" in out[1] and "SUPPORTED" in out[1] and "0.467 [0.448, 0.481]" in out[1]
    assert "reduction-order" in out[2] and "FAILED" in out[2]
    assert main(["ledger", str(campaign), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["entries"]) == 2
    assert main(["ledger", str(tmp_path / "none.yaml")]) == 2


def test_a_ledger_that_cannot_be_written_fails_the_run_in_one_line(tmp_path: Path) -> None:
    campaign = campaign_variant(tmp_path / "c", steps=CHEAP_STEPS)
    evidence = tmp_path / "evidence"
    missing = tmp_path / "no-such-folder" / "c.ledger.jsonl"
    result = run_in_checkout("tests/verdicts", "-m", "lossless and 5s", "--campaign",
                             str(campaign), "--evidence-dir", str(evidence), "--ledger",
                             str(missing))
    lines = (result.stdout + result.stderr).splitlines()
    # Said once as it happens, and the terminal summary names the run's status with it.
    said = [line for line in lines if line.startswith("ref2va: cannot write c.ledger.jsonl")]
    assert len(said) == 1, result.stdout[-3000:]
    assert "ref2va: status failed_write: cannot write c.ledger.jsonl: [Errno 2] No such file " \
           "or directory" in lines
    found = bundle(evidence)
    assert found["status"] == "failed_write" and "ledger" not in found
    assert not missing.parent.exists()
