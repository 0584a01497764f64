"""The fake vLLM-Omni (fake_vllm_omni/) on the import path for one test, the worker class with
the extension mixed in the way upstream mixes it, and the module capture's requests and logs:
shared by the extension's tests."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ref2va_contract.diagnostics import (
    ACCEPTANCE_FIELD,
    CAPTURE_KEY,
    CAPTURE_LOG_FILE,
    CAPTURE_REPORT_KEY,
    DUMP_DIR_KEY,
    ENABLED_PATH_FILE,
    POINTS_KEY,
)
from ref2va_contract.launch import DIAGNOSTICS_ROOT_ENV

FAKE = Path(__file__).resolve().parent / "fake_vllm_omni"
EXTENSION = "engine.vllm_omni.extension.Ref2VADiagnostics"
FAKE_PACKAGES = ("vllm_omni", "cache_dit")


def drop_fake_modules() -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in FAKE_PACKAGES:
            del sys.modules[name]


@pytest.fixture
def upstream(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    """The fake's config, request and sampling classes and the mixed-in worker class."""
    drop_fake_modules()
    monkeypatch.syspath_prepend(str(FAKE))
    try:
        from vllm_omni.diffusion.data import OmniDiffusionConfig
        from vllm_omni.diffusion.request import OmniDiffusionRequest
        from vllm_omni.diffusion.worker.diffusion_worker import DiffusionWorker, WorkerWrapperBase
        from vllm_omni.inputs.data import OmniDiffusionSamplingParams

        worker_class = WorkerWrapperBase(DiffusionWorker, EXTENSION)._prepare_worker_class()
        yield SimpleNamespace(config=OmniDiffusionConfig, request=OmniDiffusionRequest,
                              sampling=OmniDiffusionSamplingParams, worker_class=worker_class)
    finally:
        drop_fake_modules()


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The diagnostics root allowed at launch."""
    allowed = tmp_path / "dumps"
    allowed.mkdir()
    monkeypatch.setenv(DIAGNOSTICS_ROOT_ENV, str(allowed))
    return allowed


def make_worker(up: SimpleNamespace, rank: int = 0, **config: Any) -> Any:
    return up.worker_class(local_rank=rank, rank=rank, od_config=up.config(**config))


# --------------------------------------------------------------------------- capture requests

STEPS = 6  # denoising steps of a capture test's request


def capture_request(up: SimpleNamespace, dump: Path, capture: Any = None,
                    points: Any = ("cond.text",), *, quality: str | None = "lossless") -> Any:
    """A request of the fake with an acceptance block (and a capture when given)."""
    import torch  # here: only the extension's tests, which skip without torch, call it

    block: dict[str, Any] = {DUMP_DIR_KEY: str(dump), POINTS_KEY: list(points)}
    if capture is not None:
        block[CAPTURE_KEY] = capture
    generator = torch.Generator().manual_seed(11)
    prompt = {"text": torch.randn(3, 8, generator=generator),
              "image": torch.randn(4, 8, generator=generator),
              "audio": torch.randn(2, 8, generator=generator)}
    sampling = up.sampling(num_inference_steps=STEPS, seed=5, quality=quality,
                           extra_args={"task": "ref2va", ACCEPTANCE_FIELD: block})
    return up.request(prompt=prompt, sampling_params=sampling, request_id="video_sync-1")


def run(worker: Any, req: Any) -> Any:
    return worker.execute_model(req, worker.od_config, None).output


def fail_writes_of(monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    """Every safetensors write of `point` fails as a full disk does; the others go through."""
    import safetensors.torch

    real = safetensors.torch.save_file

    def failing(tensors: dict[str, Any], filename: str, *args: Any, **kwargs: Any) -> None:
        if point in tensors:
            raise OSError(28, "No space left on device")
        real(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(safetensors.torch, "save_file", failing)


def log_lines(folder: Path) -> list[dict[str, Any]]:
    """The capture log's lines, as written."""
    text = (folder / CAPTURE_LOG_FILE).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def capture_report(folder: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((folder / ENABLED_PATH_FILE).read_text())[
        CAPTURE_REPORT_KEY]
    return report


def hook_count(pipeline: Any) -> int:
    return sum(len(module._forward_hooks) for module in pipeline.modules())


def _digests(entries: list[dict[str, Any]]) -> list[str]:
    return [entry["sha256"] for entry in entries]


def first_broken(plain: list[dict[str, Any]], planted: list[dict[str, Any]]) -> str:
    """The first call whose outputs differ while its inputs are equal; the calls before it are
    equal (written here apart from the judge's comparator, which the tests check as well)."""
    assert [(x["module"], x["call"]) for x in plain] == \
        [(y["module"], y["call"]) for y in planted]
    for x, y in zip(plain, planted, strict=True):
        if _digests(x["outputs"]) == _digests(y["outputs"]):
            continue
        assert _digests(x["inputs"]) == _digests(y["inputs"]), f"{x['module']}'s inputs differ"
        return str(x["module"])
    raise AssertionError("every call's outputs are equal")
