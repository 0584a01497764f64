"""The run's evidence: the session's run state, the `evidence` bundle fixture, the per-track verdict
fixture, checkpoints of evidence.json, and the run's end (verdicts, status, the campaign's
ledger, scrub, `latest`).

The bundle is made on first use under evidence/<run-id>/, so a session that runs no campaign
scenario writes no run folder.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Generator
from pathlib import Path

import pytest

from ref2va_accept.arms import scenario_item
from ref2va_accept.campaign import quality_class
from ref2va_accept.core import Ref2VAError, WriteFailed
from ref2va_accept.evidence import (
    WRITE_FAILED,
    EvidenceBundle,
    RunStatus,
    TrackVerdict,
    new_run_id,
)
from ref2va_accept.history import LEDGER_ENV, candidate_entries, ledger_path, read_ledger, run_entry
from ref2va_accept.history import append as append_to_ledger
from ref2va_accept.judging import judge
from ref2va_accept.plugin import _engines as engines
from ref2va_accept.plugin._selection import campaign_path, is_campaign_item
from ref2va_accept.plugin._state import STATE, RunState, run_state


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ref2va", "Ref2VA acceptance campaign")
    group.addoption("--evidence-dir", default="evidence", metavar="DIR",
                    help="folder under which each run writes evidence/<run-id>/ (default: "
                         "evidence, relative to the rootdir)")
    group.addoption("--ledger", default=None, metavar="FILE",
                    help="the campaign's ledger each run appends its candidate attempts to "
                         f"(default: ${LEDGER_ENV}, else <campaign>.ledger.jsonl beside the "
                         "campaign)")
    group.addoption("--run-id", default=None, metavar="ID",
                    help="name this run (its folder evidence/<ID>) instead of a UTC time stamp "
                         "and six random hex digits: letters, digits, '.', '_' and '-', not "
                         "starting with '.'; refused when the folder exists")
    group.addoption("--ref2va-skip-disk-check", action="store_true", default=False,
                    help="start the run even when the evidence folder's filesystem has less "
                         "free space than the run's estimated evidence needs (recorded)")


RUN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    evidence_root = Path(config.getoption("evidence_dir"))
    if not evidence_root.is_absolute():
        evidence_root = config.rootpath / evidence_root
    run_id = config.getoption("run_id")
    if run_id is None:
        run_id = new_run_id()
    elif not RUN_ID.fullmatch(run_id) or run_id == "latest":
        raise pytest.UsageError(f"ref2va: --run-id {run_id!r}: letters, digits, '.', '_' and "
                                "'-' only, not starting with '.' (and not 'latest')")
    elif (evidence_root / run_id).exists():
        raise pytest.UsageError(f"ref2va: --run-id {run_id}: {evidence_root.name}/{run_id} "
                                "exists already; a run never writes into another's folder")
    config.stash[STATE] = RunState(config, run_id, evidence_root, campaign_path(config))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    # evidence.json is a checkpoint of the event log: written at each test's end (after its
    # teardown, failed or not), at each instance stop and at the run's end, not at every event.
    try:
        return (yield)
    finally:
        state = item.config.stash.get(STATE, None)
        if state is not None and state.bundle is not None:
            with contextlib.suppress(WriteFailed):  # said once by the bundle; the run stops
                state.bundle.checkpoint()
            if state.bundle.failures:
                item.session.shouldstop = (f"ref2va: {state.failure_line(state.bundle.failures[0])}"
                                           f" (status {WRITE_FAILED})")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    # A failed write is one line (file and error), said on the terminal when it happened; the
    # test's report says the same instead of the traceback through the harness.
    report = yield
    if (call.excinfo is not None and isinstance(call.excinfo.value, WriteFailed)
            and isinstance(report, pytest.TestReport)):
        state = item.config.stash.get(STATE, None)
        failure = call.excinfo.value
        report.longrepr = f"ref2va: {state.failure_line(failure) if state else failure}"
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Before the first scenario (so before any engine): every track's inputs against their
    pins, then the run's estimated evidence size against the free disk, then the run against
    the campaign's budget. A mismatch is recorded (notes, `inputs` checks), too little disk or
    budget too (a note, `disk` or `budget`), and the run stops as a usage error with one line
    per input or the disk's or budget's one line; the session still ends with its status
    (`stopped`), verdicts and report."""
    state = session.config.stash.get(STATE, None)
    if (state is None or session.config.option.collectonly or session.testsfailed
            or not any(is_campaign_item(item) for item in session.items)):
        return  # pytest's own loop reports collection errors; the harness's tests need no inputs
    tracks = [str(item.callspec.params["track_id"]) for item in session.items
              if isinstance(item, pytest.Function) and hasattr(item, "callspec")
              and "track_id" in item.callspec.params]
    state.selected_tracks.update(tracks)
    try:
        state.warn_stand_ins(dict.fromkeys(tracks))
        stop = state.check_inputs(dict.fromkeys(tracks))
        if stop is None:
            stop = state.check_disk([scenario_item(item) for item in session.items],
                                    dict.fromkeys(tracks),
                                    skip=bool(session.config.getoption("ref2va_skip_disk_check")))
        if stop is None:
            stop = state.check_budget(dict.fromkeys(tracks),
                                      ledger_file(session.config, state))
    except WriteFailed as exc:
        raise pytest.UsageError(f"ref2va: {state.failure_line(exc)}") from None
    if stop is not None:
        raise pytest.UsageError(stop)


# -- fixtures ------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def evidence(pytestconfig: pytest.Config) -> EvidenceBundle:
    """The run's evidence bundle, created on first use under evidence/<run-id>/."""
    return run_state(pytestconfig).evidence()


@pytest.fixture
def track_verdict(pytestconfig: pytest.Config, evidence: EvidenceBundle
                  ) -> Callable[[str, str], TrackVerdict]:
    """The verdict of a candidate in a track from every check recorded so far in this run."""
    state = run_state(pytestconfig)

    def verdict(track_id: str, candidate: str) -> TrackVerdict:
        state.ran_tracks.add(track_id)
        state.judge_timed_outputs([track_id])
        return judge(track_id, quality_class(track_id), candidate, evidence.checks,
                     state.verdict_caps)

    return verdict


# -- end of run ----------------------------------------------------------------------------------
@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(STATE, None)
    if state is None:
        return
    # Last resort: anything still running (Ctrl-C mid-request) is stopped and audited before the
    # verdicts and the report; the fixtures' own teardown then finds the audit already done.
    engines.stop_all(session.config)
    if state.bundle is not None:
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        status: RunStatus = ("stopped" if state.stopped else "interrupted" if interrupted
                             else "complete")
        state.bundle.finish(status, state.verdicts)
        _append_to_ledger(session.config, state)


def ledger_file(config: pytest.Config, state: RunState) -> Path:
    """--ledger, else $REF2VA_LEDGER, else <campaign>.ledger.jsonl beside the campaign."""
    option = config.getoption("ledger") or os.environ.get(LEDGER_ENV)
    return Path(option) if option else ledger_path(state.campaign_path)


def _append_to_ledger(config: pytest.Config, state: RunState) -> None:
    """This run's candidate attempts onto the campaign's ledger, whatever the run's status, and
    the campaign's record as read back into the evidence (the report lists it)."""
    bundle = state.bundle
    if bundle is None or state.unusable is not None:
        return
    path = ledger_file(config, state)
    try:
        lock = state.freeze.lock_sha256
        new = [*candidate_entries(bundle, state.campaign, campaign_lock=lock),
               run_entry(bundle, state.campaign, campaign_lock=lock)]
        append_to_ledger(path, new)
        record = read_ledger(path)
        bundle.set_section("ledger", {"file": state.display(path), "appended": len(new),
                                      "torn_tail": record.torn_tail,
                                      "history": [e.json_dict() for e in record.entries]})
        bundle.checkpoint()
    except WriteFailed as failure:
        # The bundle's own writes record and say their failure once; the ledger's file is new.
        if failure not in bundle.failures:
            bundle.fail_late(failure)
    except Ref2VAError as exc:  # a ledger that cannot be read back: said, the run keeps its end
        bundle.note(f"ledger {state.display(path)}: {exc}")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None:
        return
    engines.stop_all(config)
    if state.bundle is not None:
        with contextlib.suppress(WriteFailed):  # said once; that file stays as it was
            state.bundle.sanitize_files()
        latest = state.evidence_root / "latest"
        try:
            if latest.is_symlink() or not latest.exists():
                latest.unlink(missing_ok=True)
                latest.symlink_to(state.run_id)
        except OSError as exc:
            state.say_failure(WriteFailed(latest, exc))
    # After the scrub: a judge killed before this point leaves its reaper to finish the folder.
    state.close_reaper()
