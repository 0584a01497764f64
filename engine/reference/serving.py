"""The HTTP server of one engine: uvicorn over the app, stopped cleanly by SIGINT and SIGTERM.

Imported by ``__main__`` only once the model is being built (the import of FastAPI and uvicorn
overlaps it), so nothing here is needed before the profile is read.
"""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Callable
from types import FrameType

import uvicorn

from engine.reference.app import create_app
from engine.reference.fault_names import PROCESS_FAULTS
from engine.reference.faults import FaultPlan, start_fault_children
from engine.reference.generator import VideoGenerator
from engine.reference.profile import LaunchProfile
from engine.reference.stop_signals import STOP_SIGNALS

# Long enough for a finished response to go out; a generation still running is cancelled at
# SIGTERM anyway, so its request ends within one denoising step.
GRACEFUL_SHUTDOWN_S = 5


class Server(uvicorn.Server):
    """uvicorn's server, which also flags every generation the moment a signal arrives.

    The signal handler itself only sets flags and schedules the cancellation on the event loop.
    It must take no lock: a Python signal handler runs in the main thread between two bytecodes,
    so a second SIGTERM (the judge sends one to the process group, then one to each process it
    knows, milliseconds apart) can land while the first handler is inside ``cancel_all``'s
    ``with lock:``. A nested handler that takes the same non-reentrant lock then waits forever on
    its own thread: the event loop never runs again, uvicorn never logs "Shutting down", and the
    judge has to SIGKILL an engine that had no request in flight. That was issue 13's "engine
    that outlived its stop".
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


def serve(
    profile: LaunchProfile,
    fault: FaultPlan | None,
    generator: VideoGenerator,
    *,
    host: str,
    port: int,
    log_level: str,
) -> int:
    """Serve ``profile``'s app over ``generator`` until a stop signal; the exit status."""
    app = create_app(profile, generator=generator)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,  # our logging setup, so every line goes to stderr in one format
        log_level=log_level,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    server = Server(config, on_exit=[app.state.engine.runner.cancel_all])
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
