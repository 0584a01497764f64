"""Signals and leftovers (issue 13): the wrapper hands SIGTERM to pytest and lets a Ctrl-C reach
it, a selftest asked to stop starts no later phase, a second Ctrl-C stops the engines at once and
still ends with a report, and engines die with the judge even under SIGKILL, or the next run
stops them and says so.

Every session here runs in a process of its own: that process, its signals and its death are
what is under test."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.unit.evidence_schema import read_bundle
from tests.unit.suite_runner import (
    CHEAP_STEPS,
    ROOT,
    campaign_variant,
    pytest_command,
    run_pytest,
    sigterm_when,
    tagged,
)
from tests.unit.wrapper_checkout import fake_checkout, python_checkout, sessions

GRACE_S = 10.0  # the reference campaign's frozen engine.shutdown_grace_s
# Slow steps, so a request is still running when the signal comes; and a worker that ignores
# SIGTERM, as a stubborn engine worker would: the hardest engine to stop.
STUBBORN = {"step-cost-ms": 400, "fault": "worker_ignores_sigterm"}


def _start_session(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """A campaign session in a subprocess; its output goes to tmp_path/output.txt."""
    campaign = campaign_variant(tmp_path / "c", profile_args=STUBBORN)
    evidence = tmp_path / "evidence"
    with open(tmp_path / "output.txt", "wb") as output:
        proc = subprocess.Popen(
            pytest_command("tests/acceptance/test_b0_output.py", "-m", "lossless and 5s",
                           "--campaign", str(campaign), "--evidence-dir", str(evidence)),
            cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
    return proc, evidence


def _wait_for_request(evidence: Path, proc: subprocess.Popen[bytes]) -> Path:
    """The run folder, once its engine has logged the request's start."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        for log in evidence.glob("*/logs/*.log"):
            if "generation" in log.read_text(errors="replace") and "started" in log.read_text():
                return log.parents[1]
        time.sleep(0.2)
    output = (evidence.parent / "output.txt").read_text(errors="replace")
    raise AssertionError(f"no request started (exit {proc.poll()}): {output[-3000:]}")


def _gone_within(run_id: str, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := tagged(run_id)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _exited(pid: int, seconds: float) -> None:
    """Wait until `pid` has exited (gone, or a zombie no one reaped: it runs nothing more)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.1)
    raise AssertionError(f"pid {pid} still running after {seconds:g} s")


def _kill_all(pids: list[int]) -> None:
    for pid in pids:  # by pid, never by name
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _written_status(run: Path) -> str:
    try:
        return str(json.loads((run / "evidence.json").read_text()).get("status"))
    except (OSError, ValueError):
        return "running"  # being rewritten


def test_sigkill_of_pytest_mid_request_leaves_no_engine(tmp_path: Path) -> None:
    proc, evidence = _start_session(tmp_path)
    try:
        run = _wait_for_request(evidence, proc)
        assert len(tagged(run.name)) == 2  # the engine and its worker that ignores SIGTERM
        # While the judge lives, the engine's log is copied raw (it is scrubbed at the run's end).
        raw = "".join(log.read_text(errors="replace") for log in (run / "logs").iterdir())
        assert "127.0.0.1" in raw
        proc.kill()
        proc.wait()
        left = _gone_within(run.name, GRACE_S)
        # Then the reaper finishes the dead run's folder: status killed, files scrubbed, and
        # evidence.json rewritten last.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _written_status(run) == "running":
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_all(tagged(run.name) if "run" in locals() else [])
    assert left == [], [psutil.Process(p).cmdline() for p in left if psutil.pid_exists(p)]
    bundle = read_bundle(run)
    assert bundle["status"] == "killed"
    assert any("the judge died" in note for note in bundle["notes"])
    for path in run.rglob("*"):
        if path.is_file() and path.suffix in (".log", ".json", ".jsonl", ".html"):
            text = path.read_text(errors="replace")
            # (A relative "../../work/..." profile path of this test's campaign copy is no host
            # path: only the absolute checkout path counts.)
            absolute = re.search(r"(?<![\w.])" + re.escape(str(ROOT)), text)
            assert "127.0.0.1" not in text and absolute is None, path


def test_next_run_stops_and_reports_what_a_dead_run_left(tmp_path: Path) -> None:
    proc, evidence = _start_session(tmp_path)
    try:
        run = _wait_for_request(evidence, proc)
        # The judge and its reaper die outright (a machine-wide OOM kill): nothing is left to
        # stop the engine's worker, which ignores the SIGTERM its dying parent gets.
        reapers = [p.pid for p in psutil.process_iter(["cmdline"])
                   if "ref2va_accept.engines._leftovers" in (p.info["cmdline"] or [])
                   and f"{run.name}/" in (p.info["cmdline"] or [])]
        assert len(reapers) == 1
        # The stubborn worker is the run's process whose parent is the run's engine.
        running = tagged(run.name)
        worker = next(p for p in running if psutil.Process(p).ppid() in running)
        engine = psutil.Process(worker).ppid()
        _kill_all([proc.pid, *reapers])
        proc.wait()
        # The main engine dies of its parent's death; the worker does not. Wait until the
        # engine has really exited (while it exits it could still stop its worker, and a loaded
        # machine stretches that past any fixed sleep), so that what the next run finds and
        # stops is only what the dead run left.
        _exited(engine, 60)
        left = tagged(run.name)
        assert left == [worker], (left, worker)
        second = tmp_path / "second"
        result = run_pytest("tests/acceptance/test_b0_output.py", "-m", "lossless and 5s",
                            "--campaign", str(campaign_variant(second / "c", steps=CHEAP_STEPS)),
                            "--evidence-dir", str(second / "evidence"), timeout=300)
        assert tagged(run.name) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_all(tagged(run.name) if "run" in locals() else [])
    assert result.returncode == 0, result.stdout[-3000:]
    assert "engine process(es) left by a dead run" in result.stdout
    later = read_bundle(next(p for p in (second / "evidence").iterdir() if not p.is_symlink()))
    # Every run's start stops the leftovers of dead runs machine-wide: under xdist another
    # session's dead run may be among them. This run's own are exactly what it left.
    own = [entry for entry in later["leftovers"] if entry["tag"].startswith(f"{run.name}/")]
    assert [entry["pid"] for entry in own] == left, later["leftovers"]
    # It ignores SIGTERM, so the next run had to SIGKILL it. Under xdist another session of
    # the selftest may start meanwhile, and every session's start stops the leftovers of dead
    # runs machine-wide: that one can SIGKILL the worker inside this run's SIGTERM grace (seen
    # three times in the concurrent selftest), and this run then reads it as gone on SIGTERM.
    # Alone (a serial selftest, or this test by itself) nothing else sweeps: it must be SIGKILL.
    concurrent = "PYTEST_XDIST_WORKER" in os.environ
    assert own[0]["stopped_by"] in (
        ("SIGKILL", "SIGTERM") if concurrent else ("SIGKILL",)), own
    assert not psutil.pid_exists(worker) or psutil.Process(worker).status() == "zombie"
    assert any("left by a dead run" in note for note in later["notes"])


def test_second_interrupt_stops_engines_at_once_and_still_reports(tmp_path: Path) -> None:
    proc, evidence = _start_session(tmp_path)
    try:
        run = _wait_for_request(evidence, proc)
        proc.send_signal(signal.SIGINT)
        # The first interrupt's stop waits out the grace on the worker that ignores SIGTERM.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(tagged(run.name)) != 1:
            time.sleep(0.1)
        assert len(tagged(run.name)) == 1, "the stop should be waiting on the stubborn worker"
        second = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        after_second = time.monotonic() - second
        output = (tmp_path / "output.txt").read_text(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _kill_all(tagged(run.name) if "run" in locals() else [])
    assert tagged(run.name) == [], output[-2000:]
    bundle = read_bundle(run)
    assert bundle["status"] == "interrupted", output[-3000:]
    (instance,) = bundle["instances"]
    assert "stopped at once with SIGKILL on a repeated interrupt" in instance["cleanup"]["problems"]
    assert (run / "report.html").is_file()
    assert "stopping every engine now" in output
    assert after_second < GRACE_S, after_second


def test_sigterm_to_the_wrapper_reaches_pytest(tmp_path: Path) -> None:
    checkout = fake_checkout(tmp_path, {})
    # The stand-in pytest says when it runs, and exits 7 on SIGTERM (saying so).
    marks = tmp_path / "marks"
    (checkout / ".venv/bin/python").write_text(
        "#!/bin/sh\n"
        f"trap 'echo term >> {marks}; exit 7' TERM\n"
        f"echo running >> {marks}\n"
        f"echo $$ > {tmp_path / 'pid'}\n"
        "while :; do sleep 0.1; done\n")
    # With a pytest argument: one session (the lanes' own signal test is in
    # test_campaign_lanes_script.py).
    wrapper = subprocess.Popen(["bash", str(checkout / "ref2va"), "campaign", "-k", "x"],
                               env={**os.environ, "PYTHON": sys.executable})
    try:
        code = sigterm_when(wrapper, marks.exists)
    finally:
        if (tmp_path / "pid").exists():  # a stand-in the old script left running alone
            _kill_all([int((tmp_path / "pid").read_text())])
    assert marks.read_text().split() == ["running", "term"]
    assert code == 7  # the script waited for pytest and kept its exit code


def _wrapper(checkout: Path, tmp_path: Path, *args: str, **given: str
             ) -> tuple[subprocess.Popen[str], Path]:
    """./ref2va ARGS in the stand-in checkout, in a process group of its own (a terminal's
    foreground group: killpg sends what a Ctrl-C there sends); its stand-in sessions' log."""
    log = tmp_path / "sessions.jsonl"
    env = {**os.environ, "PYTHON": sys.executable, "REF2VA_ROOM_CHECK": "0",
           "STAND_IN_LOG": str(log), "STAND_IN_RELEASE": str(tmp_path / "release"), **given}
    env.pop("REF2VA_UPSTREAM", None)  # CI's: no VBench build to wait for here
    wrapper = subprocess.Popen(["bash", str(checkout / "ref2va"), *args], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)
    return wrapper, log


def _until(ready: Callable[[], bool], wait_s: float = 30) -> None:
    deadline = time.monotonic() + wait_s
    while not ready():
        assert time.monotonic() < deadline, "the stand-in sessions did not start"
        time.sleep(0.05)


def _ended(wrapper: subprocess.Popen[str], wait_s: float = 30) -> tuple[int, str]:
    try:
        out, _ = wrapper.communicate(timeout=wait_s)
    finally:
        if wrapper.poll() is None:  # the old script: pytest never saw the Ctrl-C
            os.killpg(wrapper.pid, signal.SIGKILL)
            wrapper.wait()
    return wrapper.returncode, out


def test_a_ctrl_c_reaches_pytest_through_the_wrapper(tmp_path: Path) -> None:
    """A shell script's background command starts with SIGINT ignored, and Python keeps it so:
    pytest under ./ref2va never saw a Ctrl-C, and the run went on to its end. Now pytest starts
    with Python's own handler, and the Ctrl-C ends it as at a terminal, once."""
    wrapper, log = _wrapper(python_checkout(tmp_path), tmp_path, "campaign", "-k", "x")
    try:
        _until(lambda: len(sessions(log)) == 1)
        assert sessions(log)[0]["sigint"] == "<built-in function default_int_handler>"
        os.killpg(wrapper.pid, signal.SIGINT)
        code, out = _ended(wrapper)
    finally:
        (tmp_path / "release").touch()
    assert [s.get("interrupted") for s in sessions(log)] == [None, True], out
    assert code == 2, out  # pytest's exit code for an interrupted session


@pytest.mark.parametrize("how", ["SIGTERM to the script", "a Ctrl-C"])
@pytest.mark.parametrize("concurrent", ["1", "0"])
def test_a_selftest_asked_to_stop_starts_no_later_phase(tmp_path: Path, how: str,
                                                        concurrent: str) -> None:
    """The selftest used to start its next phase (the heavy tests, or phase 2 on one CPU) once
    the phase a signal had stopped ended, and ran it to its end: minutes of a run asked to stop.
    Phased (where the machine has two CPUs) and in turn (REF2VA_SELFTEST_CONCURRENT=0)."""
    wrapper, log = _wrapper(python_checkout(tmp_path), tmp_path, "selftest",
                            REF2VA_SELFTEST_CONCURRENT=concurrent)
    try:
        _until(lambda: any("timed" in s["args"] for s in sessions(log)))
        time.sleep(0.5)  # the phased form starts phase 2's sessions beside it
        if how == "a Ctrl-C":
            os.killpg(wrapper.pid, signal.SIGINT)
        else:
            wrapper.send_signal(signal.SIGTERM)
        code, out = _ended(wrapper)
    finally:
        (tmp_path / "release").touch()
    started = [s["args"] for s in sessions(log) if "sigint" in s]
    # Neither the heavy tests nor phase 2 of the form in turn ("-m", "not timed").
    assert not [a for a in started if "heavy and not timed" in a or "not timed" in a], out
    assert len(started) in (1, 3), started  # phase 1 alone, or phase 1 with phase 2's two
    assert code != 0, out
    assert "stopped by a signal in phase 1" in out, out
