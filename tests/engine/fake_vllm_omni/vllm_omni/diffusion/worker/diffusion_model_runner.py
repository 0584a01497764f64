"""The runner: owns the pipeline and the cache backend, runs one request in a forward context,
and answers a request stopped by DiffusionRequestAbortedError as aborted (as upstream does)."""

from __future__ import annotations

from typing import Any

from vllm_omni.diffusion.data import (
    DiffusionOutput,
    DiffusionRequestAbortedError,
    OmniDiffusionConfig,
)
from vllm_omni.diffusion.forward_context import set_forward_context
from vllm_omni.diffusion.models.minimax_h3.pipeline_minimax_h3 import MiniMaxH3Pipeline
from vllm_omni.diffusion.request import OmniDiffusionRequest


class DiffusionModelRunner:
    def __init__(self, od_config: OmniDiffusionConfig) -> None:
        self.od_config = od_config
        self.pipeline: MiniMaxH3Pipeline = MiniMaxH3Pipeline(od_config=od_config)
        # Upstream hands a startup Cache-DiT backend to H3, which then owns it: None here.
        self.cache_backend: Any | None = None
        self.prompt_embed_cache: Any | None = None

    def execute_model(self, req: OmniDiffusionRequest, kv_prefetch_job: Any = None,
                      diffusion_kv_metadata: Any = None) -> DiffusionOutput:
        with set_forward_context(omni_diffusion_config=self.od_config):
            try:
                return self.pipeline.forward(req)
            except DiffusionRequestAbortedError as exc:
                # As upstream: a request cancelled at a model execution boundary is answered
                # as aborted, not raised.
                return DiffusionOutput(aborted=True, abort_message=str(exc))
