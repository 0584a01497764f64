"""The server configuration fields the extension reads, the pipeline's output, and the error
upstream raises to stop a cancelled request."""

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
    error_status_code: int | None = None  # a 4xx reaches the HTTP answer as that status
    error_type: str | None = None
    aborted: bool = False
    abort_message: str | None = None


class DiffusionRequestAbortedError(RuntimeError):
    """Raised when a diffusion request ends via user-visible abort."""
