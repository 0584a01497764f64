"""Engine lifecycle against the campaign's engine: bad input, cancellation, stop and restart."""

from __future__ import annotations

import time

import httpx
import pytest

from ref2va_accept.arms import Arms, build_request
from ref2va_accept.engines import port_is_free

pytestmark = [pytest.mark.acceptance, pytest.mark.lifecycle]


FileParts = list[tuple[str, tuple[str, bytes, str]]]


def _form(arms: Arms) -> tuple[dict[str, str], FileParts]:
    plan = arms.plan
    request = build_request(plan, plan.arm("b0"), plan.seeds[0])
    files = [("input_references", (r.filename, r.content, r.mime)) for r in request.references]
    return dict(request.fields), files


def test_bad_request_gets_400_and_server_stays_healthy(arms: Arms, track_id: str) -> None:
    engine = arms.start("b0")
    fields, files = _form(arms)
    fields["extra_params"] = "{not json"
    with httpx.Client(base_url=engine.base_url, timeout=60) as client:
        response = client.post("/v1/videos/sync", data=fields, files=files)
        assert response.status_code == 400, response.text[:300]
        assert client.get("/health").status_code == 200
        assert engine.running


def test_cancelled_async_job_leaves_server_able_to_serve(arms: Arms, track_id: str) -> None:
    engine = arms.start("b0")
    fields, files = _form(arms)
    timeouts = arms.plan.timeouts
    with httpx.Client(base_url=engine.base_url, timeout=timeouts.request_s) as client:
        created = client.post("/v1/videos", data=fields, files=files)
        assert created.status_code == 200, created.text[:300]
        job_id = created.json()["id"]
        cancelled = client.delete(f"/v1/videos/{job_id}")
        # 409 means the engine could not cancel within its 2 s window: then the job runs on,
        # and the next request must still be served once it is done.
        assert cancelled.status_code in (200, 409), cancelled.text[:300]
        deadline = time.monotonic() + timeouts.request_s
        while time.monotonic() < deadline:
            status = client.get(f"/v1/videos/{job_id}")
            if status.status_code == 404 or status.json().get("status") not in (
                "queued", "in_progress"
            ):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"job {job_id} still running {timeouts.request_s:g} s after cancel")
    outcome = arms.request(engine, "b0", kind="after_cancel", index=0)
    assert outcome.complete, outcome.explain()


def test_stop_leaves_nothing_and_restart_works(arms: Arms, track_id: str) -> None:
    first = arms.start("b0")
    port = first.spec.port
    audit = arms.registry.stop(first)
    assert audit.clean, audit.problems
    assert audit.survivors == [] and port_is_free(port)
    second = arms.start("b0")
    with httpx.Client(base_url=second.base_url, timeout=30) as client:
        assert client.get("/health").status_code == 200
    assert arms.registry.stop(second).clean
