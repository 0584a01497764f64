"""The fake vLLM-Omni (fake_vllm_omni/) on the import path for one test, and the worker class
with the extension mixed in the way upstream mixes it: shared by the extension's tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

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
