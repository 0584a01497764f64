"""The request a worker receives (vllm_omni/diffusion/request.py), with upstream's dummy test."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm_omni.inputs.data import OmniDiffusionSamplingParams

DUMMY_DIFFUSION_REQUEST_ID = "dummy_req_id"


@dataclass
class OmniDiffusionRequest:
    prompt: Any
    sampling_params: OmniDiffusionSamplingParams
    request_id: str

    def is_dummy_run(self) -> bool:
        return self.request_id == DUMMY_DIFFUSION_REQUEST_ID or self.request_id.startswith(
            f"{DUMMY_DIFFUSION_REQUEST_ID}/")
