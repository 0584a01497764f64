"""The reference engine against the judge/engine contract (``ref2va_contract``): the routes it
serves, the headers of a sync response, the dump folder's layout, the ``enabled_path.json`` keys
the judge's audit reads, and the engine kinds its launch profiles name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import pytest

from engine.reference.app import create_app
from engine.reference.profile import ENGINE_NAME, LaunchProfile, load_profile
from ref2va_contract.api import (
    HEALTH_ROUTE,
    MODELS_ROUTE,
    SERVER_HEADERS,
    START_PROFILE_ROUTE,
    STOP_PROFILE_ROUTE,
    SYNC_VIDEO_ROUTE,
    VIDEOS_ROUTE,
)
from ref2va_contract.diagnostics import (
    ACCEPTANCE_FIELD,
    ALL_POINTS,
    APPROXIMATE_KEY,
    CACHE_DIT_PATH,
    CACHE_KEY,
    DTYPE_KEY,
    DUMP_DIR_KEY,
    DUMP_SUFFIX,
    ENABLED_PATH_FILE,
    POINTS_KEY,
    POINTS_WRITTEN_KEY,
    REFERENCE_KV_KEY,
    REUSED_STEPS_KEY,
)
from ref2va_contract.launch import DIAGNOSTICS_ROOT_ENV, ENGINE_KINDS, REFERENCE_ENGINE
from tests.engine.asgi_engine import AsgiEngine
from tests.engine.conftest import B0_PROFILE, REPO_ROOT, write_profile

pytestmark = pytest.mark.engine

FORM = {"prompt": "p", "width": "32", "height": "32", "num_frames": "5",
        "num_inference_steps": "6", "seed": "3"}


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(DIAGNOSTICS_ROOT_ENV, str(tmp_path / "root"))
    return tmp_path / "root"


def _served(profile: Path) -> Iterator[AsgiEngine]:
    served = AsgiEngine(create_app(load_profile(profile)))
    yield served
    served.close()


@pytest.fixture
def engine(root: Path) -> Iterator[AsgiEngine]:
    yield from _served(B0_PROFILE)


def _dump(engine: AsgiEngine, folder: Path) -> dict[str, object]:
    extra = json.dumps({ACCEPTANCE_FIELD: {DUMP_DIR_KEY: str(folder), POINTS_KEY: ALL_POINTS}})
    response = engine.post(SYNC_VIDEO_ROUTE, data={**FORM, "extra_params": extra})
    assert response.status_code == 200, response.text
    report: dict[str, object] = json.loads((folder / ENABLED_PATH_FILE).read_text())
    return report


def test_serves_the_contract_routes(engine: AsgiEngine) -> None:
    paths = {getattr(route, "path", None) for route in engine.app.routes}
    assert {HEALTH_ROUTE, MODELS_ROUTE, SYNC_VIDEO_ROUTE, VIDEOS_ROUTE} <= paths
    assert engine.get(HEALTH_ROUTE).status_code == 200
    assert engine.get(MODELS_ROUTE).status_code == 200


def test_profiler_routes_are_the_contract_ones(root: Path, tmp_path: Path) -> None:
    profile = write_profile(tmp_path / "prof.yaml", **{"profiler-config": {
        "profiler": "torch", "torch_profiler_dir": str(tmp_path / "traces")}})
    for served in _served(profile):
        paths = {getattr(route, "path", None) for route in served.app.routes}
        assert {START_PROFILE_ROUTE, STOP_PROFILE_ROUTE} <= paths


def test_a_sync_response_carries_every_contract_header(engine: AsgiEngine) -> None:
    response = engine.post(SYNC_VIDEO_ROUTE, data=FORM)
    assert response.status_code == 200, response.text
    assert [h for h in SERVER_HEADERS if h not in response.headers] == []


def test_the_dump_folder_has_the_contract_layout(engine: AsgiEngine, root: Path) -> None:
    folder = root / "r1"
    report = _dump(engine, folder)
    names = sorted(path.name for path in folder.iterdir())
    points = [name.removesuffix(DUMP_SUFFIX) for name in names if name != ENABLED_PATH_FILE]
    assert ENABLED_PATH_FILE in names
    assert all(name.endswith(DUMP_SUFFIX) for name in names if name != ENABLED_PATH_FILE)
    assert sorted(report[POINTS_WRITTEN_KEY]) == points  # type: ignore[call-overload]
    # What the judge's enabled-path audit reads, on B0: nothing approximate, nothing reused.
    assert report[APPROXIMATE_KEY] == [] and report[DTYPE_KEY] == "float32"
    assert report[CACHE_KEY][REUSED_STEPS_KEY] == []  # type: ignore[index]
    assert report[REFERENCE_KV_KEY][REUSED_STEPS_KEY] == []  # type: ignore[index]


def test_a_cache_run_is_reported_under_the_contract_names(root: Path, tmp_path: Path) -> None:
    profile = write_profile(tmp_path / "cache.yaml", **{
        "cache-backend": "cache_dit",
        "cache-config": {"Fn_compute_blocks": 1, "Bn_compute_blocks": 0, "max_warmup_steps": 1,
                         "residual_diff_threshold": 1.0, "max_continuous_cached_steps": 8}})
    for served in _served(profile):
        report = _dump(served, root / "cached")
        assert CACHE_DIT_PATH in report[APPROXIMATE_KEY]  # type: ignore[operator]
        assert report[CACHE_KEY][REUSED_STEPS_KEY] != []  # type: ignore[index]


def test_launch_profiles_name_the_contract_engine_kinds() -> None:
    assert get_args(LaunchProfile.model_fields["engine"].annotation) == ENGINE_KINDS
    assert ENGINE_NAME == REFERENCE_ENGINE
    folders = sorted(p.name for p in (REPO_ROOT / "engine" / "profiles").iterdir() if p.is_dir())
    assert folders == sorted(ENGINE_KINDS)
