"""Diagnostics over HTTP: the acceptance block is checked while the form is parsed (a 400, no
job), and an accepted one leaves its points and enabled_path.json before the response returns; a
capture that stops answers the stopped status once they are written, and the server serves on."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.reference.app import create_app
from engine.reference.profile import load_profile
from ref2va_contract.api import SYNC_VIDEO_ROUTE
from ref2va_contract.diagnostics import (
    ACCEPTANCE_FIELD,
    CAPTURE_LOG_FILE,
    CAPTURE_STOPPED_MARKER,
    CAPTURE_STOPPED_STATUS,
    DUMP_SUFFIX,
    ENABLED_PATH_FILE,
)
from ref2va_contract.launch import DIAGNOSTICS_ROOT_ENV
from tests.engine.asgi_engine import AsgiEngine
from tests.engine.conftest import B0_PROFILE

pytestmark = pytest.mark.engine

FORM = {
    "prompt": "p",
    "width": "32",
    "height": "32",
    "num_frames": "5",
    "num_inference_steps": "3",
    "seed": "3",
}


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AsgiEngine]:
    monkeypatch.setenv(DIAGNOSTICS_ROOT_ENV, str(tmp_path / "root"))
    served = AsgiEngine(create_app(load_profile(B0_PROFILE)))
    yield served
    served.close()


def _post(engine: AsgiEngine, acceptance: dict[str, object]) -> tuple[int, str]:
    extra = json.dumps({ACCEPTANCE_FIELD: acceptance})
    response = engine.post(SYNC_VIDEO_ROUTE, data={**FORM, "extra_params": extra})
    return response.status_code, response.text


def test_points_and_enabled_path_are_written(engine: AsgiEngine, tmp_path: Path) -> None:
    folder = tmp_path / "root" / "run1"
    status, text = _post(engine, {"dump_dir": str(folder), "points": ["dit.step001"]})
    assert status == 200, text
    assert sorted(path.name for path in folder.iterdir()) == [
        f"dit.step001{DUMP_SUFFIX}",
        ENABLED_PATH_FILE,
    ]
    enabled = json.loads((folder / ENABLED_PATH_FILE).read_text())
    assert enabled["weights_sha256"] and enabled["cache"]["backend"] == "none"
    assert set(enabled["stages"]) >= {"encode", "denoise", "decode_video"}


def test_dump_dir_outside_the_root_is_400(engine: AsgiEngine, tmp_path: Path) -> None:
    status, text = _post(engine, {"dump_dir": str(tmp_path / "elsewhere"), "points": "all"})
    assert status == 400 and "outside" in text
    assert not (tmp_path / "elsewhere").exists()


def test_unknown_point_is_400_listing_valid_names(engine: AsgiEngine, tmp_path: Path) -> None:
    status, text = _post(engine, {"dump_dir": str(tmp_path / "root" / "x"), "points": ["z"]})
    assert status == 400 and "cond.text" in text and "dit.stepNNN" in text


def test_a_capture_that_stops_answers_the_stopped_status_and_the_engine_serves_on(
        engine: AsgiEngine, tmp_path: Path) -> None:
    folder = tmp_path / "root" / "stop"
    status, text = _post(engine, {"dump_dir": str(folder), "points": ["dit.step001"],
                                  "capture": {"stage": "dit", "step": 1, "stop": True}})
    assert status == CAPTURE_STOPPED_STATUS, text
    assert json.loads(text)["error"]["message"].startswith(f"{CAPTURE_STOPPED_MARKER}: ")
    assert sorted(p.name for p in folder.iterdir()) == [
        CAPTURE_LOG_FILE, f"dit.step001{DUMP_SUFFIX}", ENABLED_PATH_FILE]
    report = json.loads((folder / ENABLED_PATH_FILE).read_text())
    assert report["capture"]["stopped"] == {"stage": "dit", "step": 1}
    # the same server answers the next request whole, and an async job says why it ended
    whole = engine.post(SYNC_VIDEO_ROUTE, data=FORM)
    assert whole.status_code == 200 and whole.headers["content-type"] == "video/mp4"
    extra = json.dumps({ACCEPTANCE_FIELD: {
        "dump_dir": str(tmp_path / "root" / "job"), "points": ["cond.text"],
        "capture": {"stage": "encoders", "step": None, "stop": True}}})
    job = engine.post("/v1/videos", data={**FORM, "extra_params": extra}).json()
    for _ in range(1000):  # the job runs on the engine's thread: up to 20 s
        seen = engine.get(f"/v1/videos/{job['id']}")
        if seen.json()["status"] != "queued" and seen.json()["status"] != "in_progress":
            break
        time.sleep(0.02)
    assert seen.status_code == CAPTURE_STOPPED_STATUS
    assert seen.json()["error"]["message"].startswith(CAPTURE_STOPPED_MARKER)


def test_without_stop_the_same_capture_answers_the_mp4(engine: AsgiEngine, tmp_path: Path) -> None:
    folder = tmp_path / "root" / "through"
    status, text = _post(engine, {"dump_dir": str(folder), "points": ["dit.step001"],
                                  "capture": {"stage": "dit", "step": 1}})
    assert status == 200, text
    assert json.loads((folder / ENABLED_PATH_FILE).read_text())["capture"]["stopped"] is None
