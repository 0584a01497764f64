"""The server configuration fields the extension reads, and the pipeline's output."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class OmniDiffusionConfig:
    dtype: torch.dtype = torch.float32
    cache_backend: str | None = "none"
    cache_config: dict[str, Any] = field(default_factory=dict)
    diffusion_kv_cache_dtype: str | None = None
    quantization_config: Any = None
    diffusion_offload_config: dict[str, Any] | None = None
    enable_cpu_offload: bool = False
    enable_layerwise_offload: bool = False
    enable_distributed_layerwise_offload: bool = False
    step_execution: bool = False
    enforce_eager: bool = False
    fa_deterministic: bool = False


@dataclass
class DiffusionOutput:
    output: Any = None
    error: str | None = None
