"""Engine errors (a generator that raises), driven in-process through the ASGI app."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from engine.reference.app import create_app
from engine.reference.generator import GeneratedMedia, GenerationSpec, StepMonitor
from engine.reference.profile import load_profile
from tests.engine.conftest import B0_PROFILE

pytestmark = pytest.mark.engine

FORM = {"prompt": "p", "width": "32", "height": "32", "num_frames": "5", "seed": "1"}


class BrokenGenerator:
    def generate(self, spec: GenerationSpec, monitor: StepMonitor) -> GeneratedMedia:
        raise RuntimeError("device fell over")


async def _exercise() -> dict[str, httpx.Response]:
    app = create_app(load_profile(B0_PROFILE), generator=BrokenGenerator())
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://engine") as client:
            answers = {"sync": await client.post("/v1/videos/sync", data=FORM)}
            job = (await client.post("/v1/videos", data=FORM)).json()
            for _ in range(200):
                answers["job"] = await client.get(f"/v1/videos/{job['id']}")
                if answers["job"].json().get("status") == "failed":
                    break
                await asyncio.sleep(0.01)
            answers["content"] = await client.get(f"/v1/videos/{job['id']}/content")
            answers["delete"] = await client.delete(f"/v1/videos/{job['id']}")
    finally:
        app.state.engine.runner.shutdown()
    return answers


def test_engine_errors_follow_the_real_server() -> None:
    answers = asyncio.run(_exercise())
    sync = answers["sync"]
    assert sync.status_code == 500
    assert sync.json()["error"]["message"] == "Video generation failed: device fell over"
    job = answers["job"]
    assert job.status_code == 500
    assert job.json()["status"] == "failed"
    assert job.json()["error"] == {"code": 500, "message": "device fell over"}
    assert answers["content"].status_code == 422
    assert answers["delete"].json()["deleted"] is True
