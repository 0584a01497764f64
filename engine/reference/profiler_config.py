"""``profiler-config``: vLLM's ``ProfilerConfig`` keys, as the reference engine accepts them.

A leaf module (pydantic only): the launch-profile schema validates a profile's
``profiler-config`` with it, and :mod:`.profiling` runs the profiler it describes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class ProfilerConfig(BaseModel):
    """vLLM's ``ProfilerConfig``, key for key; what the reference cannot do is refused."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    profiler: Literal["torch", "cuda"] | None = None
    torch_profiler_dir: str = ""
    torch_profiler_with_stack: bool = True
    torch_profiler_with_flops: bool = False
    torch_profiler_use_gzip: bool = True
    torch_profiler_dump_cuda_time_total: bool = True  # no CUDA here: accepted, no effect
    torch_profiler_record_shapes: bool = False
    torch_profiler_with_memory: bool = False
    capture_torch_profiler: bool = False
    detailed_trace_annotation: bool = False  # no effect: there is no LLM scheduler to annotate
    ignore_frontend: bool = False  # no effect: there is no separate frontend process
    delay_iterations: int = Field(0, ge=0)
    max_iterations: int = Field(0, ge=0)
    warmup_iterations: int = Field(0, ge=0)
    active_iterations: int = Field(5, ge=1)
    wait_iterations: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _usable(self) -> ProfilerConfig:
        # vLLM's own checks first, with its messages.
        if self.torch_profiler_dir and self.profiler != "torch":
            raise ValueError(
                "torch_profiler_dir is only applicable when profiler is set to 'torch'"
            )
        if self.profiler == "torch" and not self.torch_profiler_dir:
            raise ValueError("torch_profiler_dir must be set when profiler is 'torch'")
        if self.capture_torch_profiler and self.profiler != "torch":
            raise ValueError(
                "capture_torch_profiler is only applicable when profiler is set to 'torch'"
            )
        # Then what the reference engine does not implement, refused rather than ignored.
        if self.profiler == "cuda":
            raise ValueError("the reference engine has no CUDA profiler; use profiler 'torch'")
        if "://" in self.torch_profiler_dir:
            raise ValueError("the reference engine writes traces to local directories only")
        schedule = ("delay_iterations", "max_iterations", "warmup_iterations", "wait_iterations")
        if self.capture_torch_profiler or any(getattr(self, key) for key in schedule):
            raise ValueError(
                "the reference engine profiles every request between start and stop: "
                "capture_torch_profiler and the *_iterations schedule are not supported"
            )
        return self

    @property
    def enabled(self) -> bool:
        return self.profiler is not None

    def trace_dir(self) -> Path:
        """The trace directory, relative paths taken against the server's working directory."""
        return Path(os.path.abspath(os.path.expanduser(self.torch_profiler_dir)))


def check_profiler_config(value: Mapping[str, Any] | None) -> None:
    """Raise ValueError with every problem of a ``profiler-config`` mapping (profile parsing)."""
    if value is None:
        return
    try:
        ProfilerConfig.model_validate(dict(value))
    except ValidationError as exc:
        problems = "; ".join(
            ".".join(str(part) for part in error["loc"]) + f": {error['msg']}"
            if error["loc"]
            else error["msg"]
            for error in exc.errors()
        )
        raise ValueError(f"invalid profiler-config: {problems}") from None
