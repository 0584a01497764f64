"""The FastAPI app: vLLM-Omni's health, models and ``/v1/videos*`` routes over one generator."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from http import HTTPStatus
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.reference.errors import ApiError, CaptureStopped, GenerationCancelled, ProfileError
from engine.reference.fault_names import WIRE_FAULTS
from engine.reference.faults import (
    FaultPlan,
    MediaFaultMiddleware,
    announce,
    resolve_fault,
    wrap_generator,
)
from engine.reference.generator import VideoGenerator
from engine.reference.jobs import JobStore
from engine.reference.profile import LaunchProfile
from engine.reference.profiler_config import ProfilerConfig
from engine.reference.profiling import STAGE_ID, TorchTraceSession
from engine.reference.request import VideoRequest, parse_video_form
from engine.reference.runner import GenerationRunner
from ref2va_contract.api import (
    HEALTH_ROUTE,
    INFERENCE_TIME_HEADER,
    INSTANCE_NONCE_HEADER,
    MODEL_HEADER,
    MODELS_ROUTE,
    PEAK_MEMORY_HEADER,
    REQUEST_ID_HEADER,
    STAGE_DURATIONS_HEADER,
    START_PROFILE_ROUTE,
    STOP_PROFILE_ROUTE,
    SYNC_VIDEO_ROUTE,
    VIDEOS_ROUTE,
)
from ref2va_contract.diagnostics import CAPTURE_STOPPED_STATUS
from ref2va_contract.launch import INSTANCE_NONCE_ENV

logger = logging.getLogger(__name__)

SYNC_TIMEOUT_ENV = "VLLM_OMNI_VIDEO_SYNC_TIMEOUT"


@dataclass
class EngineState:
    """What the routes share; lives on ``app.state.engine``."""

    served_model_name: str
    max_upload_mib: float | None
    sync_timeout_s: float
    runner: GenerationRunner
    jobs: JobStore
    created: int
    # Set when the profile's profiler-config names a profiler (then the profile routes exist).
    profiler: TorchTraceSession | None = None
    fault: FaultPlan | None = None
    # Identity of the seeded random weights (reference-only field on the model card).
    weights_sha256: str | None = None


def _error_body(status_code: int, message: str, error_type: str, param: str | None) -> JSONResponse:
    # vLLM's ErrorResponse: {"error": {"message", "type", "param", "code"}}.
    error = {"message": message, "type": error_type, "param": param, "code": status_code}
    return JSONResponse({"error": error}, status_code=status_code)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return _error_body(exc.status_code, exc.message, exc.error_type, exc.param)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error_body(
            exc.status_code, str(exc.detail), HTTPStatus(exc.status_code).phrase, None
        )

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        param = ".".join(str(part) for part in errors[0]["loc"]) if errors else None
        label = "error" if len(errors) == 1 else "errors"
        message = f"{len(errors)} validation {label}:\n" + "".join(
            f"  {error}\n" for error in errors
        )
        return _error_body(400, message.rstrip(), HTTPStatus.BAD_REQUEST.phrase, param)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error")
        return _error_body(500, str(exc), "InternalServerError", None)


class NonceEchoMiddleware:
    """Every response carries the nonce the judge gave this instance (``INSTANCE_NONCE_ENV``), so
    the judge can tell its own instance from another server answering on the same port."""

    def __init__(self, app: ASGIApp, nonce: str) -> None:
        self.app = app
        self.header = (INSTANCE_NONCE_HEADER.lower().encode(), nonce.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_nonce(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, send_with_nonce)


def _engine(request: Request) -> EngineState:
    state: EngineState = request.app.state.engine
    return state


def create_app(profile: LaunchProfile, generator: VideoGenerator | None = None) -> FastAPI:
    """Build the server for ``profile``; ``generator`` overrides the profile's (for tests)."""
    args = profile.args
    try:
        fault = resolve_fault(args, origin=f"launch profile {profile.name!r}")
    except ValueError as exc:
        raise ProfileError(str(exc)) from None
    announce(fault)
    if generator is None:
        # Here, not at module level: the app's module does not pull in torch until it is needed.
        from engine.reference.torch_generator import build_generator  # noqa: PLC0415

        generator = build_generator(args, profile)
    inner = generator
    runner = GenerationRunner(
        wrap_generator(inner, fault),
        pipeline_profiler=args.enable_diffusion_pipeline_profiler,
    )
    profiler_config = ProfilerConfig.model_validate(args.profiler_config or {})
    profiler = TorchTraceSession(profiler_config) if profiler_config.enabled else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        logger.info(
            "reference engine ready: profile %s, model %s", profile.name, args.served_model_name
        )
        try:
            yield
        finally:
            runner.shutdown()
            logger.info("reference engine stopped")

    app = FastAPI(title="ref2va reference engine", lifespan=lifespan)
    app.state.engine = EngineState(
        served_model_name=args.served_model_name,
        max_upload_mib=args.max_upload_mib,
        sync_timeout_s=float(os.environ.get(SYNC_TIMEOUT_ENV, "600")),
        runner=runner,
        jobs=JobStore(runner),
        created=int(time.time()),
        profiler=profiler,
        fault=fault,
        weights_sha256=getattr(inner, "weights_sha256", None),
    )
    _install_error_handlers(app)
    _add_routes(app)
    if profiler is not None:
        # As vLLM-Omni: the routes exist only when a profiler is configured (404 otherwise).
        logger.warning(
            "Profiler endpoints are enabled. This should ONLY be used for local development!"
        )
        _add_profile_routes(app, profiler)
    if fault is not None and fault.name in WIRE_FAULTS:
        app.add_middleware(MediaFaultMiddleware, fault=fault.name)
    nonce = os.environ.get(INSTANCE_NONCE_ENV)
    if nonce:
        app.add_middleware(NonceEchoMiddleware, nonce=nonce)
    return app


class ProfileRequest(BaseModel):
    """vLLM-Omni's optional body of the profile routes: which stages (all when omitted)."""

    stages: list[int] | None = None


def _add_profile_routes(app: FastAPI, profiler: TorchTraceSession) -> None:
    def concerns_us(request: ProfileRequest | None) -> bool:
        return request is None or request.stages is None or STAGE_ID in request.stages

    @app.post(START_PROFILE_ROUTE)
    async def start_profile(
        raw_request: Request, request: ProfileRequest | None = None
    ) -> JSONResponse:
        if concerns_us(request):
            runner = _engine(raw_request).runner
            try:
                await asyncio.wrap_future(runner.call_on_engine_thread(profiler.start))
            except Exception as exc:
                logger.exception("Failed to start profiler: %s", exc)
                raise ApiError(500, f"Failed to start profiler: {exc}") from None
            logger.info("Profiler started.")
        return JSONResponse({"status": "SUCCESS"})

    @app.post(STOP_PROFILE_ROUTE)
    async def stop_profile(
        raw_request: Request, request: ProfileRequest | None = None
    ) -> JSONResponse:
        if concerns_us(request):
            runner = _engine(raw_request).runner
            try:
                await asyncio.wrap_future(runner.call_on_engine_thread(profiler.stop))
            except Exception:
                # vLLM-Omni's diffusion engine logs a failed stop and still answers SUCCESS.
                logger.exception("Failed to stop profiling")
            logger.info("Profiler stopped.")
        return JSONResponse({"status": "SUCCESS"})


def _add_routes(app: FastAPI) -> None:
    @app.get(HEALTH_ROUTE)
    async def health(request: Request) -> JSONResponse:
        if _engine(request).runner.closed:
            return JSONResponse({"status": "unhealthy"}, status_code=503)
        return JSONResponse({"status": "healthy"})

    @app.get(MODELS_ROUTE)
    async def models(request: Request) -> JSONResponse:
        engine = _engine(request)
        card = {
            "id": engine.served_model_name,
            "object": "model",
            "created": engine.created,
            "owned_by": "vllm",
            "root": engine.served_model_name,
            "parent": None,
            "max_model_len": None,
            "weights_sha256": engine.weights_sha256,
            "permission": [
                {
                    "id": f"modelperm-{uuid.uuid4().hex}",
                    "object": "model_permission",
                    "created": engine.created,
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
        return JSONResponse({"object": "list", "data": [card]})

    @app.post(SYNC_VIDEO_ROUTE)
    async def create_video_sync(
        request: Request, video: Annotated[VideoRequest, Depends(parse_video_form)]
    ) -> Response:
        engine = _engine(request)
        request_id = f"video_sync-{uuid.uuid4().hex}"
        started = time.perf_counter()
        generation = engine.runner.submit(request_id, video.spec)
        try:
            result = await asyncio.wait_for(generation.wait(), engine.sync_timeout_s)
        except TimeoutError:
            generation.cancel()  # free the engine for the next request
            raise ApiError(
                504, f"Video generation timed out after {engine.sync_timeout_s}s."
            ) from None
        except GenerationCancelled as exc:
            raise ApiError(500, f"Video generation failed: {exc}") from None
        except CaptureStopped as exc:
            # Stopped on purpose once its capture was whole: its evidence is written.
            logger.info("sync video request %s: %s", request_id, exc)
            raise ApiError(CAPTURE_STOPPED_STATUS, str(exc)) from None
        except Exception as exc:
            logger.exception("sync video generation failed for request_id=%s", request_id)
            raise ApiError(500, f"Video generation failed: {exc}") from None
        inference_time_s = time.perf_counter() - started
        return Response(
            content=result.video_bytes,
            media_type="video/mp4",
            headers={
                REQUEST_ID_HEADER: request_id,
                MODEL_HEADER: video.model,
                INFERENCE_TIME_HEADER: f"{inference_time_s:.3f}",
                STAGE_DURATIONS_HEADER: json.dumps(result.stage_durations, separators=(",", ":")),
                PEAK_MEMORY_HEADER: f"{result.peak_memory_mb:.3f}",
            },
        )

    @app.post(VIDEOS_ROUTE)
    async def create_video(
        request: Request, video: Annotated[VideoRequest, Depends(parse_video_form)]
    ) -> JSONResponse:
        job = _engine(request).jobs.create(video)
        return JSONResponse(job.model_dump(mode="json"))

    @app.get(VIDEOS_ROUTE)
    async def list_videos(
        request: Request,
        after: str | None = None,
        limit: Annotated[int | None, Query(ge=0, le=100)] = None,
        order: Annotated[Literal["asc", "desc"], Query()] = "desc",
    ) -> JSONResponse:
        return JSONResponse(_engine(request).jobs.list(after=after, limit=limit, order=order))

    @app.get(VIDEOS_ROUTE + "/{video_id}")
    async def retrieve_video(request: Request, video_id: str) -> JSONResponse:
        job = _engine(request).jobs.get(video_id)
        content: dict[str, Any] = job.model_dump(mode="json")
        if job.status == "failed":
            # The real server answers a failed job with the failure's own status code.
            code = job.error.code if job.error and isinstance(job.error.code, int) else 500
            status_code = code if 400 <= code < 600 else 500
            if content.get("error") is not None:
                content["error"]["code"] = status_code
            return JSONResponse(content, status_code=status_code)
        return JSONResponse(content)

    @app.delete(VIDEOS_ROUTE + "/{video_id}")
    async def delete_video(request: Request, video_id: str) -> JSONResponse:
        deleted = await _engine(request).jobs.delete(video_id)
        return JSONResponse({"id": deleted, "deleted": True, "object": "video.deleted"})

    @app.get(VIDEOS_ROUTE + "/{video_id}/content")
    async def download_video(request: Request, video_id: str) -> Response:
        job, video_bytes = _engine(request).jobs.content(video_id)
        return Response(
            content=video_bytes,
            media_type=job.media_type,
            headers={"Content-Disposition": f'attachment; filename="{job.file_name}"'},
        )
