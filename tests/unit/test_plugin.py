"""The plugin as a user drives it, in pytest sessions of their own with engines: evidence, and
interruption (track selection by marks, which needs no engine: test_plugin_selection.py).

The sessions run in this process (plugin_sessions.run_in_checkout), except the two interrupted
ones: a Ctrl-C and a SIGKILLed engine mid-request act on a session in a process of its own.

One session, B0's 5 s lossless smoke request on an unfrozen cheap copy (:func:`plain_run`), feeds
both the test of the evidence and report it writes and the test of the caps an unfrozen campaign
puts on verdicts: they asked the same run. Every other test runs a session of its own (a faulted,
drifted or interrupted one). The shared run keeps this module out of tests/conftest.py's SPREAD:
its tests run on one worker, one after the other."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from ref2va_accept.evidence import rebuild
from tests.unit.evidence_schema import read_bundle
from tests.unit.plugin_sessions import Session, run_in_checkout
from tests.unit.suite_runner import (
    CHEAP_STEPS,
    ROOT,
    campaign_variant,
    only_run,
    pytest_command,
    tagged,
)


def _b0_smoke(campaign: Path, evidence: Path) -> Session:
    """B0's 5 s lossless smoke request (tests/acceptance/test_b0_output.py) on `campaign`."""
    return run_in_checkout("tests/acceptance/test_b0_output.py", "-m", "lossless and 5s",
                           "--campaign", str(campaign), "--evidence-dir", str(evidence))


def _bundle_of(result: Session, evidence: Path) -> tuple[Path, dict[str, Any]]:
    """A session that passed: its run folder and its evidence."""
    assert result.returncode == 0, result.stdout[-3000:]
    run = next(p for p in evidence.iterdir() if not p.is_symlink())
    return run, read_bundle(run)


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Session]:
    """B0's smoke request on an unfrozen cheap copy of the reference campaign, in one session:
    the folder that holds the copy and the evidence (under `evidence`), and the session."""
    folder = tmp_path_factory.mktemp("plain")
    campaign = campaign_variant(folder / "c", steps=CHEAP_STEPS)
    return folder, _b0_smoke(campaign, folder / "evidence")


def test_run_writes_sanitized_evidence_and_report(plain_run: tuple[Path, Session]) -> None:
    folder, result = plain_run
    evidence = folder / "evidence"
    run, bundle = _bundle_of(result, evidence)
    assert bundle["status"] == "complete"
    # evidence.json is the projection of the run's event log, and can be rebuilt from it alone.
    assert rebuild(run).json_dict() == bundle
    # One row per candidate of the track; only B0 ran, so every gate is still open.
    assert [(v["track"], v["candidate"]) for v in bundle["verdicts"]] == [
        ("5s-lossless", c) for c in ("lossless-text-kv", "reduction-order", "mislabelled-cache")]
    assert all(v["verdict"] == "inconclusive" and "latency_ratio" in v["open_checks"]
               for v in bundle["verdicts"])
    assert bundle["samples"][0]["ok"] and bundle["samples"][0]["latency_s"] > 0
    assert all(i["cleanup"]["clean"] for i in bundle["instances"])
    report = (run / "report.html").read_text()
    assert "Verdicts per track" in report and "INCONCLUSIVE" in report
    for text in (report, (run / "evidence.json").read_text(),
                 *(log.read_text() for log in (run / "logs").iterdir())):
        # (The copy's relative "../../work/..." candidate profile paths are no host path: only
        # the absolute checkout path counts.)
        assert re.search(r"(?<![\w.])" + re.escape(str(ROOT)), text) is None
        assert str(folder) not in text
        assert "127.0.0.1" not in text
    assert (evidence / "latest").resolve() == run.resolve()


def _slow_b0_session(tmp_path: Path, **popen: Any) -> tuple[subprocess.Popen[str], Path]:
    """B0's 5s-lossless smoke request in its own pytest session, 50 steps at 400 ms each (about
    20 s), so that a test can act on it mid-request; the session and its evidence folder."""
    campaign = campaign_variant(tmp_path / "c", profile_args={"step-cost-ms": 400})
    evidence = tmp_path / "evidence"
    proc = subprocess.Popen(
        pytest_command("tests/acceptance/test_b0_output.py", "-m", "lossless and 5s",
                       "--campaign", str(campaign), "--evidence-dir", str(evidence)),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)
    return proc, evidence


def test_ctrl_c_mid_request_leaves_no_process_and_keeps_evidence(tmp_path: Path) -> None:
    # The request is still running when the interrupt comes.
    proc, evidence = _slow_b0_session(
        tmp_path,
        # Ctrl-C as at a terminal: a process started in the background by a non-interactive shell
        # (CI, nohup, an xdist worker) inherits SIGINT ignored, and Python then never raises
        # KeyboardInterrupt; the session under test must see the signal as a user's would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        run: Path | None = None
        while time.monotonic() < deadline:
            runs = [p for p in evidence.glob("*/logs/*.log") if p.stat().st_size > 0]
            if runs and "POST" not in runs[0].read_text() and tagged(runs[0].parents[1].name):
                run = runs[0].parents[1]
                break
            time.sleep(0.2)
        assert run is not None, "the engine never started"
        time.sleep(3.0)  # well inside the 20 s request
        assert tagged(run.name), "the engine should be running mid-request"
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert tagged(run.name) == [], output[-2000:]
    bundle = read_bundle(run)
    assert bundle["status"] == "interrupted", output[-3000:]
    assert bundle["instances"] and all("cleanup" in i for i in bundle["instances"])
    assert bundle["instances"][0]["cleanup"]["survivors"] == []


def test_unfrozen_campaign_runs_but_caps_verdicts(plain_run: tuple[Path, Session]) -> None:
    folder, result = plain_run
    _, bundle = _bundle_of(result, folder / "evidence")
    assert bundle["campaign"]["freeze"]["state"] == "not_frozen"
    verdict = bundle["verdicts"][0]
    assert verdict["verdict"] == "inconclusive"
    assert "protocol_not_frozen" in verdict["reasons"]


def test_drifted_campaign_runs_but_names_the_drift(tmp_path: Path) -> None:
    from ref2va_accept.campaign import freeze

    campaign = campaign_variant(tmp_path / "c", steps=CHEAP_STEPS)
    freeze(campaign)
    # A moved field runs, capped (an input that is not its pin stops the run instead:
    # test_plugin_session.py).
    data = yaml.safe_load(campaign.read_text())
    data["description"] = "a description edited after freezing"
    campaign.write_text(yaml.safe_dump(data, sort_keys=False))
    evidence = tmp_path / "evidence"
    _, bundle = _bundle_of(_b0_smoke(campaign, evidence), evidence)
    freeze_state = bundle["campaign"]["freeze"]
    assert freeze_state["state"] == "drifted"
    assert any(p.startswith("description: locked") for p in freeze_state["problems"])
    assert "protocol_deviation" in bundle["verdicts"][0]["reasons"]


def test_engine_dying_mid_request_is_a_recorded_failure_and_nothing_survives(
    tmp_path: Path,
) -> None:
    campaign = campaign_variant(tmp_path / "c", profile_args={"fault": "crash"}, steps=CHEAP_STEPS)
    evidence = tmp_path / "evidence"
    result = run_in_checkout("tests/acceptance/test_b0_output.py", "-m", "lossless and 5s",
                             "--campaign", str(campaign), "--evidence-dir", str(evidence))
    assert result.returncode == 1
    assert "request failed (connection_lost)" in result.stdout
    run = next(p for p in evidence.iterdir() if not p.is_symlink())
    bundle = read_bundle(run)
    assert bundle["samples"][0]["failure"] == "connection_lost"
    # The engine's own exit status, read once the connection was lost (the fault exits 70).
    assert bundle["samples"][0]["detail"].startswith(
        "engine exited with exit code 70 during the request; connection ended after 0 body")
    assert "baseline_request_failed" in bundle["verdicts"][0]["reasons"]
    assert tagged(run.name) == []


def test_engine_killed_mid_request_names_the_signal(tmp_path: Path) -> None:
    # The request is still running when the engine is killed.
    proc, evidence = _slow_b0_session(tmp_path)
    try:
        deadline = time.monotonic() + 60
        main: list[int] = []
        while not main and time.monotonic() < deadline:
            logs = [p for p in evidence.glob("*/logs/*.log") if p.stat().st_size > 0]
            if logs and "POST" not in logs[0].read_text():  # healthy, request not yet answered
                main = [pid for pid in tagged(logs[0].parents[1].name)
                        if b"engine.reference" in Path(f"/proc/{pid}/cmdline").read_bytes()]
            time.sleep(0.2)
        assert len(main) == 1, f"the engine never started: {main}"
        time.sleep(3.0)  # well inside the 20 s request
        os.kill(main[0], signal.SIGKILL)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    bundle = read_bundle(only_run(evidence))
    sample = bundle["samples"][0]
    assert sample["failure"] == "connection_lost", output[-3000:]
    assert sample["detail"].startswith(
        "engine exited with signal 9 (SIGKILL) during the request"), sample["detail"]
    assert "request failed (connection_lost): engine exited with signal 9 (SIGKILL)" in output


def test_hung_engine_times_out_is_killed_and_the_cleanup_is_flagged(tmp_path: Path) -> None:
    # It hangs at the first step: at the middle one (the default), 25 steps of real compute on a
    # loaded machine once outlasted the 6 s timeout, and the engine, not yet hung, stopped clean.
    campaign = campaign_variant(tmp_path / "c", profile_args={"fault": "hang", "fault-at-step": 1},
                                steps=CHEAP_STEPS)
    data = yaml.safe_load(campaign.read_text())
    data["protocol"]["timeouts"]["5s"]["request_s"] = 6
    data["engine"]["shutdown_grace_s"] = 2
    campaign.write_text(yaml.safe_dump(data, sort_keys=False))
    evidence = tmp_path / "evidence"
    result = run_in_checkout("tests/acceptance/test_b0_output.py", "-m", "lossless and 5s",
                             "--campaign", str(campaign), "--evidence-dir", str(evidence))
    assert result.returncode == 1
    run = next(p for p in evidence.iterdir() if not p.is_symlink())
    bundle = read_bundle(run)
    assert bundle["samples"][0]["failure"] == "timeout"
    cleanup = bundle["instances"][0]["cleanup"]
    assert not cleanup["clean"] and cleanup["needed_sigkill"] and cleanup["survivors"] == []
    assert "engine cleanup incomplete" in result.stdout
    assert tagged(run.name) == []


def test_engine_failing_to_start_is_one_line_and_its_log_tail_is_in_the_evidence(
        tmp_path: Path) -> None:
    # An engine command that writes 30 numbered lines (each naming a path of this host) and
    # exits 1 before it ever listens.
    script = tmp_path / "c" / "fails.py"
    campaign = campaign_variant(tmp_path / "c")
    script.write_text("import sys\nfor i in range(1, 31):\n"
                      f"    print(f'start-up line {{i:02d}} in {tmp_path}/model')\nsys.exit(1)\n")
    data = yaml.safe_load(campaign.read_text())
    data["engine"]["command"] = [sys.executable, str(script)]
    campaign.write_text(yaml.safe_dump(data, sort_keys=False))
    evidence = tmp_path / "evidence"
    result = run_in_checkout("tests/acceptance/test_b0_output.py", "-m", "lossless and 5s",
                             "--campaign", str(campaign), "--evidence-dir", str(evidence))
    assert result.returncode == 1
    said = ("engine 5s-lossless.b0.1 exited with code 1 during start-up (before /health "
            "answered); log: logs/5s-lossless.b0.1.log")
    assert said in result.stdout.splitlines(), result.stdout[-3000:]
    assert "Traceback" not in result.stdout and "start-up line" not in result.stdout
    bundle = read_bundle(next(p for p in evidence.iterdir() if not p.is_symlink()))
    [check] = [c for c in bundle["checks"] if c["name"] == "engine_start"]
    assert check["reason"] == "engine_start_failed"
    assert check["data"] == {"instance": "5s-lossless.b0.1", "log": "logs/5s-lossless.b0.1.log",
                             "exit_code": 1}
    # The last 20 lines of the log, sanitized as all evidence is.
    lines = check["detail"].splitlines()
    assert lines[0] == ("engine 5s-lossless.b0.1 exited with code 1 during start-up (before "
                        "/health answered); last log lines (logs/5s-lossless.b0.1.log):")
    assert [line.split(" in ")[0] for line in lines[1:]] == [
        f"start-up line {i:02d}" for i in range(11, 31)]
    assert str(tmp_path) not in check["detail"]
    assert all(line.endswith("/model") for line in lines[1:])


def test_campaign_scenarios_under_xdist_are_refused_in_one_line(tmp_path: Path) -> None:
    """A run's engines, evidence and verdicts live in the session's one process; an xdist worker
    has none of it. Its campaign scenarios failed as a bare KeyError (a StashKey) per file, from
    the plugin's internals; now each says what to do, and no engine starts. (Its own process:
    xdist's workers are what is under test.)"""
    done = subprocess.run(
        pytest_command("tests/acceptance/test_b0_output.py", "-n", "2", "-p", "no:randomly",
                       "-m", "lossless and 5s", "--evidence-dir", str(tmp_path / "ev")),
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-2000:]
    assert "KeyError" not in out, out[-2000:]
    assert ("ref2va: the campaign's scenarios (tests/acceptance, quality, perf, verdicts) run in "
            "one pytest process") in out, out[-2000:]
    assert "run them without -n (pytest-xdist)" in out
    assert " passed" not in out and "[ref2va] request" not in out, out[-2000:]
