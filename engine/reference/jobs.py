"""Async video jobs (``POST /v1/videos`` and friends), shaped like vLLM-Omni's VideoResponse.

Outputs are kept in memory, not on disk: the reference engine serves small videos, and nothing it
writes may survive the process (the judge audits leftovers after every arm).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from engine.reference.errors import ApiError, CaptureStopped, GenerationCancelled
from engine.reference.request import VideoRequest
from engine.reference.runner import Generation, GenerationRunner
from ref2va_contract.diagnostics import CAPTURE_STOPPED_STATUS

logger = logging.getLogger(__name__)

# How long DELETE waits for a running job to stop before answering 409.
CANCEL_WAIT_S = 2.0

JobStatus = Literal["queued", "in_progress", "completed", "failed"]


class VideoError(BaseModel):
    code: int | str
    message: str


class VideoJob(BaseModel):
    """The job record, field for field the real server's ``VideoResponse``."""

    model: str
    prompt: str
    id: str = Field(default_factory=lambda: f"video_gen_{uuid.uuid4().hex}")
    object: Literal["video"] = "video"
    status: JobStatus = "queued"
    size: str | None = None
    progress: int = 0
    seconds: str = "4"
    quality: str = "default"
    completed_at: int | None = None
    created_at: int = Field(default_factory=lambda: int(time.time()))
    remixed_from_video_id: str | None = None
    error: VideoError | None = None
    media_type: Literal["video/mp4"] = "video/mp4"
    expires_at: int | None = None
    file_name: str | None = None
    inference_time_s: float | None = None
    fps: float | None = None
    num_frames: int | None = None
    duration_s: float | None = None
    metrics: dict[str, Any] | None = None
    stage_durations: dict[str, float] = Field(default_factory=dict)
    peak_memory_mb: float = 0.0
    action: dict[str, Any] | None = None


@dataclass
class _Entry:
    job: VideoJob
    generation: Generation | None = None
    task: asyncio.Task[None] | None = None
    video_bytes: bytes | None = None


def not_found() -> ApiError:
    return ApiError(404, "Video not found")


class JobStore:
    """Every async job of this server, in creation order."""

    def __init__(self, runner: GenerationRunner) -> None:
        self._runner = runner
        self._entries: dict[str, _Entry] = {}

    def create(self, request: VideoRequest) -> VideoJob:
        seconds = request.seconds
        fps = request.spec.fps
        duration = float(seconds) if seconds is not None else request.requested_num_frames / fps
        job = VideoJob(
            model=request.model,
            prompt=request.prompt,
            size=request.size,
            seconds=seconds or "4",
            quality=request.quality or "default",
            fps=fps,
            num_frames=request.requested_num_frames,
            duration_s=duration,
        )
        entry = _Entry(job=job)
        self._entries[job.id] = entry
        entry.generation = self._runner.submit(job.id, request.spec)
        entry.task = asyncio.create_task(self._follow(entry, request.return_stage_metrics))
        return job.model_copy()

    async def _follow(self, entry: _Entry, with_metrics: bool) -> None:
        assert entry.generation is not None
        job = entry.job
        started = time.perf_counter()
        try:
            result = await entry.generation.wait()
        except GenerationCancelled:
            # A cancelled job disappears, as on the real server.
            self._entries.pop(job.id, None)
            logger.info("video job %s cancelled", job.id)
            return
        except CaptureStopped as exc:
            # Stopped on purpose once its capture was whole: a client error, its evidence written.
            logger.info("video job %s: %s", job.id, exc)
            job.status = "failed"
            job.completed_at = int(time.time())
            job.error = VideoError(code=CAPTURE_STOPPED_STATUS, message=str(exc))
            job.inference_time_s = time.perf_counter() - started
            return
        except Exception as exc:
            logger.exception("video job %s failed", job.id)
            job.status = "failed"
            job.completed_at = int(time.time())
            job.error = VideoError(code=500, message=str(exc))
            job.inference_time_s = time.perf_counter() - started
            return
        entry.video_bytes = result.video_bytes
        job.status = "completed"
        job.progress = 100
        job.file_name = f"{job.id}.mp4"
        job.completed_at = int(time.time())
        job.inference_time_s = time.perf_counter() - started
        job.stage_durations = result.stage_durations
        job.peak_memory_mb = result.peak_memory_mb
        job.num_frames = result.num_frames
        job.fps = result.fps
        job.duration_s = result.num_frames / result.fps
        if with_metrics:
            job.metrics = {
                "stage_durations": result.stage_durations or None,
                "peak_memory_mb": result.peak_memory_mb,
            }

    def _entry(self, job_id: str) -> _Entry:
        entry = self._entries.get(job_id)
        if entry is None:
            raise not_found()
        return entry

    @staticmethod
    def _snapshot(entry: _Entry) -> VideoJob:
        job = entry.job.model_copy(deep=True)
        generation = entry.generation
        if job.status == "queued" and generation is not None and generation.started.is_set():
            job.status = "in_progress"
        if job.status == "in_progress" and generation is not None:
            job.progress = generation.progress
        return job

    def get(self, job_id: str) -> VideoJob:
        return self._snapshot(self._entry(job_id))

    def content(self, job_id: str) -> tuple[VideoJob, bytes]:
        entry = self._entry(job_id)
        if entry.job.status == "failed":
            raise ApiError(422, "Video generation failed. Check job status for error details.")
        if entry.video_bytes is None:
            raise ApiError(404, "Generation is still in-progress")
        return entry.job, entry.video_bytes

    async def delete(self, job_id: str) -> str:
        entry = self._entry(job_id)
        if entry.job.status in ("queued", "in_progress") and entry.generation is not None:
            entry.generation.cancel()
            if entry.task is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(entry.task), CANCEL_WAIT_S)
                except TimeoutError:
                    raise ApiError(
                        409, "Cancellation in progress. Please try again later."
                    ) from None
        self._entries.pop(job_id, None)
        return job_id

    def list(self, *, after: str | None, limit: int | None, order: str) -> dict[str, Any]:
        jobs = [self._snapshot(entry) for entry in self._entries.values()]
        jobs.sort(key=lambda job: job.created_at, reverse=order == "desc")
        if after is not None:
            index = next((i for i, job in enumerate(jobs) if job.id == after), None)
            jobs = [] if index is None else jobs[index + 1 :]
        has_more = False
        if limit is not None:
            has_more = len(jobs) > limit
            jobs = jobs[:limit]
        return {
            "first_id": jobs[0].id if jobs else None,
            "last_id": jobs[-1].id if jobs else None,
            "has_more": has_more,
            "data": [job.model_dump(mode="json") for job in jobs],
            "object": "list",
        }

    def cancel_all(self) -> None:
        for entry in self._entries.values():
            if entry.generation is not None:
                entry.generation.cancel()
