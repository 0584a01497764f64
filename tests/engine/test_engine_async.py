"""Async jobs: create, poll, download, list, delete, and cancellation of a running generation."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.engine.conftest import EngineProcess, png_bytes, probe

pytestmark = pytest.mark.engine

FORM = {"prompt": "a lighthouse", "width": "64", "height": "48", "num_frames": "22", "seed": "3"}


def _wait_for(client: httpx.Client, job_id: str, status: str, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/videos/{job_id}").json()
        if job["status"] == status:
            return dict(job)
        time.sleep(0.05)
    pytest.fail(f"job {job_id} never reached {status}")


def test_async_job_lifecycle(client: httpx.Client) -> None:
    created = client.post("/v1/videos", data={**FORM, "num_inference_steps": "4"})
    assert created.status_code == 200, created.text
    job = created.json()
    assert job["id"].startswith("video_gen_") and job["object"] == "video"
    assert job["status"] in ("queued", "in_progress")
    done = _wait_for(client, job["id"], "completed")
    assert done["progress"] == 100 and done["file_name"] == f"{job['id']}.mp4"
    assert done["inference_time_s"] > 0 and done["peak_memory_mb"] > 0
    assert done["stage_durations"] == {} and done["error"] is None
    content = client.get(f"/v1/videos/{job['id']}/content")
    assert content.status_code == 200 and content.headers["content-type"] == "video/mp4"
    assert probe(content.content).video_frames == 22
    listed = client.get("/v1/videos", params={"limit": 1, "order": "desc"}).json()
    assert listed["object"] == "list" and listed["first_id"] == job["id"]
    deleted = client.delete(f"/v1/videos/{job['id']}").json()
    assert deleted == {"id": job["id"], "deleted": True, "object": "video.deleted"}
    assert client.get(f"/v1/videos/{job['id']}").status_code == 404


def test_unknown_job_is_404(client: httpx.Client) -> None:
    for response in (
        client.get("/v1/videos/video_gen_nope"),
        client.get("/v1/videos/video_gen_nope/content"),
        client.delete("/v1/videos/video_gen_nope"),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["message"] == "Video not found"


def test_cancel_running_job_then_engine_still_serves(slow_engine: EngineProcess) -> None:
    with httpx.Client(base_url=slow_engine.base_url, timeout=60.0) as client:
        # 200 steps at 100 ms each: 20 s unless the cancel lands.
        job = client.post("/v1/videos", data={**FORM, "num_inference_steps": "200"}).json()
        running = _wait_for(client, job["id"], "in_progress")
        assert 0 <= running["progress"] < 100
        assert client.get(f"/v1/videos/{job['id']}/content").status_code == 404
        started = time.monotonic()
        deleted = client.delete(f"/v1/videos/{job['id']}")
        assert deleted.status_code == 200, deleted.text
        assert deleted.json()["deleted"] is True
        assert time.monotonic() - started < 2.0
        assert client.get(f"/v1/videos/{job['id']}").status_code == 404
        response = client.post("/v1/videos/sync", data={**FORM, "num_inference_steps": "2"})
        assert response.status_code == 200 and probe(response.content).video_frames == 22


def test_upload_cap_from_profile(slow_engine: EngineProcess) -> None:
    big = png_bytes(8, 8) + b"\0" * (2 * 1024 * 1024)
    files = {"input_reference": ("big.png", big, "image/png")}
    response = httpx.post(
        f"{slow_engine.base_url}/v1/videos/sync", data=FORM, files=files, timeout=60.0
    )
    assert response.status_code == 400
    assert "1 MiB" in response.json()["error"]["message"]
