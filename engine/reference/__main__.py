"""``python -m engine.reference serve --config PROFILE.yaml [--host H] [--port P]``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from types import FrameType

import uvicorn

from engine.reference.app import create_app
from engine.reference.errors import ProfileError
from engine.reference.fault_names import PROCESS_FAULTS
from engine.reference.faults import resolve_fault, start_fault_children
from engine.reference.profile import load_profile

logger = logging.getLogger("engine.reference")

# Long enough for a finished response to go out; a generation still running is cancelled at
# SIGTERM anyway, so its request ends within one denoising step.
GRACEFUL_SHUTDOWN_S = 5


class _Server(uvicorn.Server):
    """uvicorn's server, which also flags every generation the moment a signal arrives."""

    def __init__(self, config: uvicorn.Config, on_exit: list[object]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        for callback in self._on_exit:
            callback()  # type: ignore[operator]
        super().handle_exit(sig, frame)
        # uvicorn re-raises a captured signal once it has stopped, so the process would die "by
        # SIGTERM"; a stop that went gracefully should read as one, so the status is 0 instead.
        self._captured_signals.clear()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine.reference")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the HTTP API for one launch profile")
    serve.add_argument("--config", required=True, help="launch profile YAML")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        profile = load_profile(args.config)
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
