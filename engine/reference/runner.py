"""One engine: generations run one at a time on a single worker thread, each cancellable.

The worker is a one-thread executor rather than a lock around ``asyncio.to_thread`` so that the
order of admission is the order of submission, and so that shutdown can flag every pending and
running generation and know that no thread of ours outlives the server for more than one step.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from engine.reference.errors import GenerationCancelled
from engine.reference.generator import GenerationSpec, VideoGenerator
from engine.reference.mux import encode_mp4
from engine.reference.profiling import StageClock

logger = logging.getLogger(__name__)

T = TypeVar("T")


def peak_memory_mb() -> float:
    """Peak resident memory of this process, in MiB (the CPU stand-in for device memory)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


@dataclass(frozen=True)
class GenerationResult:
    video_bytes: bytes
    stage_durations: dict[str, float]
    peak_memory_mb: float
    num_frames: int
    fps: float


@dataclass
class Generation:
    """One submitted generation; its fields are written by the worker thread, read by the loop."""

    request_id: str
    spec: GenerationSpec
    cancel_event: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)
    progress: int = 0  # 0..100; a plain int so the loop can read it without locking
    future: Future[GenerationResult] = field(default_factory=Future)

    def cancel(self) -> None:
        self.cancel_event.set()

    def idle(self, seconds: float) -> None:
        # Waiting on the cancel flag rather than sleeping lets a cancel cut a long step short.
        self.cancel_event.wait(seconds)

    def step_done(self, step: int, total: int) -> None:
        # Decoding and muxing take the last few percent; 100 means the MP4 is ready.
        self.progress = min(95, int(95 * step / total))
        self.check()

    def check(self) -> None:
        if self.cancel_event.is_set():
            raise GenerationCancelled(f"generation {self.request_id} was cancelled")

    async def wait(self) -> GenerationResult:
        return await asyncio.wrap_future(self.future)


class GenerationRunner:
    """Admits generations, runs them in order on one thread, and stops them on shutdown."""

    def __init__(self, generator: VideoGenerator, *, pipeline_profiler: bool = False) -> None:
        self._generator = generator
        # vLLM-Omni's --enable-diffusion-pipeline-profiler: per-stage times in the result.
        self._pipeline_profiler = pipeline_profiler
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ref2va-engine")
        self._live: dict[str, Generation] = {}
        self._lock = threading.Lock()
        self._closed = False

    def validate(self, spec: GenerationSpec) -> None:
        """Let the generator refuse (400) what it cannot honour, before any job exists."""
        validate = getattr(self._generator, "validate", None)
        if validate is not None:
            validate(spec)

    def submit(self, request_id: str, spec: GenerationSpec) -> Generation:
        generation = Generation(request_id=request_id, spec=spec)
        with self._lock:
            if self._closed:
                raise RuntimeError("engine is shutting down")
            self._live[request_id] = generation
        inner = self._executor.submit(self._run, generation)
        inner.add_done_callback(lambda done: self._settle(generation, done))
        return generation

    def _settle(self, generation: Generation, done: Future[GenerationResult]) -> None:
        with self._lock:
            self._live.pop(generation.request_id, None)
        outer = generation.future
        try:
            if done.cancelled():
                outer.set_exception(GenerationCancelled("cancelled before it started"))
            elif (error := done.exception()) is not None:
                outer.set_exception(error)
            else:
                outer.set_result(done.result())
        except InvalidStateError:
            pass  # a waiter gave up (timeout) and cancelled the outer future first

    def _run(self, generation: Generation) -> GenerationResult:
        generation.check()
        generation.started.set()
        started = time.perf_counter()
        logger.info("generation %s started", generation.request_id)
        clock = StageClock() if self._pipeline_profiler else None
        media = self._generator.generate(generation.spec, generation)
        if clock is not None:
            media = clock.generated(media)
        video_bytes = encode_mp4(media, generation.check)
        generation.progress = 100
        logger.info(
            "generation %s done in %.3f s (%d bytes)",
            generation.request_id,
            time.perf_counter() - started,
            len(video_bytes),
        )
        return GenerationResult(
            video_bytes=video_bytes,
            # Empty unless the pipeline profiler is on, as on the real server.
            stage_durations=clock.durations() if clock is not None else {},
            peak_memory_mb=peak_memory_mb(),
            num_frames=media.num_frames,
            fps=media.fps,
        )

    def call_on_engine_thread(self, work: Callable[[], T]) -> Future[T]:
        """Run ``work`` on the engine thread, in order with the generations around it.

        For what must happen on the thread that computes, such as starting torch's profiler.
        """
        return self._executor.submit(work)

    @property
    def closed(self) -> bool:
        return self._closed

    def cancel_all(self) -> None:
        with self._lock:
            self._closed = True
            live = list(self._live.values())
        for generation in live:
            generation.cancel()

    def shutdown(self) -> None:
        """Cancel everything and let the worker thread finish its current step."""
        self.cancel_all()
        self._executor.shutdown(wait=True, cancel_futures=True)
