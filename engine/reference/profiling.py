"""Profiling as vLLM-Omni offers it: a torch profiler between ``/start_profile`` and
``/stop_profile``, and the pipeline profiler's per-stage times in ``X-Stage-Durations``.

``profiler-config`` takes vLLM's ``ProfilerConfig`` keys (:mod:`.profiler_config`), checked the
way vLLM checks them (``torch_profiler_dir`` is required with ``profiler: torch`` and made
absolute against the server's working directory). The trace lands where vLLM-Omni's diffusion
worker puts it:
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
import shutil
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.reference.profiler_config import ProfilerConfig

if TYPE_CHECKING:
    import torch.profiler

    from engine.reference.generator import GeneratedMedia

logger = logging.getLogger(__name__)

# The one stage and replica of the reference engine, as vLLM-Omni's stage client names them.
STAGE_ID = 0
REPLICA_ID = 0
RANK = 0


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
