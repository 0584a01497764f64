"""``python -m engine.reference serve --config PROFILE.yaml [--host H] [--port P]
[--profiler-config JSON]``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from types import FrameType

import uvicorn

from engine.reference.app import create_app
from engine.reference.errors import ProfileError
from engine.reference.fault_names import PROCESS_FAULTS
from engine.reference.faults import resolve_fault, start_fault_children
from engine.reference.profile import LaunchProfile, load_profile
from engine.reference.profiler_config import check_profiler_config

logger = logging.getLogger("engine.reference")

# Long enough for a finished response to go out; a generation still running is cancelled at
# SIGTERM anyway, so its request ends within one denoising step.
GRACEFUL_SHUTDOWN_S = 5


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Server(uvicorn.Server):
    """uvicorn's server, which also flags every generation the moment a signal arrives.

    The signal handler itself only sets flags and schedules the cancellation on the event loop.
    It must take no lock: a Python signal handler runs in the main thread between two bytecodes,
    so a second SIGTERM (the judge sends one to the main process and, if anything of the
    instance is still alive when it has exited or its grace is out, one to the process group and
    one to each process it knows, milliseconds apart) can land while the first handler is inside
    ``cancel_all``'s ``with lock:``. A nested handler that takes the same non-reentrant lock
    then waits forever on its own thread: the event loop never runs again, uvicorn never logs
    "Shutting down", and the judge has to SIGKILL an engine that had no request in flight. That
    was issue 13's "engine that outlived its stop".
    """

    def __init__(self, config: uvicorn.Config, on_exit: list[Callable[[], None]]) -> None:
        super().__init__(config)
        self._on_exit = on_exit
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exit_scheduled = False

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        if self.should_exit:  # a signal came before the loop ran: cancel at once
            self._schedule_exit_callbacks()
        await super().startup(sockets=sockets)

    def _schedule_exit_callbacks(self) -> None:
        if self._exit_scheduled or self._loop is None:
            return
        self._exit_scheduled = True
        for callback in self._on_exit:
            # call_soon_threadsafe appends to the loop's queue and wakes it: no lock taken.
            self._loop.call_soon_threadsafe(callback)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # uvicorn re-raises a captured signal once it has stopped, so the process would die "by
        # SIGTERM"; a stop that went gracefully should read as one, so the status is 0 instead.
        self._captured_signals.clear()
        self._schedule_exit_callbacks()

    def install_stop_handlers(self) -> None:
        """Our handler for SIGINT and SIGTERM from now until the process exits.

        Before uvicorn installs its own (a signal while the app is built flags the server, which
        then stops as soon as it has started), and after uvicorn restores what it found (a late
        SIGTERM, e.g. the judge's second one, would otherwise meet SIG_DFL and end the process
        "by signal" after a clean stop).
        """
        for sig in STOP_SIGNALS:
            signal.signal(sig, self.handle_exit)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine.reference")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the HTTP API for one launch profile")
    serve.add_argument("--config", required=True, help="launch profile YAML")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    serve.add_argument("--profiler-config", default=None, metavar="JSON",
                       help="vLLM's ProfilerConfig as JSON, as `vllm serve --profiler-config`: "
                            "replaces the profile's profiler-config (the judge's profiling "
                            "scenario starts an arm's profile so)")
    serve.add_argument("--text-encoder-tp-size", type=int, default=None, metavar="N",
                       help="vLLM-Omni's flag: replaces the profile's text-encoder-tp-size, "
                            "which this engine only reports in enabled_path.json (the host's "
                            "stand-in `vllm` passes its launch's on)")
    return parser


def _reset_inherited_signals() -> None:
    """SIGINT and SIGTERM as a fresh process has them, whatever the launcher left us.

    Dispositions set to SIG_IGN and blocked masks survive fork and exec: an engine started from a
    shell's background job has SIGINT ignored, and one started by a thread that blocks signals
    would never see SIGTERM. Until the server installs its handlers, a stop signal ends us.
    """
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


def _with_profiler(profile: LaunchProfile, raw: str) -> LaunchProfile:
    """The profile with ``--profiler-config`` in place of its own (ValueError when invalid)."""
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--profiler-config: not JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ValueError("--profiler-config: a JSON object expected")
    check_profiler_config(config)
    args = profile.args.model_copy(update={"profiler_config": config})
    return profile.model_copy(update={"args": args})


def _with_text_encoder_tp(profile: LaunchProfile, size: int) -> LaunchProfile:
    """The profile with ``--text-encoder-tp-size`` in place of its own (ValueError below 1)."""
    if size < 1:
        raise ValueError(f"--text-encoder-tp-size: at least 1, got {size}")
    args = profile.args.model_copy(update={"text_encoder_tp_size": size})
    return profile.model_copy(update={"args": args})


def main(argv: list[str] | None = None) -> int:
    _reset_inherited_signals()
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        profile = load_profile(args.config)
        if args.profiler_config is not None:
            profile = _with_profiler(profile, args.profiler_config)
        if args.text_encoder_tp_size is not None:
            profile = _with_text_encoder_tp(profile, args.text_encoder_tp_size)
        # Checked here too, so that an unknown fault from the environment names the file.
        fault = resolve_fault(profile.args, origin=args.config)
    except (ProfileError, ValueError) as exc:
        logger.error("%s", exc)
        return 2
    app = create_app(profile)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_config=None,  # our logging setup, so every line goes to stderr in one format
        log_level=args.log_level,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    server = _Server(config, on_exit=[app.state.engine.runner.cancel_all])
    server.install_stop_handlers()
    if fault is None or fault.name not in PROCESS_FAULTS:
        server.run()
        return 0
    # Bound here rather than inside uvicorn, so that a fault child can inherit the socket.
    listen_socket = config.bind_socket()
    # Never waited for or stopped: outliving the server is the fault.
    start_fault_children(fault, listen_socket)
    server.run(sockets=[listen_socket])
    return 0


def _exit_now(code: int) -> None:
    """Exit without the interpreter's teardown, once the server has stopped.

    By then uvicorn has shut down and the lifespan has joined the engine thread, so nothing of
    ours is left to finish; tearing down torch's modules would only add about a second (several
    under load) to every stop the judge waits for. Logs and streams are flushed first.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit_now(main())
