"""Profiling: vLLM's profiler-config with /start_profile and /stop_profile, and the pipeline
profiler's per-stage times in X-Stage-Durations and the job's stage_durations."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi import FastAPI

from engine.reference.app import create_app
from engine.reference.errors import ProfileError
from engine.reference.generator import (
    GeneratedMedia,
    GenerationSpec,
    StepMonitor,
    VideoGenerator,
)
from engine.reference.profile import load_profile
from engine.reference.torch_generator import build_generator
from tests.engine.asgi_engine import AsgiEngine
from tests.engine.conftest import write_profile

pytestmark = pytest.mark.engine

FORM = {
    "prompt": "a lighthouse",
    "width": "32",
    "height": "32",
    "num_frames": "5",
    "num_inference_steps": "2",
    "seed": "3",
}


class TorchTouchingGenerator:
    """The profile's own generator, plus one matmul of known shapes per request.

    The profiler's plumbing is tested whatever the pipeline computes with; the known operator
    and shapes make the assertion exact.
    """

    def __init__(self, inner: VideoGenerator) -> None:
        self._inner = inner

    def generate(self, spec: GenerationSpec, monitor: StepMonitor) -> GeneratedMedia:
        torch.mm(torch.ones(8, 16), torch.ones(16, 4))
        return self._inner.generate(spec, monitor)


def _app(profile_path: Path, *, touch_torch: bool = True) -> FastAPI:
    profile = load_profile(profile_path)
    generator = build_generator(profile.args)
    return create_app(profile, TorchTouchingGenerator(generator) if touch_torch else generator)


@pytest.fixture
def client_for(tmp_path: Path) -> Iterator[Any]:
    clients: list[AsgiEngine] = []

    def open_client(*, touch_torch: bool = True, **args: object) -> AsgiEngine:
        path = write_profile(tmp_path / f"profile-{len(clients)}.yaml", **args)
        client = AsgiEngine(_app(path, touch_torch=touch_torch))
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        client.close()


def _trace_events(trace: Path) -> list[dict[str, Any]]:
    opener = gzip.open if trace.suffix == ".gz" else open
    with opener(trace, "rt") as handle:
        events: list[dict[str, Any]] = json.load(handle)["traceEvents"]
    return events


def _traces(folder: Path) -> list[Path]:
    return sorted(folder.glob("*_stage_0_rep_0_diffusion_*/trace_rank0.json*"))


def test_profile_routes_are_absent_without_a_profiler(client_for: Any) -> None:
    client = client_for()
    assert client.post("/start_profile").status_code == 404
    assert client.post("/stop_profile").status_code == 404


def test_trace_between_start_and_stop_has_operators_and_shapes(
    client_for: Any, tmp_path: Path
) -> None:
    traces = tmp_path / "traces"
    config = {
        "profiler": "torch",
        "torch_profiler_dir": str(traces),
        "torch_profiler_record_shapes": True,
        "torch_profiler_with_stack": False,
        "torch_profiler_use_gzip": False,
    }
    client = client_for(**{"profiler-config": config})
    assert client.post("/start_profile").json() == {"status": "SUCCESS"}
    assert client.post("/v1/videos/sync", data=FORM).status_code == 200
    assert client.post("/stop_profile", json={"stages": [0]}).json() == {"status": "SUCCESS"}

    (trace,) = _traces(traces)
    assert trace.name == "trace_rank0.json"
    matmuls = [event for event in _trace_events(trace) if event.get("name") == "aten::mm"]
    assert matmuls, "the request's operators are in the trace"
    assert matmuls[0]["args"]["Input Dims"] == [[8, 16], [16, 4]]


def test_engine_trace_is_gzipped_by_default_under_a_cwd_relative_dir(
    client_for: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = {"profiler": "torch", "torch_profiler_dir": "rel", "torch_profiler_with_stack": False}
    # The engine's own generator this time: its operators are what a real trace shows.
    client = client_for(touch_torch=False, **{"profiler-config": config})
    client.post("/start_profile")
    client.post("/v1/videos/sync", data=FORM)
    client.post("/stop_profile")
    (trace,) = _traces(tmp_path / "rel")
    assert trace.name == "trace_rank0.json.gz"
    assert any(event.get("name", "").startswith("aten::") for event in _trace_events(trace))


def test_start_twice_fails_and_stop_without_start_succeeds(client_for: Any, tmp_path: Path) -> None:
    config = {"profiler": "torch", "torch_profiler_dir": str(tmp_path / "t")}
    client = client_for(**{"profiler-config": config})
    assert client.post("/stop_profile").json() == {"status": "SUCCESS"}
    assert client.post("/start_profile").status_code == 200
    again = client.post("/start_profile")
    assert again.status_code == 500
    assert again.json()["error"]["message"].startswith("Failed to start profiler:")
    assert client.post("/stop_profile").status_code == 200


@pytest.mark.parametrize(
    ("config", "complaint"),
    [
        ({"profiler": "torch"}, "torch_profiler_dir must be set"),
        ({"profiler": "torch", "torch_profiler_dir": "x", "bogus": 1}, "bogus"),
        ({"profiler": "cuda"}, "no CUDA profiler"),
    ],
)
def test_bad_profiler_config_is_refused_naming_the_file(
    tmp_path: Path, config: dict[str, object], complaint: str
) -> None:
    path = write_profile(tmp_path / "bad.yaml", **{"profiler-config": config})
    with pytest.raises(ProfileError, match=complaint) as caught:
        load_profile(path)
    assert str(path) in str(caught.value)


def test_stage_durations_only_with_the_pipeline_profiler(client_for: Any) -> None:
    plain = client_for().post("/v1/videos/sync", data=FORM)
    assert plain.headers["X-Stage-Durations"] == "{}"

    client = client_for(**{"enable-diffusion-pipeline-profiler": True})
    stages = json.loads(client.post("/v1/videos/sync", data=FORM).headers["X-Stage-Durations"])
    # The pipeline's own stages, plus the muxing the runner times.
    assert "mux" in stages
    assert len(stages) >= 3
    assert all(isinstance(seconds, float) and seconds >= 0.0 for seconds in stages.values())

    job = client.post("/v1/videos", data=FORM).json()
    for _ in range(500):
        job = client.get(f"/v1/videos/{job['id']}").json()
        if job["status"] == "completed":
            break
        time.sleep(0.01)
    assert set(job["stage_durations"]) == set(stages)


def test_the_command_line_profiler_config_replaces_the_profiles(tmp_path: Path) -> None:
    """`--profiler-config JSON`, as `vllm serve` takes it: how the judge's profiling scenario
    starts an arm's own profile with the profiler on. A bad value is a ValueError, which `main`
    logs in one line before exiting 2, as for a bad profile."""
    from engine.reference.__main__ import _with_profiler

    profile = load_profile(write_profile(tmp_path / "p.yaml"))
    assert profile.args.profiler_config is None
    traces = tmp_path / "traces"
    on = _with_profiler(profile, json.dumps({"profiler": "torch",
                                             "torch_profiler_dir": str(traces)}))
    assert on.args.profiler_config == {"profiler": "torch", "torch_profiler_dir": str(traces)}
    assert on.name == profile.name and on.args.seed_salt == profile.args.seed_salt
    for bad, said in (("{not json", "--profiler-config: not JSON"),
                      ("[1]", "--profiler-config: a JSON object expected"),
                      ('{"profiler": "torch"}', "invalid profiler-config")):
        with pytest.raises(ValueError, match=said):
            _with_profiler(profile, bad)
