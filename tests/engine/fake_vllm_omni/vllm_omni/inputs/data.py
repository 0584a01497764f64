"""Sampling parameters: the per-request fields the extension reads (vllm_omni/inputs/data.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class OmniDiffusionSamplingParams:
    num_inference_steps: int | None = None
    seed: int | None = None
    quality: str | None = None
    extra_args: dict[str, Any] = field(default_factory=dict)
