"""The steps a session's RunState runs, each owned by its stage and tested here without pytest
sessions or engines: the inputs check, the cleanup check, the disk check's skipped note, the
memory guard of a campaign's devices, the leftovers' note, the run's verdict rows and their
attempt numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from ref2va_accept.campaign import input_checks
from ref2va_accept.core import ArmRole, Check, CheckStatus, Reason, Verdict
from ref2va_accept.engines import MemoryGuard, MemoryRelease, NoDeviceProbe, stopped_line
from ref2va_accept.evidence import (
    Cleanup,
    InputProblem,
    LedgerEntry,
    Leftover,
    ProcessRecord,
)
from ref2va_accept.history import LEDGER_SCHEMA, with_attempt
from ref2va_accept.judging import judge_tracks
from ref2va_accept.planning import DiskEstimate, disk_record, disk_skipped_line
from tests.unit.check_records import make_check

pytestmark = pytest.mark.fast

SHA_A, SHA_B = "a" * 64, "b" * 64


def test_input_problems_fail_each_track_they_touch_once_on_b0() -> None:
    def problem(track: str, name: str, path: str, found: str | None,
                unreadable: str | None = None) -> InputProblem:
        return InputProblem(track=track, field=name, path=path, expected_sha256=SHA_A,
                            found_sha256=found, unreadable=unreadable)

    problems = [problem("5s-lossless", "image", "inputs/ref.png", SHA_B),
                problem("5s-lossy", "image", "inputs/ref.png", SHA_B),
                problem("5s-lossless", "audio", "inputs/ref.wav", None, "no such file")]
    checks = input_checks(problems)
    assert [(c.track, c.arm, c.name, c.status, c.reason) for c in checks] == [
        ("5s-lossless", ArmRole.B0, Check.INPUTS, CheckStatus.FAIL, Reason.PROTOCOL_DEVIATION),
        ("5s-lossy", ArmRole.B0, Check.INPUTS, CheckStatus.FAIL, Reason.PROTOCOL_DEVIATION)]
    assert len(checks[0].json_dict()["data"]["inputs"]) == 2 and "no such file" in checks[0].detail
    assert input_checks([]) == []


def _audit(problems: tuple[str, ...]) -> Cleanup:
    killed = [ProcessRecord(pid=43, name="python", status="zombie")] if problems else []
    return Cleanup(arm="cand", instance="5s-lossy.cand.1", pid=42, exit_code=0,
                   processes_seen=3, needed_sigkill=killed, survivors=[], port_free=True,
                   stop_s=1.235, lifetime_s=None, clean=not problems, problems=list(problems),
                   steps=[])


def test_a_clean_stop_passes_its_cleanup_check_and_a_dirty_one_fails_it() -> None:
    clean = _audit(()).check()
    assert (clean.track, clean.arm, clean.name, clean.status, clean.reason) == (
        "5s-lossy", "cand", Check.CLEANUP, CheckStatus.PASS, None)
    assert clean.json_dict()["data"] == {"instance": "5s-lossy.cand.1", "stop_s": 1.235}
    dirty = _audit(("port 8000 still bound", "1 survivor")).check()
    assert (dirty.status, dirty.reason) == (CheckStatus.FAIL, Reason.INCOMPLETE_CLEANUP)
    assert dirty.detail == "port 8000 still bound; 1 survivor"


def test_a_skipped_disk_check_says_what_it_found() -> None:
    result = disk_record(DiskEstimate((), 0), Path("evidence"), 10 * 10**9, skipped=True)
    line = disk_skipped_line(result, "evidence")
    assert line.startswith("ref2va: disk check skipped (--ref2va-skip-disk-check): needs about")
    assert "10 GB free on the filesystem of evidence" in line


def test_the_memory_guard_of_a_campaign_without_devices_does_nothing() -> None:
    guard = MemoryGuard.for_devices("none", [], MemoryRelease())
    assert isinstance(guard.probe, NoDeviceProbe) and not guard.applicable
    assert guard.after_stop("5s-lossy", "b0", "5s-lossy.b0.1") is None
    npu = MemoryGuard.for_devices("npu", [0, 1], MemoryRelease())
    assert npu.applicable and npu.devices == (0, 1)


def test_leftovers_are_named_by_pid_tag_and_how_they_stopped() -> None:
    line = stopped_line([
        Leftover(pid=7, name="python", tag="run1.5s-lossy.b0.1", stopped_by="SIGTERM"),
        Leftover(pid=8, name="python", tag="run1.5s-lossy.b0.1", stopped_by="SIGKILL")])
    assert line == ("stopped 2 engine process(es) left by a dead run: python[7] "
                    "(run1.5s-lossy.b0.1, SIGTERM), python[8] (run1.5s-lossy.b0.1, SIGKILL)")


def test_the_run_gets_a_row_per_candidate_and_one_for_a_track_without_any() -> None:
    failed = make_check("5s-lossless", "cand", Check.LOSSLESS_GATE, CheckStatus.FAIL,
                        Reason.QUALITY_GATE_FAILED)
    rows = judge_tracks([("5s-lossless", "lossless", ["cand", "other"]),
                         ("15s-lossy", "lossy", [])], [failed], [], 0.05)
    assert [(r.track, r.candidate) for r in rows] == [
        ("5s-lossless", "cand"), ("5s-lossless", "other"), ("15s-lossy", None)]
    assert rows[0].verdict is Verdict.FAILED
    assert rows[1].verdict is Verdict.INCONCLUSIVE  # nothing ran for it: open checks
    assert all(r.holm is not None for r in rows[:2]) and rows[2].holm is None


def test_an_attempt_is_numbered_from_the_campaigns_earlier_attempts_only() -> None:
    row = judge_tracks([("5s-lossless", "lossless", ["cand"])], [], [], 0.05)[0]
    ledger = [LedgerEntry.model_validate({"schema": LEDGER_SCHEMA, "run_status": "complete", **e})
              for e in (
        {"kind": "attempt", "campaign": "c", "track": "5s-lossless", "candidate": "cand",
         "run_id": "r1", "verdict": "failed", "reasons": ["quality_gate_failed"]},
        # written before runs had entries of their own: no kind, an attempt
        {"campaign": "c", "track": "5s-lossless", "candidate": "cand", "run_id": "r2",
         "verdict": "inconclusive", "reasons": []},
        {"kind": "run", "campaign": "c", "run_id": "r2"},
        {"kind": "attempt", "campaign": "other", "track": "5s-lossless", "candidate": "cand",
         "run_id": "r0", "verdict": "supported"},
        {"kind": "attempt", "campaign": "c", "track": "5s-lossy", "candidate": "cand",
         "run_id": "r1", "verdict": "supported"},
    )]
    numbered = with_attempt(row, "c", ledger)
    assert numbered.attempt == 3
    assert numbered.earlier == ("r1: failed (quality_gate_failed)", "r2: inconclusive")
    assert with_attempt(row, "c", []).attempt == 1
    none = judge_tracks([("15s-lossy", "lossy", [])], [], [], 0.05)[0]
    assert with_attempt(none, "c", ledger) is none
