"""A write that fails mid-run (a full disk, simulated by tests/unit/full_disk.py): the writers
undo what they wrote, the run says one line naming the file and the error, ends with status
`failed_write`, its verdicts and the best report that fits, and leaves no temporary file."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from ref2va_accept.core import WriteFailed, append_line, atomic_write, write_new
from ref2va_accept.evidence import WRITE_FAILED, EvidenceBundle, rebuild
from ref2va_accept.evidence.sanitize import Sanitizer
from tests.unit.evidence_schema import read_bundle
from tests.unit.full_disk import FullDisk
from tests.unit.plugin_sessions import MARKS, run_in_checkout, run_plugin
from tests.unit.suite_runner import CHEAP_STEPS, ROOT, campaign_variant

pytest_plugins = ["pytester"]

REFERENCE = ROOT / "fixtures/campaigns/reference.yaml"
ENOSPC = f"[Errno {errno.ENOSPC}] {os.strerror(errno.ENOSPC)}"


def _leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith((".tmp", ".sanitizing"))]


# -- the writers ---------------------------------------------------------------------------------
@pytest.mark.fast
def test_a_failed_append_is_cut_off_and_the_log_stays_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "events.jsonl"
    append_line(log, '{"seq": 1}')
    FullDisk(free=5).install(monkeypatch)
    with pytest.raises(WriteFailed, match=r"events\.jsonl: .*No space left") as caught:
        append_line(log, '{"seq": 2, "a long line": "that does not fit"}')
    assert caught.value.error.errno == errno.ENOSPC
    assert log.read_text() == '{"seq": 1}\n'
    new = tmp_path / "new.jsonl"
    with pytest.raises(WriteFailed):
        append_line(new, "x" * 10)
    assert not new.exists()


@pytest.mark.fast
def test_a_failed_atomic_write_keeps_the_old_file_and_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "evidence.json"
    atomic_write(target, "old\n")
    FullDisk(free=3).install(monkeypatch)
    with pytest.raises(WriteFailed, match=r"evidence\.json"):
        atomic_write(target, "a new text that does not fit\n")
    assert target.read_text() == "old\n" and sorted(tmp_path.iterdir()) == [target]
    media = tmp_path / "a.mp4"
    with pytest.raises(WriteFailed, match=r"a\.mp4"):
        write_new(media, b"\0" * 100)
    assert not media.exists()


def test_the_bundle_names_its_first_failure_once_and_ends_failed_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[WriteFailed] = []
    bundle = EvidenceBundle.create(tmp_path, "20260101T000000Z-abcdef",
                                   Sanitizer.for_this_host(repo=ROOT, evidence=tmp_path),
                                   on_failure=said.append)
    bundle.note("before")
    events = (bundle.folder / "events.jsonl").read_text()
    FullDisk(free=0).install(monkeypatch)
    with pytest.raises(WriteFailed):
        bundle.note("after")
    with pytest.raises(WriteFailed):
        bundle.write_media("5s-lossless", "b0", "x.mp4", b"\0" * 1000)
    bundle.finish("complete", lambda checks: [])
    assert [f.path.name for f in said] == ["events.jsonl"]  # the first only
    assert len(bundle.failures) >= 4  # note, media, verdicts, status, checkpoint
    # The log is as it was (valid: rebuild reads it); the status lives in memory and on the
    # terminal, evidence.json keeps its last checkpoint.
    assert (bundle.folder / "events.jsonl").read_text() == events
    assert rebuild(bundle.folder).notes == ["before"]
    assert bundle.status == WRITE_FAILED
    assert not list((bundle.folder / "media").rglob("*.mp4")) and not _leftovers(bundle.folder)


# -- in a session (pytester, in process) ----------------------------------------------------------
SCENARIO = '''
import pytest

pytestmark = pytest.mark.acceptance


def test_first(track_id, evidence):
    evidence.note("first ran")
    evidence.write_media(track_id, "b0", "big.mp4", b"\\0" * 400_000)


def test_second(track_id, evidence):
    evidence.note("second ran")


def test_judged(track_id, track_verdict):
    track_verdict(track_id, "lossless-text-kv")
'''


@pytest.fixture
def session(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(MARKS)
    pytester.makepyfile(test_scenario=SCENARIO)
    return pytester


def _run(pytester: pytest.Pytester, disk: FullDisk,
         monkeypatch: pytest.MonkeyPatch) -> tuple[pytest.RunResult, Path]:
    evidence = pytester.path / "evidence"
    disk.install(monkeypatch)
    result = run_plugin(pytester, "--campaign", str(REFERENCE), "-m", "5s and lossless",
                        "--evidence-dir", str(evidence),
                        "--ref2va-skip-disk-check")
    runs = [p for p in evidence.iterdir() if not p.is_symlink()]
    assert len(runs) == 1
    return result, runs[0]


def _said(result: pytest.RunResult, name: str) -> list[str]:
    """The terminal's line said when the write failed (the failed test's report repeats it
    without the status)."""
    return [line for line in result.outlines + result.errlines
            if line.startswith("ref2va: cannot write") and name in line
            and line.endswith(f"the run stops, status {WRITE_FAILED}")]


def test_an_mp4_that_does_not_fit_stops_the_run_with_its_line_status_and_report(
        session: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result, run = _run(session, FullDisk(free=300_000), monkeypatch)
    output = "\n".join(result.outlines + result.errlines)
    # One line when it happened: the file under the run folder, the error, the status.
    said = _said(result, "big.mp4")
    assert said == [f"ref2va: cannot write {run.name}/media/5s-lossless/b0/big.mp4: {ENOSPC}; "
                    f"the run stops, status {WRITE_FAILED}"], output
    assert "Traceback" not in output and "OSError" not in output
    result.assert_outcomes(failed=1)  # the others never ran
    bundle = read_bundle(run)
    assert bundle["status"] == WRITE_FAILED and bundle["notes"] == ["first ran"]
    assert rebuild(run).status == WRITE_FAILED  # what fit, fsynced: the log says it too
    assert {v["track"] for v in bundle["verdicts"]} == {"5s-lossless"}
    assert "Ref2VA verdicts per track" in output and f"status {WRITE_FAILED}" in output
    assert "Ref2VA acceptance report" in (run / "report.html").read_text()
    assert not list(run.rglob("*.mp4")) and not _leftovers(run)


def test_a_report_that_does_not_fit_leaves_the_short_report(
        session: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result, run = _run(session, FullDisk(names=("report.html",), times=1), monkeypatch)
    said = _said(result, "report.html")
    assert len(said) == 1 and ENOSPC in said[0]
    report = (run / "report.html").read_text()
    # The full report failed (ENOSPC halfway), the short one fit: status, failure, verdicts.
    assert "Ref2VA acceptance report (short)" in report and WRITE_FAILED in report
    assert "report.html" in report and "<td>5s-lossless</td>" in report
    assert read_bundle(run)["status"] == WRITE_FAILED and not _leftovers(run)


def test_an_event_log_that_fills_keeps_its_valid_events_and_evidence_json_the_status(
        session: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # events.jsonl takes a few events, then refuses every append; evidence.json still fits.
    result, run = _run(session, FullDisk(names=("events.jsonl",), after=4), monkeypatch)
    assert len(_said(result, "events.jsonl")) == 1
    bundle = read_bundle(run)
    assert bundle["status"] == WRITE_FAILED  # in evidence.json, though not in the log
    rebuilt = rebuild(run)  # every line that is there is a whole event
    assert rebuilt.status == "running"
    assert len((run / "events.jsonl").read_text().splitlines()) == 4
    assert not _leftovers(run)


def test_a_disk_full_for_everything_still_says_the_status_on_the_terminal(
        session: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result, run = _run(session, FullDisk(free=12_000), monkeypatch)
    output = "\n".join(result.outlines + result.errlines)
    assert len([line for line in output.splitlines() if line.startswith("ref2va: cannot write")
                and line.endswith(WRITE_FAILED)]) == 1, output
    assert f"ref2va: status {WRITE_FAILED}: cannot write" in output
    assert "Traceback" not in output and "INTERNALERROR" not in output
    rebuild(run)  # what is in the log is valid
    assert not _leftovers(run)


# -- a real scenario, its session in this process -----------------------------------------------
def test_b0_smoke_with_its_mp4_refused_ends_failed_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    evidence = tmp_path / "evidence"
    # The write fails, not the output.
    campaign = campaign_variant(tmp_path / "c", steps=CHEAP_STEPS)
    FullDisk(names=(".mp4",)).install(monkeypatch)
    result = run_in_checkout("-p", "no:randomly", "tests/acceptance", "-m", "5s and lossless",
                             "-k", "b0_returns", "--campaign", str(campaign),
                             "--evidence-dir", str(evidence))
    output = result.stdout + result.stderr
    run = (evidence / "latest").resolve()
    said = [line for line in output.splitlines() if line.startswith("ref2va: cannot write")
            and line.endswith(WRITE_FAILED)]
    assert len(said) == 1 and ".mp4: " in said[0] and ENOSPC in said[0], output[-3000:]
    assert "Traceback" not in output
    bundle = json.loads((run / "evidence.json").read_text())
    assert bundle["status"] == WRITE_FAILED and rebuild(run).status == WRITE_FAILED
    assert bundle["instances"] and all("cleanup" in i for i in bundle["instances"])
    assert (run / "report.html").is_file()
    assert not list(run.rglob("*.mp4")) and not _leftovers(run)
