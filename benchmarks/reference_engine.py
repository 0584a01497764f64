"""Time the reference engine on this machine: one 5 s and one 15 s request at the CI size.

Runs the app in-process over ASGI (no port, no subprocess), so the times are the engine's own:
generation plus MP4 muxing. ``python benchmarks/reference_engine.py [PROFILE.yaml ...]``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from engine.reference.app import create_app  # noqa: E402
from engine.reference.profile import load_profile  # noqa: E402

logger = logging.getLogger("benchmarks.reference_engine")
CI_REQUEST = {
    "prompt": "a red fox in snow",
    "width": "112",
    "height": "64",
    "fps": "24",
    "num_inference_steps": "50",
    "flow_shift": "12",
    "seed": "42",
}


async def _time(profile_path: Path) -> None:
    app = create_app(load_profile(profile_path))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://engine", timeout=600) as c:
        for frames in ("124", "362"):
            started = time.perf_counter()
            response = await c.post("/v1/videos/sync", data={**CI_REQUEST, "num_frames": frames})
            elapsed = time.perf_counter() - started
            response.raise_for_status()
            logger.info(
                "%s: %s frames at 112x64, 50 steps: %.2f s (%d bytes)",
                profile_path.stem,
                frames,
                elapsed,
                len(response.content),
            )
    app.state.engine.runner.shutdown()


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    logging.getLogger("engine").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    profiles = [Path(arg) for arg in argv] or [
        REPO_ROOT / "engine" / "profiles" / "reference" / "b0.yaml"
    ]
    for profile in profiles:
        asyncio.run(_time(profile))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
