"""Fixtures for the reference engine's own tests: real server processes and small media files."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import httpx
import numpy as np
import pytest
import yaml

from ref2va_accept.engines._leftovers import die_with_parent

# The worker extension's tests run it in the fake vLLM-Omni: `upstream` and its diagnostics `root`.
from tests.engine.fake_upstream import root, upstream  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parents[2]
B0_PROFILE = REPO_ROOT / "engine" / "profiles" / "reference" / "b0.yaml"
# A deadline, not a wait: as test_engine_faults.py's. At 30 s, engines of a CI selftest on a slow
# two-core machine (an engine start ~4 s of CPU, beside the VBench build, three workers and the
# other phases) once logged nothing before it.
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0


def engine_command(profile: Path, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "engine.reference",
        "serve",
        "--config",
        str(profile),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


def engine_env() -> dict[str, str]:
    env = dict(os.environ)
    # The engine imports the judge/engine contract from src/ (installed with the judge as well).
    paths = [str(REPO_ROOT), str(REPO_ROOT / "src"), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class EngineProcess:
    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        """SIGTERM by PID, then SIGKILL by PID if it lingers; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)
        return int(self.process.returncode)


@contextmanager
def running_engine(
    profile: Path,
    log_dir: Path,
    extra_env: dict[str, str] | None = None,
    *,
    new_session: bool = False,
    preexec_fn: Callable[[], None] | None = None,
) -> Iterator[EngineProcess]:
    port = free_port()
    log_path = log_dir / f"engine-{port}.log"

    def before_exec() -> None:
        # As the judge starts an engine: SIGTERM when this process dies, so that an engine of a
        # test whose worker was killed (no teardown ran) does not live on; then the test's own.
        die_with_parent()
        if preexec_fn is not None:
            preexec_fn()

    with log_path.open("wb") as log:
        process = subprocess.Popen(
            engine_command(profile, port),
            cwd=REPO_ROOT,
            env={**engine_env(), **(extra_env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=new_session,  # its own group, as the judge starts it
            preexec_fn=before_exec if sys.platform == "linux" else preexec_fn,  # noqa: PLW1509
        )
    engine = EngineProcess(process, f"http://127.0.0.1:{port}", log_path)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"engine exited early ({process.returncode}):\n{engine.log()}")
            try:
                if httpx.get(f"{engine.base_url}/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"engine not healthy after {STARTUP_TIMEOUT_S} s:\n{engine.log()}")
            time.sleep(0.1)
        yield engine
    finally:
        engine.stop()


def write_profile(path: Path, **args: object) -> Path:
    profile = yaml.safe_load(B0_PROFILE.read_text())
    profile["args"].update(args)
    path.write_text(yaml.safe_dump(profile))
    return path


# Module-scoped: an engine is stopped once the module that started it is done, so that no
# engine outlives the tests that use it (a session-scoped one lived on in each xdist worker,
# through every other file that worker ran).
@pytest.fixture(scope="module")
def b0_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineProcess]:
    with running_engine(B0_PROFILE, tmp_path_factory.mktemp("b0")) as engine:
        yield engine


@pytest.fixture(scope="module")
def slow_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineProcess]:
    """An engine whose steps cost 100 ms each, and whose uploads are capped at 1 MiB."""
    folder = tmp_path_factory.mktemp("slow")
    profile = write_profile(folder / "slow.yaml", **{"step-cost-ms": 100, "max-upload-mib": 1})
    with running_engine(profile, folder) as engine:
        yield engine


@pytest.fixture
def client(b0_engine: EngineProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=b0_engine.base_url, timeout=60.0) as http:
        yield http


def png_bytes(width: int = 40, height: int = 24, seed: int = 0) -> bytes:
    """A small noisy PNG, encoded with PyAV."""
    rgb = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="image2pipe") as container:
        stream = container.add_stream("png")
        stream.width, stream.height, stream.pix_fmt = width, height, "rgb24"
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return buffer.getvalue()


@dataclass(frozen=True)
class Probe:
    video_frames: int
    fps: Fraction
    width: int
    height: int
    video_codec: str
    pix_fmt: str
    audio_codec: str | None
    audio_rate: int | None
    audio_channels: int | None
    audio_duration_s: float | None
    first_frame: np.ndarray


def probe(mp4: bytes) -> Probe:
    """Decode every video frame and read the audio stream's declared duration."""
    with av.open(io.BytesIO(mp4)) as container:
        video = container.streams.video[0]
        frames = list(container.decode(video))
        audio = container.streams.audio[0] if container.streams.audio else None
        return Probe(
            video_frames=len(frames),
            fps=Fraction(video.average_rate),
            width=video.codec_context.width,
            height=video.codec_context.height,
            video_codec=video.codec_context.name,
            pix_fmt=str(video.codec_context.pix_fmt),
            audio_codec=audio.codec_context.name if audio else None,
            audio_rate=audio.codec_context.sample_rate if audio else None,
            audio_channels=audio.codec_context.channels if audio else None,
            audio_duration_s=(
                float(audio.duration * audio.time_base) if audio and audio.duration else None
            ),
            first_frame=frames[0].to_ndarray(format="rgb24"),
        )
