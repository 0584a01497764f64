"""``python -m engine.reference serve --config PROFILE.yaml [--host H] [--port P]``.

Start-up, in the order that gets to ``/health`` soonest: the profile is read and checked; torch
is imported; then the model is built (weights drawn and hashed, mostly in torch and hashlib with
the GIL released) on a worker thread while this one imports the HTTP side (FastAPI, uvicorn) and
the server starts once both are done. The weights are those of building it on this thread.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor

from engine.reference.errors import ProfileError
from engine.reference.faults import resolve_fault
from engine.reference.profile import load_profile
from engine.reference.stop_signals import reset_inherited_signals

logger = logging.getLogger("engine.reference")


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
    reset_inherited_signals()
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
    # torch here, on this thread (an import is bytecode under the GIL: nothing to overlap it with).
    from engine.reference.torch_generator import build_generator  # noqa: PLC0415

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ref2va-build") as pool:
        building = pool.submit(build_generator, profile.args, profile)
        from engine.reference.serving import serve  # noqa: PLC0415

        generator = building.result()
    return serve(
        profile, fault, generator, host=args.host, port=args.port, log_level=args.log_level
    )


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
