"""The forward context and the denoise step index the loop publishes in it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class ForwardContext:
    omni_diffusion_config: Any = None
    denoise_step_idx: int | None = None


_forward_context: ForwardContext | None = None


def get_forward_context() -> ForwardContext:
    assert _forward_context is not None, "Forward context is not set."
    return _forward_context


def is_forward_context_available() -> bool:
    return _forward_context is not None


@contextmanager
def set_forward_context(omni_diffusion_config: Any = None) -> Iterator[None]:
    global _forward_context  # noqa: PLW0603 - upstream keeps it in a module global
    previous = _forward_context
    _forward_context = ForwardContext(omni_diffusion_config=omni_diffusion_config)
    try:
        yield
    finally:
        _forward_context = previous


def set_forward_context_denoise_step_idx(step_idx: int | None) -> None:
    if _forward_context is not None:
        _forward_context.denoise_step_idx = step_idx
