"""Deliberate faults, so that CI can prove every gate of the judge catches what it exists for.

A fault is OFF unless the launch profile names one (``fault: <name>``, with ``fault-at-step`` for
the faults that strike during denoising) or the environment variable ``REF2VA_REFERENCE_FAULT``
does (it wins over the profile). An active fault logs one WARNING line at start-up,
``FAULT INJECTION ACTIVE: <name>``, so that a log alone shows a run was rigged.

Faults act at three places, each reached without touching the pipeline's internals:

- during generation, through the generator seam (:class:`FaultyGenerator` wraps the monitor the
  generator reports every denoising step to, and the media it returns): ``crash``, ``hang``,
  ``http_500``, ``wrong_frame_count``, ``missing_audio``; and ``nondeterministic``, which sets
  ``GenerationSpec.unseeded_noise_step`` so the pipeline adds unseeded noise inside that step;
  and ``capture_hooks_off``, which sets ``GenerationSpec.capture_hooks_off`` so a localization
  capture hooks its modules but records no call (hooks that never fire);
- on the wire, as ASGI middleware over ``video/mp4`` responses (:class:`MediaFaultMiddleware`):
  ``truncated_body``, ``corrupt_mp4``;
- at process level, started by ``serve`` before it listens (:func:`start_fault_children`):
  ``worker_ignores_sigterm``, ``port_held_after_exit``.

``hang`` blocks the engine thread without polling the cancel flag, so SIGTERM does NOT end the
server: uvicorn stops listening, then the lifespan shutdown waits on the hung step forever. Only
SIGKILL ends it, as with a device call that never returns. ``crash`` exits with status 70.

The fault names, their groups and the environment variable live in :mod:`.fault_names`, which
the launch-profile schema reads without importing this module.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.reference.fault_names import (
    CAPTURE_FAULTS,
    COLLECTIVE_FAULTS,
    FAULT_ENV,
    FAULT_NAMES,
    MEDIA_FAULTS,
    PROCESS_FAULTS,
    STEP_FAULTS,
    unknown_fault_message,
)

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from engine.reference.generator import (
        GeneratedMedia,
        GenerationSpec,
        StepMonitor,
        VideoGenerator,
    )
    from engine.reference.profile import EngineArgs

logger = logging.getLogger(__name__)


# EX_SOFTWARE: a distinctive non-zero status, so a test can tell the injected crash from others.
CRASH_EXIT_CODE = 70
# Names the children carry in argv[0], the way vLLM-Omni's processes name themselves in ``ps``.
WORKER_PROCESS_NAME = "vLLM-Omni::DiffusionWorker-0"
LISTENER_PROCESS_NAME = "vLLM-Omni::APIServer-listener"
# Set in every fault child's environment, so a test can tell them apart from other children.
FAULT_CHILD_ENV = "REF2VA_FAULT_CHILD"
# The children only sleep; ignoring SIGTERM is the whole fault. Stdlib only: a child started
# under another argv[0] may not find the virtual environment's site-packages.
_STUBBORN_CHILD = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "while True:\n"
    "    time.sleep(3600)\n"
)


class FaultInjected(RuntimeError):
    """The engine error that ``http_500`` raises inside a generation."""


@dataclass(frozen=True)
class FaultPlan:
    """The one fault this server injects; ``at_step`` None means the middle denoising step."""

    name: str
    at_step: int | None = None
    source: str = "profile"  # "profile" or the environment variable's name, for the log

    def step_for(self, total: int) -> int:
        if self.at_step is None:
            return max(1, (total + 1) // 2)
        return min(self.at_step, max(1, total))


def resolve_fault(
    args: EngineArgs, environ: Mapping[str, str] = os.environ, *, origin: str = "launch profile"
) -> FaultPlan | None:
    """The fault the profile's args and the environment switch on, or None.

    Raises ValueError naming ``origin`` (the profile file) when the environment names an unknown
    fault; an unknown name in the profile itself is already refused when the profile is read.
    """
    from_env = environ.get(FAULT_ENV, "").strip()
    if from_env:
        if from_env not in FAULT_NAMES:
            raise ValueError(
                f"{origin}: {FAULT_ENV}={from_env!r}: {unknown_fault_message(from_env)}"
            )
        return FaultPlan(name=from_env, at_step=args.fault_at_step, source=FAULT_ENV)
    if args.fault is None:
        return None
    return FaultPlan(name=args.fault, at_step=args.fault_at_step)


def announce(plan: FaultPlan | None) -> None:
    if plan is not None:
        logger.warning("FAULT INJECTION ACTIVE: %s", plan.name)
        logger.info("fault %s switched on by %s", plan.name, plan.source)


# --- during generation: through the generator seam -------------------------------------------


class _FaultMonitor:
    """Passes every step on to the real monitor, and strikes at the planned one."""

    def __init__(self, inner: StepMonitor, plan: FaultPlan) -> None:
        self._inner = inner
        self._plan = plan

    def idle(self, seconds: float) -> None:
        self._inner.idle(seconds)

    def step_done(self, step: int, total: int) -> None:
        self._inner.step_done(step, total)
        if step != self._plan.step_for(total):
            return
        if self._plan.name == "crash":
            logger.error("FAULT crash: exiting with status %d at step %d", CRASH_EXIT_CODE, step)
            for handler in logging.getLogger().handlers:
                handler.flush()
            # os._exit, not sys.exit: a real crash runs no cleanup and answers no request.
            os._exit(CRASH_EXIT_CODE)
        if self._plan.name == "hang":
            logger.error("FAULT hang: blocking forever at step %d", step)
            # Deaf to the cancel flag on purpose: a hung device call does not poll it either.
            threading.Event().wait()
        if self._plan.name == "http_500":
            raise FaultInjected(f"injected fault http_500 at denoising step {step}")
        if self._plan.name == "collective_avg_unsupported":
            raise FaultInjected(
                "HCCL all_reduce: ReduceOp.AVG is not supported (Cache-DiT's caching decision "
                f"at denoising step {step}; injected fault collective_avg_unsupported)")


class FaultyGenerator:
    """Wraps the real generator; the request path only ever sees the seam."""

    def __init__(self, inner: VideoGenerator, plan: FaultPlan) -> None:
        self._inner = inner
        self._plan = plan

    def validate(self, spec: GenerationSpec) -> None:
        # A fault server must still refuse bad requests with 400, as the real one would.
        validate = getattr(self._inner, "validate", None)
        if validate is not None:
            validate(spec)

    def generate(self, spec: GenerationSpec, monitor: StepMonitor) -> GeneratedMedia:
        if self._plan.name == "nondeterministic":
            # Noise from an unseeded generator inside one denoising step: every later comparison
            # point differs between two identical requests, yet the media stays complete.
            step = self._plan.step_for(spec.num_inference_steps)
            return self._inner.generate(
                dataclasses.replace(spec, unseeded_noise_step=step), monitor
            )
        if self._plan.name in CAPTURE_FAULTS:
            return self._inner.generate(dataclasses.replace(spec, capture_hooks_off=True),
                                        monitor)
        if self._plan.name in STEP_FAULTS:
            return self._inner.generate(spec, _FaultMonitor(monitor, self._plan))
        if self._plan.name in COLLECTIVE_FAULTS:
            if spec.quality == "lossless":  # no cache installed: the collective never runs
                return self._inner.generate(spec, monitor)
            first = dataclasses.replace(self._plan, at_step=1)
            return self._inner.generate(spec, _FaultMonitor(monitor, first))
        media = self._inner.generate(spec, monitor)
        if self._plan.name == "wrong_frame_count":
            count = media.num_frames - 1
            return dataclasses.replace(
                media, num_frames=count, frames=itertools.islice(media.frames, count)
            )
        if self._plan.name == "missing_audio":
            return dataclasses.replace(media, audio=None)
        return media


def wrap_generator(generator: VideoGenerator, plan: FaultPlan | None) -> VideoGenerator:
    if plan is None or plan.name not in (STEP_FAULTS | MEDIA_FAULTS | COLLECTIVE_FAULTS
                                         | CAPTURE_FAULTS):
        return generator
    return FaultyGenerator(generator, plan)


# --- on the wire: ASGI middleware over MP4 responses -----------------------------------------


def corrupt_mp4(video: bytes) -> bytes:
    """Zero the second half of the media data, keeping the length and the container intact.

    The box tables still point at every sample, so a demuxer reads the file; the samples in the
    zeroed half hold zero-length NAL units, so those frames cannot be decoded.
    """
    data = bytearray(video)
    mdat = data.find(b"mdat")
    start = mdat + 4 if mdat >= 4 else 0
    end = len(data)
    if mdat >= 4:
        box_size = int.from_bytes(data[mdat - 4 : mdat], "big")
        if box_size >= 8:
            end = min(len(data), mdat - 4 + box_size)
    middle = start + (end - start) // 2
    data[middle:end] = bytes(end - middle)
    return bytes(data)


class MediaFaultMiddleware:
    """Damages ``video/mp4`` responses (sync route and async downloads) on their way out."""

    def __init__(self, app: ASGIApp, fault: str) -> None:
        self.app = app
        self.fault = fault

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        body = bytearray()

        async def damaging_send(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", []))
                if headers.get(b"content-type", b"").startswith(b"video/mp4"):
                    start = message  # held until the whole body is known
                    return
            elif message["type"] == "http.response.body" and start is not None:
                body.extend(message.get("body", b""))
                if message.get("more_body", False):
                    return
                await self._send_damaged(send, start, bytes(body))
                return
            await send(message)

        await self.app(scope, receive, damaging_send)

    async def _send_damaged(self, send: Send, start: Message, body: bytes) -> None:
        if self.fault == "corrupt_mp4":
            logger.warning("FAULT corrupt_mp4: damaging a %d-byte MP4", len(body))
            await send(start)
            await send({"type": "http.response.body", "body": corrupt_mp4(body)})
            return
        # truncated_body: the start message still declares the full Content-Length; returning
        # without the rest makes the server close the connection mid-body.
        logger.warning("FAULT truncated_body: sending %d of %d bytes", len(body) // 2, len(body))
        await send(start)
        half = body[: len(body) // 2]
        await send({"type": "http.response.body", "body": half, "more_body": True})


# --- at process level: children that outlive a SIGTERM --------------------------------------


def _start_stubborn_child(
    name: str, plan: FaultPlan, pass_fds: tuple[int, ...] = ()
) -> subprocess.Popen[bytes]:
    # A plain child of the server: same process group, and the server's environment (so the
    # judge's instance tag is inherited), plus a marker of our own.
    env = {**os.environ, FAULT_CHILD_ENV: plan.name}
    return subprocess.Popen(
        [name, "-c", _STUBBORN_CHILD],
        executable=sys.executable,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=pass_fds,
    )


def start_fault_children(
    plan: FaultPlan | None, listen_socket: socket.socket | None
) -> list[subprocess.Popen[bytes]]:
    """Start the children a process fault needs; ``listen_socket`` is the server's own."""
    if plan is None or plan.name not in PROCESS_FAULTS:
        return []
    if plan.name == "worker_ignores_sigterm":
        child = _start_stubborn_child(WORKER_PROCESS_NAME, plan)
        logger.warning("FAULT worker_ignores_sigterm: worker pid %d ignores SIGTERM", child.pid)
        return [child]
    if listen_socket is None:
        raise RuntimeError("port_held_after_exit needs the listening socket")
    listen_socket.set_inheritable(True)
    child = _start_stubborn_child(LISTENER_PROCESS_NAME, plan, pass_fds=(listen_socket.fileno(),))
    logger.warning(
        "FAULT port_held_after_exit: pid %d holds port %d past the server's exit",
        child.pid,
        listen_socket.getsockname()[1],
    )
    return [child]
