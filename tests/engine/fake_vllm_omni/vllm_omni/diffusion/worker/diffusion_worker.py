"""A DiffusionWorker-shaped worker and upstream's way of mixing an extension in ahead of it."""

from __future__ import annotations

import importlib
from typing import Any

from vllm_omni.diffusion.data import DiffusionOutput, OmniDiffusionConfig
from vllm_omni.diffusion.worker.diffusion_model_runner import DiffusionModelRunner


class DiffusionWorker:
    def __init__(self, local_rank: int, rank: int, od_config: OmniDiffusionConfig,
                 skip_load_model: bool = False) -> None:
        self.local_rank = local_rank
        self.rank = rank
        self.od_config = od_config
        self.model_runner: DiffusionModelRunner | None = DiffusionModelRunner(od_config)

    def execute_model(self, req: Any, od_config: OmniDiffusionConfig, kv_prefetch_job: Any = None,
                      diffusion_kv_metadata: Any = None) -> DiffusionOutput:
        assert self.model_runner is not None
        if isinstance(req, list):  # DP multi-concurrency: one envelope per DP rank
            req = req[0].req
        return self.model_runner.execute_model(req, kv_prefetch_job=kv_prefetch_job)

    def execute_model_batch(self, scheduler_output: Any, od_config: OmniDiffusionConfig) -> Any:
        new_reqs = scheduler_output.scheduled_new_reqs
        return [self.execute_model(new.req, od_config) for new in new_reqs]

    def execute_stepwise(self, scheduler_output: Any) -> Any:
        return self.execute_model_batch(scheduler_output, self.od_config)


def resolve_obj_by_qualname(qualname: str) -> Any:
    module_name, obj_name = qualname.rsplit(".", 1)
    return getattr(importlib.import_module(module_name), obj_name)


class WorkerWrapperBase:
    """Upstream's _prepare_worker_class: the extension class comes first in the bases."""

    def __init__(self, base_worker_class: type, worker_extension_cls: str | type | None) -> None:
        self.base_worker_class = base_worker_class
        self.worker_extension_cls = worker_extension_cls

    def _prepare_worker_class(self) -> type:
        worker_class = self.base_worker_class
        if self.worker_extension_cls:
            extension = self.worker_extension_cls
            if isinstance(extension, str):
                extension = resolve_obj_by_qualname(extension)
            if extension not in worker_class.__bases__:
                name = f"{worker_class.__name__}With{extension.__name__}"
                worker_class = type(name, (extension, worker_class), {})
        return worker_class
