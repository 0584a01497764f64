"""Fault injection: every fault shows when switched on, and the plain B0 never shows it.

Faults about processes, sockets and the wire run real servers on 127.0.0.1; the rest run
in-process. Every process a test starts, and every child a fault starts, is ended by its PID.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import logging
import os
import signal
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import av
import httpx
import numpy as np
import psutil
import pytest

from engine.reference.app import create_app
from engine.reference.errors import ProfileError
from engine.reference.fault_names import FAULT_ENV
from engine.reference.faults import (
    CRASH_EXIT_CODE,
    FAULT_CHILD_ENV,
    LISTENER_PROCESS_NAME,
    WORKER_PROCESS_NAME,
)
from engine.reference.profile import load_profile
from ref2va_accept.engines._leftovers import die_with_parent
from ref2va_contract.launch import INSTANCE_TAG_ENV
from tests.engine.asgi_engine import AsgiEngine
from tests.engine.conftest import (
    B0_PROFILE,
    REPO_ROOT,
    EngineProcess,
    engine_command,
    engine_env,
    free_port,
    write_profile,
)

pytestmark = pytest.mark.engine

PROFILES = REPO_ROOT / "engine" / "profiles" / "reference"
FORM = {
    "prompt": "a red kite",
    "width": "32",
    "height": "32",
    "num_frames": "5",
    "num_inference_steps": "2",
    "seed": "7",
}
FORM_TYPE = "application/x-www-form-urlencoded"
WAIT_S = 10.0
STARTUP_TIMEOUT_S = 60.0  # several servers start at once on two cores
INSTANCE_TAG = f"ref2va-faults-{os.getpid()}"
SERVER_FAULTS = (
    "crash",
    "hang",
    "truncated_body",
    "worker_ignores_sigterm",
    "port_held_after_exit",
)
ACTIVE_LINE = "FAULT INJECTION ACTIVE: "


def fault_profile(name: str) -> Path:
    return PROFILES / f"fault-{name.replace('_', '-')}.yaml"


@pytest.fixture(autouse=True)
def _no_fault_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAULT_ENV, raising=False)


@contextlib.contextmanager
def in_process(profile: Path) -> Iterator[AsgiEngine]:
    engine = AsgiEngine(create_app(load_profile(profile)))
    try:
        yield engine
    finally:
        engine.close()


def decode(mp4: bytes) -> tuple[list[np.ndarray], int]:
    """Decoded RGB frames and the number of audio streams."""
    with av.open(io.BytesIO(mp4)) as container:
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
        return frames, len(container.streams.audio)


def decodes_completely(mp4: bytes) -> bool:
    try:
        frames, _ = decode(mp4)
    except av.FFmpegError:
        return False
    return len(frames) == int(FORM["num_frames"])


def kill_and_wait(process: psutil.Process) -> None:
    """SIGKILL by PID and wait until it is dead.

    Dead means gone or a zombie: an orphan is reaped by whatever PID 1 this machine has, which
    may take its time, but a zombie holds no socket and runs no code.
    """
    with contextlib.suppress(psutil.NoSuchProcess):
        process.kill()
        deadline = time.monotonic() + WAIT_S
        while process.status() != psutil.STATUS_ZOMBIE:
            if time.monotonic() > deadline:
                pytest.fail(f"pid {process.pid} still alive {WAIT_S} s after SIGKILL")
            time.sleep(0.02)


@contextlib.contextmanager
def reaping(pids: list[int]) -> Iterator[list[int]]:
    """SIGKILL every PID collected in ``pids`` on the way out, whatever happened."""
    try:
        yield pids
    finally:
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                kill_and_wait(psutil.Process(pid))


def fault_children(engine: EngineProcess) -> list[psutil.Process]:
    children = psutil.Process(engine.process.pid).children(recursive=True)
    return [child for child in children if FAULT_CHILD_ENV in child.environ()]


def wait_for_exit(process: subprocess.Popen[bytes]) -> int:
    return process.wait(WAIT_S)


def _wait_healthy(engine: EngineProcess) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        if engine.process.poll() is not None:
            pytest.fail(f"engine exited early ({engine.process.returncode}):\n{engine.log()}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{engine.base_url}/health", timeout=1.0).status_code == 200:
                return
        if time.monotonic() > deadline:
            pytest.fail(f"engine not healthy after {STARTUP_TIMEOUT_S} s:\n{engine.log()}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def fault_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, EngineProcess]]:
    """One real server per process-level fault, started together: start-up is most of the cost.

    Each test uses (and may kill) its own server. Every server, and every descendant seen while
    its server lived, is killed by PID at the end.
    """
    folder = tmp_path_factory.mktemp("faults")
    env = {**engine_env(), INSTANCE_TAG_ENV: INSTANCE_TAG}
    servers: dict[str, EngineProcess] = {}
    with reaping([]) as descendants:
        try:
            for fault in SERVER_FAULTS:
                port = free_port()
                log_path = folder / f"{fault}.log"
                with log_path.open("wb") as log:
                    process = subprocess.Popen(
                        engine_command(fault_profile(fault), port),
                        cwd=REPO_ROOT,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        # As the judge starts one: it goes if this worker dies before the finally.
                        preexec_fn=die_with_parent,  # noqa: PLW1509
                    )
                servers[fault] = EngineProcess(process, f"http://127.0.0.1:{port}", log_path)
            for engine in servers.values():
                _wait_healthy(engine)
                descendants.extend(
                    child.pid
                    for child in psutil.Process(engine.process.pid).children(recursive=True)
                )
            yield servers
        finally:
            for engine in servers.values():
                if engine.process.poll() is None:
                    engine.process.kill()
                    engine.process.wait(WAIT_S)


# --- switching on and off ----------------------------------------------------------------------


def test_unknown_fault_in_a_profile_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = write_profile(tmp_path / "bogus.yaml", fault="melt")
    with pytest.raises(ProfileError, match="unknown fault 'melt'") as caught:
        load_profile(path)
    assert str(path) in str(caught.value)


def test_unknown_fault_in_the_environment_is_refused_at_start_up() -> None:
    finished = subprocess.run(
        engine_command(B0_PROFILE, free_port()),
        cwd=REPO_ROOT,
        env={**engine_env(), FAULT_ENV: "melt"},
        capture_output=True,
        timeout=60,
    )
    assert finished.returncode == 2
    assert "unknown fault 'melt'" in finished.stderr.decode()
    assert str(B0_PROFILE) in finished.stderr.decode()


def test_the_environment_switches_a_fault_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(FAULT_ENV, "missing_audio")
    with caplog.at_level(logging.WARNING), in_process(B0_PROFILE) as engine:
        answer = engine.post("/v1/videos/sync", data=FORM)
    assert decode(answer.content)[1] == 0
    assert f"{ACTIVE_LINE}missing_audio" in caplog.text


def test_b0_logs_no_fault(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO), in_process(B0_PROFILE) as engine:
        assert engine.get("/health").status_code == 200
    assert ACTIVE_LINE not in caplog.text
    assert "FAULT" not in caplog.text


# --- in-process faults: what the response carries ----------------------------------------------


def shows_http_500(engine: AsgiEngine) -> bool:
    answer = engine.post("/v1/videos/sync", data=FORM)
    if answer.status_code != 500:
        return False
    error = answer.json()["error"]
    return bool(error["code"] == 500 and error["message"].startswith("Video generation failed:"))


def shows_wrong_frame_count(engine: AsgiEngine) -> bool:
    frames, _ = decode(engine.post("/v1/videos/sync", data=FORM).content)
    return len(frames) == int(FORM["num_frames"]) - 1


def shows_missing_audio(engine: AsgiEngine) -> bool:
    _, audio_streams = decode(engine.post("/v1/videos/sync", data=FORM).content)
    return audio_streams == 0


def shows_corrupt_mp4(engine: AsgiEngine) -> bool:
    answer = engine.post("/v1/videos/sync", data=FORM)
    declared = int(answer.headers["Content-Length"])
    return len(answer.content) == declared and not decodes_completely(answer.content)


def shows_nondeterminism(engine: AsgiEngine) -> bool:
    first = engine.post("/v1/videos/sync", data=FORM).content
    second = engine.post("/v1/videos/sync", data=FORM).content
    assert decodes_completely(first) and decodes_completely(second), "media stays complete"
    return any(
        not np.array_equal(a, b) for a, b in zip(decode(first)[0], decode(second)[0], strict=True)
    )


IN_PROCESS_FAULTS = {
    "http_500": shows_http_500,
    "wrong_frame_count": shows_wrong_frame_count,
    "missing_audio": shows_missing_audio,
    "corrupt_mp4": shows_corrupt_mp4,
    "nondeterministic": shows_nondeterminism,
}


@pytest.mark.parametrize("switched_on", [True, False], ids=["on", "off"])
@pytest.mark.parametrize("fault", sorted(IN_PROCESS_FAULTS))
def test_in_process_fault_shows_only_when_switched_on(
    fault: str, switched_on: bool, caplog: pytest.LogCaptureFixture
) -> None:
    profile = fault_profile(fault) if switched_on else B0_PROFILE
    with caplog.at_level(logging.WARNING), in_process(profile) as engine:
        assert IN_PROCESS_FAULTS[fault](engine) is switched_on
    assert (f"{ACTIVE_LINE}{fault}" in caplog.text) is switched_on


# --- real servers: crash, hang, the wire, processes and sockets --------------------------------


def test_crash_kills_the_server_mid_request(fault_servers: dict[str, EngineProcess]) -> None:
    engine = fault_servers["crash"]
    with pytest.raises(httpx.TransportError):
        httpx.post(f"{engine.base_url}/v1/videos/sync", data=FORM, timeout=WAIT_S)
    assert wait_for_exit(engine.process) == CRASH_EXIT_CODE
    assert f"{ACTIVE_LINE}crash" in engine.log()


def test_b0_neither_crashes_nor_hangs(b0_engine: EngineProcess) -> None:
    answer = httpx.post(f"{b0_engine.base_url}/v1/videos/sync", data=FORM, timeout=WAIT_S)
    assert answer.status_code == 200
    assert b0_engine.process.poll() is None
    assert ACTIVE_LINE not in b0_engine.log()


def test_hang_never_completes_survives_sigterm_and_dies_on_sigkill(
    fault_servers: dict[str, EngineProcess],
) -> None:
    engine = fault_servers["hang"]
    job = httpx.post(f"{engine.base_url}/v1/videos", data=FORM, timeout=WAIT_S).json()
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        status = httpx.get(f"{engine.base_url}/v1/videos/{job['id']}", timeout=WAIT_S)
        assert status.json()["status"] in ("queued", "in_progress")
        time.sleep(0.1)
    assert "FAULT hang: blocking forever" in engine.log()
    # Documented behaviour: SIGTERM does not end it (shutdown waits on the hung step).
    engine.process.send_signal(signal.SIGTERM)
    with pytest.raises(subprocess.TimeoutExpired):
        engine.process.wait(1.5)
    engine.process.kill()
    assert wait_for_exit(engine.process) == -signal.SIGKILL


def test_truncated_body_declares_everything_and_sends_half(
    fault_servers: dict[str, EngineProcess], b0_engine: EngineProcess
) -> None:
    def fetch(base_url: str) -> tuple[int, int]:
        """(declared Content-Length, bytes received before the connection closed)."""
        host, port = base_url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=WAIT_S)
        form = urllib.parse.urlencode(FORM)
        try:
            connection.request("POST", "/v1/videos/sync", form, {"Content-Type": FORM_TYPE})
            response = connection.getresponse()
            declared = int(response.getheader("Content-Length", "-1"))
            try:
                received = len(response.read())
            except http.client.IncompleteRead as short:
                received = len(short.partial)
            return declared, received
        finally:
            connection.close()

    declared, received = fetch(b0_engine.base_url)
    assert received == declared
    engine = fault_servers["truncated_body"]
    declared, received = fetch(engine.base_url)
    assert received == declared // 2
    assert f"{ACTIVE_LINE}truncated_body" in engine.log()


def test_worker_ignores_sigterm_and_outlives_the_server(
    fault_servers: dict[str, EngineProcess],
) -> None:
    engine = fault_servers["worker_ignores_sigterm"]
    (worker,) = fault_children(engine)
    assert worker.cmdline()[0] == WORKER_PROCESS_NAME
    assert worker.environ().get(INSTANCE_TAG_ENV) == INSTANCE_TAG
    assert worker.ppid() == engine.process.pid
    assert f"{ACTIVE_LINE}worker_ignores_sigterm" in engine.log()
    assert engine.stop() == 0
    worker.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    assert worker.is_running() and worker.status() != psutil.STATUS_ZOMBIE


def test_port_held_after_the_server_exits(fault_servers: dict[str, EngineProcess]) -> None:
    engine = fault_servers["port_held_after_exit"]
    port = int(engine.base_url.rsplit(":", 1)[1])
    (holder,) = fault_children(engine)
    assert holder.cmdline()[0] == LISTENER_PROCESS_NAME
    assert f"{ACTIVE_LINE}port_held_after_exit" in engine.log()
    assert engine.stop() == 0
    assert not _port_free(port)
    kill_and_wait(holder)
    assert _port_free(port)


def test_b0_starts_no_fault_child(b0_engine: EngineProcess) -> None:
    # The off-check of both process faults: B0 has no child that could outlive it or hold its
    # port (that a stopped B0 frees its port is the lifecycle tests' business).
    assert psutil.Process(b0_engine.process.pid).children(recursive=True) == []


def _port_free(port: int) -> bool:
    # Bound the way a fresh server binds (SO_REUSEADDR, as uvicorn): only a live socket blocks.
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_async_download_is_damaged_too() -> None:
    with in_process(fault_profile("corrupt_mp4")) as engine:
        job = engine.post("/v1/videos", data=FORM).json()
        for _ in range(500):
            if engine.get(f"/v1/videos/{job['id']}").json()["status"] == "completed":
                break
            time.sleep(0.01)
        content = engine.get(f"/v1/videos/{job['id']}/content")
    assert content.status_code == 200
    assert not decodes_completely(content.content)
