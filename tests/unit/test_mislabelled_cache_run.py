"""The 5 s lossless track's mislabelled candidate (Cache-DiT under a lossless label), run as a
user runs its quality and verdict scenarios, on a 4-step copy of the reference campaign; and the
campaign's ledger over two such runs (what test_ledger.py checks without an engine, here as runs
append it).

Its failure rests on what the server says it enabled and on its outputs, not on latency, so it
runs outside the timed self-test (test_lossless_suite.py judges the track's other two candidates,
whose verdicts rest on measured latency). Its profile lets Cache-DiT cache from the third step
on, so four steps are enough for it to cache.

The two runs of the ledger's test are the module's two sessions (:func:`runs`): the first judges
mislabelled-cache (what its own test reads), the second lossless-text-kv, each against its own
B0 on the same frozen copy, both appending to one ledger. Each was a session of its own before
(mislabelled-cache's, and the ledger's first run, which judged lossless-text-kv as its second
does): one B0 and one session fewer, and each of the ledger's runs still judges a candidate.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ref2va_accept.campaign import freeze
from ref2va_accept.history import _ledger as ledger
from tests.unit.plugin_sessions import Session, judge_5s_lossless
from tests.unit.suite_runner import CHEAP_STEPS, bundle, campaign_variant


@dataclass(frozen=True)
class Run:
    """One session of the module: its outcome, evidence folder, bundle and report (read when
    the session ended: `ref2va-accept localize` adds a folder beside the run afterwards)."""

    result: Session
    evidence: Path
    found: dict[str, Any]
    report: str


@dataclass(frozen=True)
class Runs:
    folder: Path
    campaign: Path
    book: Path  # the ledger both runs append to
    runs: tuple[Run, Run]  # mislabelled-cache judged, then lossless-text-kv


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    folder = tmp_path_factory.mktemp("lossless-runs")
    campaign = campaign_variant(folder / "c", steps=CHEAP_STEPS)
    freeze(campaign)  # judged as frozen, so that a defect fails it (else: protocol_not_frozen)
    book = folder / "record.ledger.jsonl"
    done = []
    for n, candidate in ((1, "mislabelled-cache"), (2, "lossless-text-kv")):
        evidence = folder / f"evidence{n}"
        result = judge_5s_lossless(campaign, evidence, candidate, "--ledger", str(book))
        found = bundle(evidence)
        report = (evidence / found["run_id"] / "report.html").read_text()
        done.append(Run(result, evidence, found, report))
    return Runs(folder, campaign, book, (done[0], done[1]))


def _checks(evidence: dict[str, Any], arm: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in evidence["checks"] if c["arm"] == arm}


def test_mislabelled_candidate_fails_the_enabled_path_audit(runs: Runs) -> None:
    campaign = runs.campaign
    result, evidence, found = runs.runs[0].result, runs.runs[0].evidence, runs.runs[0].found
    assert result.returncode == 1, result.stdout[-3000:]
    assert ("FAILED tests/verdicts/test_track_verdicts.py::test_track_verdict[5s-lossless:"
            "mislabelled-cache]") in result.stdout
    checks = _checks(found, "mislabelled-cache")
    audit = checks["enabled_path_audit"]
    assert audit["status"] == "fail" and audit["reason"] == "enabled_path_mismatch"
    assert "cache_dit" in audit["detail"]
    assert checks["lossless_gate"]["data"]["first_divergence"].startswith("dit.step")
    verdict = next(v for v in found["verdicts"] if v["candidate"] == "mislabelled-cache")
    assert verdict["verdict"] == "failed" and "enabled_path_mismatch" in verdict["reasons"], verdict
    # The localization pass names where cached outputs were reused: the middle blocks
    # (Fn_compute_blocks 1, Bn 0: blocks 1 to 5) did not run at the first cached step.
    where = checks["localization"]
    assert where["status"] == "pass", where["detail"]
    assert where["data"]["level1"]["kind"] == "not_run"
    assert where["data"]["level1"]["skipped"][:5] == [f"dit.blocks.{i}" for i in range(1, 6)]
    assert "ran in B0 but not in the candidate" in where["detail"]
    # the picture: the DiT's output at the step where the runs part, from level 1's own dumps
    step = where["data"]["step"]
    assert where["data"]["picture_of"] == f"dit.step{step:03d} (level 1's dumps)"
    assert where["data"]["picture"]["differing"] > 0
    # and its figures (no module to name: the candidate computed none at that step)
    figures = where["data"]["figures"]
    assert figures["name"] == where["data"]["picture_of"]
    assert figures["differing"] == where["data"]["picture"]["differing"]
    assert verdict["localized"].startswith("dit.blocks.1 ")

    # `ref2va-accept localize` runs the pass again from the finished run and finds the same.
    run = next(p for p in evidence.iterdir() if (p / "evidence.json").is_file()
               and not p.name.startswith("localize-"))
    again = subprocess.run([sys.executable, "-m", "ref2va_accept.cli", "localize", str(run),
                            "--track", "5s-lossless", "--candidate", "mislabelled-cache",
                            "--campaign", str(campaign), "--json"],
                           capture_output=True, text=True, timeout=600, check=False)
    assert again.returncode == 0, again.stderr[-2000:]
    record = json.loads(again.stdout)
    assert record["check"]["data"]["level1"]["skipped"] == where["data"]["level1"]["skipped"]
    assert (evidence / record["folder"] / "localize.html").is_file()
    # A candidate that did not fail on bit-exactness is refused, by name.
    refused = subprocess.run([sys.executable, "-m", "ref2va_accept.cli", "localize", str(run),
                              "--track", "5s-lossless", "--candidate", "lossless-text-kv",
                              "--campaign", str(campaign)],
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0 and "lossless-text-kv" in refused.stderr
    # B0's profile changed since the run (its lock drifted): not the same launch line, refused.
    # (Both of the module's sessions have run: the fixture ran them before any test.)
    b0 = campaign.parent / "b0.yaml"
    b0.write_text(b0.read_text() + "# edited after the run\n")
    drifted = subprocess.run([sys.executable, "-m", "ref2va_accept.cli", "localize", str(run),
                              "--track", "5s-lossless", "--candidate", "mislabelled-cache",
                              "--campaign", str(campaign)],
                             capture_output=True, text=True, timeout=60, check=False)
    assert drifted.returncode != 0 and "profiles or inputs are not the ones" in drifted.stderr


def test_a_run_appends_its_attempts_and_the_report_lists_the_record(runs: Runs) -> None:
    # The campaign's ledger (test_ledger.py) as two runs append to it, one after the other.
    book = runs.book
    for n, run in enumerate(runs.runs, start=1):
        result, found, report = run.result, run.found, run.report
        assert result.returncode == 1, result.stdout[-3000:]  # other candidates: inconclusive
        # Three attempts (one per candidate of the track) and the run's own entry.
        assert found["ledger"]["appended"] == 4 and len(found["ledger"]["history"]) == 4 * n
        this = [e for e in found["ledger"]["history"] if e["run_id"] == found["run_id"]]
        tried = [e for e in this if e["kind"] == "attempt"]
        assert {e["candidate"]: e["verdict"] for e in tried} == {
            v["candidate"]: v["verdict"] for v in found["verdicts"] if v["candidate"]}
        assert all(e["run_status"] == "complete" for e in this)
        cost = next(e for e in this if e["kind"] == "run")
        # Charged: the session's wall time and every instance's lifetime (no devices on CPU).
        lifetimes = [i["cleanup"]["lifetime_s"] for i in found["instances"]]
        assert cost["instances"] == len(lifetimes) >= 2 and all(t > 0.5 for t in lifetimes)
        assert cost["instance_s"] == pytest.approx(sum(lifetimes), abs=0.01)
        assert cost["devices"] == 0 and cost["device_s"] == 0 and cost["wall_s"] > 1
        assert found["budget"]["spent_before"]["runs"] == n - 1
        assert "Campaign record" in report and report.count("(this run)") == 3
    entries = ledger.read_ledger(book).entries
    assert len({e.run_id for e in entries}) == 2 and len(ledger.attempts(entries)) == 6
    assert str(runs.folder) not in book.read_text()
