"""Profiling as vLLM-Omni offers it: a torch profiler between ``/start_profile`` and
``/stop_profile``, and the pipeline profiler's per-stage times in ``X-Stage-Durations``.

``profiler-config`` takes vLLM's ``ProfilerConfig`` keys, checked the way vLLM checks them
(``torch_profiler_dir`` is required with ``profiler: torch`` and made absolute against the
server's working directory). The trace lands where vLLM-Omni's diffusion worker puts it:
``<torch_profiler_dir>/<YYYYmmdd-HHMMSS>_stage_0_rep_0_diffusion_<epoch>/trace_rank0.json``
(``.json.gz`` with ``torch_profiler_use_gzip``, vLLM's default). The reference engine has one
rank, so one file.

torch's profiler records the thread that started it, so start and stop run on the engine thread
(through the runner), in order with the generations around them.
"""

from __future__ import annotations

import dataclasses
import gzip
import logging
import os
import shutil
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

if TYPE_CHECKING:
    import torch.profiler

    from engine.reference.generator import GeneratedMedia

logger = logging.getLogger(__name__)

# The one stage and replica of the reference engine, as vLLM-Omni's stage client names them.
STAGE_ID = 0
REPLICA_ID = 0
RANK = 0


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


class TorchTraceSession:
    """The torch profiler of rank 0. ``start`` and ``stop`` must run on the engine thread."""

    def __init__(self, config: ProfilerConfig) -> None:
        self._config = config
        self._profiler: torch.profiler.profile | None = None
        self._session_dir: Path | None = None
        self.last_trace: Path | None = None

    @property
    def active(self) -> bool:
        return self._profiler is not None

    def start(self) -> None:
        if self._profiler is not None:
            raise RuntimeError("profiler is already running")
        # Not at module level: reading a launch profile must not import torch.
        import torch.profiler  # noqa: PLC0415

        prefix = f"stage_{STAGE_ID}_rep_{REPLICA_ID}_diffusion_{int(time.time())}"
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        session_dir = self._config.trace_dir() / f"{stamp}_{prefix}"
        session_dir.mkdir(parents=True, exist_ok=True)
        config = self._config
        profiler = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            record_shapes=config.torch_profiler_record_shapes,
            profile_memory=config.torch_profiler_with_memory,
            with_stack=config.torch_profiler_with_stack,
            with_flops=config.torch_profiler_with_flops,
        )
        profiler.start()
        self._profiler, self._session_dir = profiler, session_dir
        logger.info("torch profiler started; traces will be saved to %s", session_dir)

    def stop(self) -> Path | None:
        """Stop and write the trace; None (and a warning) when no profiler was running."""
        profiler, session_dir = self._profiler, self._session_dir
        if profiler is None or session_dir is None:
            logger.warning("stop_profile without a running profiler; nothing to stop")
            return None
        self._profiler = self._session_dir = None
        profiler.stop()
        trace = session_dir / f"trace_rank{RANK}.json"
        profiler.export_chrome_trace(str(trace))
        if self._config.torch_profiler_use_gzip:
            # In-process rather than vLLM's ``gzip`` subprocess: nothing may outlive the server.
            compressed = trace.with_name(trace.name + ".gz")
            with trace.open("rb") as source, gzip.open(compressed, "wb") as target:
                shutil.copyfileobj(source, target)
            trace.unlink()
            trace = compressed
        self.last_trace = trace
        logger.info("[Rank %d] Trace exported to %s", RANK, trace)
        return trace


# --- the pipeline profiler: per-stage wall times of one generation -----------------------------


class StageClock:
    """Times one generation as the runner sees it: ``generate()``, frame production, muxing.

    A generator that knows its own stages (encoders, denoising, decoders) reports them in
    ``GeneratedMedia.stage_durations``, which it may keep filling while its lazy frames are
    decoded; those are used as they are, and the clock adds ``mux`` (encoding time with frame
    production taken out). A generator that reports nothing gets ``generate`` (its whole call)
    and ``decode_video`` (time spent producing frames) instead.
    """

    def __init__(self) -> None:
        self._started = time.perf_counter()
        self._generated = self._started
        self._frames_s = 0.0
        self._reported: Mapping[str, float] = {}

    def generated(self, media: GeneratedMedia) -> GeneratedMedia:
        """Call right after ``generate()``; returns the media with its frames timed."""
        self._generated = time.perf_counter()
        # The same dict, not a copy: the generator may still be filling it while frames decode.
        self._reported = media.stage_durations
        return dataclasses.replace(media, frames=self._timed(media.frames))

    def _timed(self, frames: Iterator[Any]) -> Iterator[Any]:
        while True:
            before = time.perf_counter()
            try:
                frame = next(frames)
            except StopIteration:
                self._frames_s += time.perf_counter() - before
                return
            self._frames_s += time.perf_counter() - before
            yield frame

    def durations(self) -> dict[str, float]:
        """Call once the MP4 is written."""
        encode_s = time.perf_counter() - self._generated
        stages = {name: float(seconds) for name, seconds in self._reported.items()}
        if not stages:
            stages["generate"] = self._generated - self._started
            stages["decode_video"] = self._frames_s
        stages["mux"] = max(0.0, encode_s - self._frames_s)
        return stages
