"""Start, health, stop and cleanup audit, against small fake engines that misbehave on purpose."""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from ref2va_accept.core import EngineStartError, ForeignServerError
from ref2va_accept.engines import (
    EngineInstance,
    InstanceRegistry,
    LaunchSpec,
    engine_environment,
    free_port,
    port_is_free,
    start_instance,
)

FAKE_ENGINE = textwrap.dedent('''
    import http.server, os, signal, socket, subprocess, sys, time
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "crash":
        print("loading weights... out of device memory", flush=True)
        sys.exit(3)
    if mode == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode == "leaves-worker":
        # A worker in the group that exits on SIGTERM, noting it; the main process exits on its
        # own SIGTERM without stopping it, noting whether the worker had been signalled first.
        marks = sys.argv[3]
        subprocess.Popen([sys.executable, "-c",
            "import signal, sys, time\\n"
            "def term(*_):\\n"
            "    open(sys.argv[1] + '.worker', 'w').close(); sys.exit(0)\\n"
            "signal.signal(signal.SIGTERM, term)\\n"
            "open(sys.argv[1] + '.ready', 'w').close()\\n"
            "time.sleep(600)\\n", marks])
        while not os.path.exists(marks + ".ready"):  # healthy only once the worker listens
            time.sleep(0.01)
        def main_term(*_):
            open(marks + ".main", "w").write(str(os.path.exists(marks + ".worker")))
            os._exit(0)
        signal.signal(signal.SIGTERM, main_term)
    if mode == "escaping-child":
        # A worker that leaves the process group and ignores SIGTERM, as leaked workers do.
        subprocess.Popen([sys.executable, "-c",
            "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"],
            start_new_session=True)
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            code = 503 if mode == "never-healthy" else 200
            self.send_response(code); self.send_header("Content-Length", "2")
            if mode == "echo":
                self.send_header("X-Ref2VA-Instance-Nonce", os.environ["REF2VA_INSTANCE_NONCE"])
            self.end_headers()
            self.wfile.write(b"{}")
        def log_message(self, *args):
            pass
    server = http.server.HTTPServer(("127.0.0.1", port), Handler)
    if mode == "port-holder":
        # A process the harness cannot know about (double-forked away, no instance tag) inherits
        # the listener and keeps the port after the engine is gone.
        os.set_inheritable(server.fileno(), True)
        env = {k: v for k, v in os.environ.items() if k != "REF2VA_INSTANCE"}
        first = os.fork()
        if first == 0:
            os.setsid()
            if os.fork() > 0:
                os._exit(0)
            open(sys.argv[3], "w").write(str(os.getpid()))
            os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)"], env)
        os.waitpid(first, 0)
        while not os.path.exists(sys.argv[3]):
            time.sleep(0.01)
    print("ready", flush=True)
    server.serve_forever()
''')


@pytest.fixture
def fake_engine(tmp_path: Path) -> Path:
    script = tmp_path / "fake_engine.py"
    script.write_text(FAKE_ENGINE)
    return script


def _spec(tmp_path: Path, script: Path, mode: str, *extra: str, startup: float = 10.0,
          grace: float = 1.0) -> LaunchSpec:
    port = free_port()
    return LaunchSpec(
        arm_id="b0", instance_id=f"test-{mode}-{port}",
        argv=(sys.executable, str(script), mode, str(port), *extra),
        env={}, cwd=tmp_path, port=port, startup_timeout_s=startup, shutdown_grace_s=grace,
        log_path=tmp_path / f"{mode}.log",
    )


def test_healthy_engine_starts_and_stops_clean(tmp_path: Path, fake_engine: Path) -> None:
    registry = InstanceRegistry()
    instance = start_instance(_spec(tmp_path, fake_engine, "healthy"), registry)
    assert instance.running
    pid = instance.pid
    audit = registry.stop(instance)
    assert audit.clean, audit.problems
    assert audit.port_free and audit.survivors == [] and audit.needed_sigkill == []
    assert pid is not None and not psutil.pid_exists(pid)


def test_crash_during_startup_fails_at_once_quoting_the_log(tmp_path: Path,
                                                            fake_engine: Path) -> None:
    started = time.monotonic()
    with pytest.raises(EngineStartError, match="exited with code 3") as info:
        start_instance(_spec(tmp_path, fake_engine, "crash", startup=60.0), InstanceRegistry())
    # One line; the log's tail travels beside it, for the evidence.
    assert "\n" not in str(info.value) and info.value.exit_code == 3
    assert "out of device memory" in info.value.log_tail
    assert time.monotonic() - started < 10  # the crash is noticed, not waited out


def test_engine_never_healthy_times_out_and_is_stopped(tmp_path: Path, fake_engine: Path) -> None:
    registry = InstanceRegistry()
    audits = []
    registry.on_audit.append(audits.append)
    with pytest.raises(EngineStartError, match=r"within 1\.5 s"):
        start_instance(_spec(tmp_path, fake_engine, "never-healthy", startup=1.5), registry)
    assert len(audits) == 1 and audits[0].survivors == []
    assert registry.live == {}


def test_missing_executable_is_one_clear_error(tmp_path: Path) -> None:
    spec = _spec(tmp_path, tmp_path / "x.py", "healthy")
    spec = LaunchSpec(**{**spec.__dict__, "argv": ("/nonexistent/vllm", "serve")})
    with pytest.raises(EngineStartError, match="cannot execute '/nonexistent/vllm'"):
        start_instance(spec, InstanceRegistry())


def test_engine_ignoring_sigterm_is_killed_and_audit_says_so(tmp_path: Path,
                                                             fake_engine: Path) -> None:
    registry = InstanceRegistry()
    instance = start_instance(_spec(tmp_path, fake_engine, "ignore-term"), registry)
    audit = registry.stop(instance)
    assert not audit.clean
    assert [p.pid for p in audit.needed_sigkill] == [instance.pid]
    assert audit.survivors == [] and audit.port_free
    assert "after SIGTERM" in audit.problems[0]
    # Every step is in the audit: the main process had its whole grace (1 s), the group its own.
    assert [s.action for s in audit.steps] == ["SIGTERM main", "SIGTERM group", "SIGKILL"]
    assert audit.steps[0].waited_s >= 1.0 and audit.steps[-1].alive_after == 0


def test_stop_follows_upstreams_order_main_first_then_the_group(tmp_path: Path,
                                                                fake_engine: Path) -> None:
    # Upstream's launcher: SIGTERM to the server's main process, a wait, then the rest. The main
    # process is signalled alone (its worker had not been), and the worker it left behind gets
    # its SIGTERM from the second step; nothing needed SIGKILL, so the stop is clean.
    marks = tmp_path / "marks"
    instance = start_instance(_spec(tmp_path, fake_engine, "leaves-worker", str(marks),
                                    grace=5.0), InstanceRegistry())
    audit = instance.stop()
    assert (tmp_path / "marks.main").read_text() == "False"
    assert (tmp_path / "marks.worker").exists()
    assert audit.clean, audit.problems
    assert [s.action for s in audit.steps] == ["SIGTERM main", "SIGTERM group"]
    main, group = audit.steps
    assert main.alive_after == 1 and group.alive_after == 0
    assert main.waited_s < 5.0  # it ended when the main process exited, not at the grace
    assert audit.json_dict()["steps"][0]["action"] == "SIGTERM main"


def test_a_server_that_stops_on_its_own_needs_one_step(tmp_path: Path, fake_engine: Path) -> None:
    audit = start_instance(_spec(tmp_path, fake_engine, "healthy"), InstanceRegistry()).stop()
    assert audit.clean and [(s.action, s.alive_after) for s in audit.steps] == [
        ("SIGTERM main", 0)]


def test_worker_that_left_the_group_is_found_and_killed(tmp_path: Path,
                                                        fake_engine: Path) -> None:
    registry = InstanceRegistry()
    instance = start_instance(_spec(tmp_path, fake_engine, "escaping-child"), registry)
    children = psutil.Process(instance.pid).children()
    assert len(children) == 1
    child = children[0]
    assert os.getpgid(child.pid) != os.getpgid(instance.pid)
    audit = registry.stop(instance)
    assert not audit.clean
    assert child.pid in [p.pid for p in audit.needed_sigkill]
    assert audit.survivors == []
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


def test_port_held_by_an_unknown_process_fails_the_audit(tmp_path: Path,
                                                         fake_engine: Path) -> None:
    pid_file = tmp_path / "holder.pid"
    registry = InstanceRegistry()
    instance = start_instance(_spec(tmp_path, fake_engine, "port-holder", str(pid_file)),
                              registry)
    holder = int(pid_file.read_text())
    try:
        audit = registry.stop(instance)
        assert not audit.port_free and not audit.clean
        assert f"port {instance.spec.port} still held" in " ".join(audit.problems)
    finally:
        os.kill(holder, signal.SIGKILL)  # the holder this test made, by pid, never by name


HOLDER_ENGINE = textwrap.dedent('''
    import http.server, os, signal, subprocess, sys, time
    port = int(sys.argv[1])
    server = http.server.HTTPServer(("127.0.0.1", port), http.server.BaseHTTPRequestHandler)
    server.RequestHandlerClass = type("H", (http.server.BaseHTTPRequestHandler,), {
        "do_GET": lambda self: (self.send_response(200), self.send_header("Content-Length", "0"),
                                self.end_headers()),
        "log_message": lambda self, *a: None})
    os.set_inheritable(server.fileno(), True)
    # A child of ours (it keeps the instance tag) that holds the listener and ignores SIGTERM.
    # Healthy only once the child ignores SIGTERM, so a prompt stop cannot beat it to it.
    ready = f"holder-{port}.ready"
    subprocess.Popen([sys.executable, "-c",
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        "open(sys.argv[1], 'w').close(); time.sleep(600)", ready],
        pass_fds=(server.fileno(),))
    while not os.path.exists(ready):
        time.sleep(0.01)
    server.serve_forever()
''')


def test_child_holding_the_port_after_main_exit_is_named(tmp_path: Path) -> None:
    script = tmp_path / "holder_engine.py"
    script.write_text(HOLDER_ENGINE)
    port = free_port()
    spec = LaunchSpec(arm_id="b0", instance_id=f"holder-{port}",
                      argv=(sys.executable, str(script), str(port)), env={}, cwd=tmp_path,
                      port=port, startup_timeout_s=10, shutdown_grace_s=1.0,
                      log_path=tmp_path / "holder.log")
    audit = start_instance(spec, InstanceRegistry()).stop()
    assert any("still held after the main process exited" in p for p in audit.problems)
    assert audit.survivors == [] and audit.port_free  # then killed, and the port came free


def test_stop_is_idempotent(tmp_path: Path, fake_engine: Path) -> None:
    instance = EngineInstance(_spec(tmp_path, fake_engine, "healthy"))
    instance.start()
    assert instance.stop() is instance.stop()


@pytest.mark.fast
def test_port_is_free_detects_a_listener() -> None:
    import socket

    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        assert not port_is_free(port)
    assert port_is_free(port)


def test_engine_echoing_its_nonce_is_its_own(tmp_path: Path, fake_engine: Path) -> None:
    spec = LaunchSpec(**{**_spec(tmp_path, fake_engine, "echo").__dict__, "nonce": "n-1"})
    registry = InstanceRegistry()
    assert registry.stop(start_instance(spec, registry)).clean


def test_engine_not_echoing_its_nonce_is_refused_as_foreign(tmp_path: Path,
                                                            fake_engine: Path) -> None:
    spec = LaunchSpec(**{**_spec(tmp_path, fake_engine, "healthy").__dict__, "nonce": "n-1"})
    with pytest.raises(ForeignServerError, match="X-Ref2VA-Instance-Nonce was absent"):
        start_instance(spec, InstanceRegistry())


def test_registry_refuses_an_instance_id_used_before(tmp_path: Path, fake_engine: Path) -> None:
    registry = InstanceRegistry()
    spec = _spec(tmp_path, fake_engine, "healthy")
    registry.stop(start_instance(spec, registry))
    with pytest.raises(ValueError, match="already used in this run"):
        start_instance(spec, registry)


@pytest.mark.fast
def test_the_callers_project_variables_do_not_reach_the_engine(tmp_path: Path,
                                                                fake_engine: Path) -> None:
    # A stray cost model in the shell would bring declared device time back, unseen in evidence;
    # the campaign or profile is the only way in for the project's own variables.
    spec = _spec(tmp_path, fake_engine, "healthy")
    spec = dataclasses.replace(spec, env={"REF2VA_DIAGNOSTICS_ROOT": "/d", "OTHER": "campaign"})
    inherited = {"PATH": "/bin", "REF2VA_REFERENCE_COST_MODEL": '{"step_ms": 100}',
                 "REF2VA_REFERENCE_FAULT": "crash", "OTHER": "shell"}
    env = engine_environment(spec, inherited)
    assert "REF2VA_REFERENCE_COST_MODEL" not in env and "REF2VA_REFERENCE_FAULT" not in env
    assert env["PATH"] == "/bin" and env["OTHER"] == "campaign"
    assert env["REF2VA_DIAGNOSTICS_ROOT"] == "/d" and env["REF2VA_INSTANCE"] == spec.process_tag


@pytest.mark.fast
def test_a_launch_search_path_goes_ahead_of_the_inherited_one(tmp_path: Path,
                                                               fake_engine: Path) -> None:
    # CANN's environment script puts its packages on PYTHONPATH: the profile's own entries (the
    # worker extension's checkout) go first, and what the host had stays reachable.
    spec = dataclasses.replace(_spec(tmp_path, fake_engine, "healthy"),
                               env={"PYTHONPATH": "/w:/w/src", "OTHER": "profile"})
    env = engine_environment(spec, {"PYTHONPATH": "/cann/python", "OTHER": "shell"})
    assert env["PYTHONPATH"] == os.pathsep.join(("/w:/w/src", "/cann/python"))
    assert env["OTHER"] == "profile"  # any other variable the launch sets replaces the caller's
    assert engine_environment(spec, {})["PYTHONPATH"] == "/w:/w/src"
    assert engine_environment(spec, {"PYTHONPATH": "/w:/w/src"})["PYTHONPATH"] == "/w:/w/src"
