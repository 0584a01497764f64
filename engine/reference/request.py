"""The multipart form of ``POST /v1/videos[/sync]``: parsing and validation, as vLLM-Omni does it.

Field names, defaults, which combinations of reference fields are refused, H3's upload limits and
the model-name check follow ``_parse_video_form`` of vLLM-Omni 0.30.0; the JSON reference fields
(``image_reference``, ``audio_reference``) are read as its ``decode_image_url``/``decode_audio_url``
read them. H3's own reference limits (image edges and aspect, audio length, size, format and codec),
which the real server checks when its encoder stage prepares the request and answers with a 400,
are checked here at parse time with upstream's messages. What the reference engine cannot honour
(video references, remote URLs) is refused with a 400 that says so.

The uploads and data URLs are read in :mod:`engine.reference.uploads`; H3's limits and the frame
count and size resolution are in :mod:`engine.reference.request_limits`.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import File, Form, Request, UploadFile
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from engine.reference.errors import bad_request, invalid_field
from engine.reference.generator import GenerationSpec, snap_frame_count
from engine.reference.request_limits import (
    MAX_REFERENCE_COUNT,
    MIB,
    check_h3_reference_limits,
    resolve_num_frames,
    resolve_size,
)
from engine.reference.uploads import (
    audio_data_url,
    decode_references,
    image_data_url,
    read_upload,
    reference_list,
)

QUALITY_LEVELS = ("lossless", "high")
INT64 = 2**63

DEFAULT_FPS = 24.0
DEFAULT_STEPS = 50
DEFAULT_GUIDANCE = 5.0  # H3's; the reference engine runs no CFG unless asked
DEFAULT_FLOW_SHIFT = 12.0


class _RequestFields(BaseModel):
    """The scalar checks vLLM-Omni's ``VideoGenerationRequest`` model makes."""

    model_config = ConfigDict(title="VideoGenerationRequest")

    width: int | None = Field(None, ge=1, lt=INT64)
    height: int | None = Field(None, ge=1, lt=INT64)
    num_frames: int | None = Field(None, ge=1, lt=INT64)
    num_inference_steps: int | None = Field(None, ge=1, le=200)
    guidance_scale: float | None = Field(None, ge=0.0, le=20.0)
    seed: int | None = Field(None, ge=-INT64, lt=INT64)
    quality: str | None = None

    @field_validator("quality")
    @classmethod
    def _known_quality(cls, value: str | None) -> str | None:
        if value is not None and value not in QUALITY_LEVELS:
            raise ValueError(f"quality must be one of {list(QUALITY_LEVELS)}, got {value!r}")
        return value


@dataclass(frozen=True)
class VideoRequest:
    """A validated request: what to generate, plus what the job record echoes back."""

    spec: GenerationSpec
    model: str
    prompt: str
    size: str | None
    seconds: str | None
    quality: str | None
    requested_num_frames: int
    return_stage_metrics: bool


def _parse_form_json(value: str | None) -> Any:
    if value is None or value == "":
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise bad_request("Invalid JSON in form field.") from None


def _random_seed() -> int:
    return int.from_bytes(os.urandom(8), "little", signed=True)


async def parse_video_form(
    raw_request: Request,
    *,
    prompt: Annotated[str, Form()],
    input_reference: Annotated[UploadFile | None, File()] = None,
    input_references: Annotated[list[UploadFile] | None, File()] = None,
    image_reference: Annotated[str | None, Form()] = None,
    video_reference: Annotated[str | None, Form()] = None,
    audio_reference: Annotated[str | None, Form()] = None,
    model: Annotated[str | None, Form()] = None,
    seconds: Annotated[str | None, Form(pattern=r"^[1-9]\d*$")] = None,
    size: Annotated[str | None, Form(pattern=r"^\d+x\d+$")] = None,
    user: Annotated[str | None, Form()] = None,
    width: Annotated[int | None, Form()] = None,
    height: Annotated[int | None, Form()] = None,
    num_frames: Annotated[int | None, Form()] = None,
    fps: Annotated[float | None, Form(ge=1, allow_inf_nan=False)] = None,
    quality: Annotated[str | None, Form()] = None,
    num_inference_steps: Annotated[int | None, Form()] = None,
    guidance_scale: Annotated[float | None, Form()] = None,
    flow_shift: Annotated[float | None, Form()] = None,
    seed: Annotated[int | None, Form()] = None,
    generate_sound: Annotated[bool | None, Form()] = None,
    negative_prompt: Annotated[str | None, Form()] = None,
    extra_params: Annotated[str | None, Form()] = None,
    return_stage_metrics: Annotated[bool | None, Form()] = None,
) -> VideoRequest:
    """FastAPI dependency shared by the sync and async create routes."""
    del user  # accepted for compatibility; nothing to track in the reference engine
    engine_state = raw_request.app.state.engine
    references = input_references or []
    parsed_image_reference = _parse_form_json(image_reference)
    parsed_video_reference = _parse_form_json(video_reference)
    parsed_audio_reference = _parse_form_json(audio_reference)
    parsed_extra = _parse_form_json(extra_params)
    if parsed_extra is not None and not isinstance(parsed_extra, dict):
        raise bad_request(
            f"Invalid JSON in form field: expected dict, got {type(parsed_extra).__name__}."
        )
    extra: dict[str, Any] = parsed_extra or {}

    others = (parsed_image_reference, parsed_video_reference, input_reference)
    if references and any(item is not None for item in others):
        raise bad_request(
            "Provide input_references alone, without input_reference, image_reference, "
            "or video_reference."
        )
    if input_reference is not None and (
        parsed_image_reference is not None or parsed_video_reference is not None
    ):
        raise bad_request(
            "Provide only one of input_reference, image_reference, or video_reference when "
            "using input_reference; image_reference and video_reference may be combined."
        )

    try:
        fields = _RequestFields(
            width=width,
            height=height,
            num_frames=num_frames,
            num_inference_steps=num_inference_steps,
            guidance_scale=guidance_scale,
            seed=seed,
            quality=quality,
        )
    except ValidationError as exc:
        # vLLM's generic handler reports a ValueError with no param; so do we.
        raise invalid_field(str(exc)) from None

    served_name: str = engine_state.served_model_name
    if model is not None and model != served_name:
        raise bad_request(
            f"Model mismatch: request specifies '{model}' but server is running '{served_name}'."
        )
    if parsed_video_reference is not None:
        raise bad_request("The reference engine does not support video_reference.")
    flow = DEFAULT_FLOW_SHIFT if flow_shift is None else flow_shift
    if not math.isfinite(flow) or flow <= 0:
        raise bad_request(f"flow_shift must be a positive, finite number, got {flow_shift}.")

    out_width, out_height = resolve_size(size, fields.width, fields.height)
    out_fps = DEFAULT_FPS if fps is None else fps
    requested_frames = resolve_num_frames(fields.num_frames, seconds, out_fps, extra)

    limit_mib: float | None = engine_state.max_upload_mib
    raw_uploads = list(references)
    if input_reference is not None:
        raw_uploads.append(input_reference)
    image_items = reference_list(parsed_image_reference)
    audio_items = reference_list(parsed_audio_reference)
    if len(raw_uploads) + len(image_items) + len(audio_items) > MAX_REFERENCE_COUNT:
        raise bad_request(f"MiniMax H3 accepts at most {MAX_REFERENCE_COUNT} total references.")
    uploads = [await read_upload(upload, limit_mib) for upload in raw_uploads]
    # Upstream reads image references, then appends audio references after the file parts' audio.
    uploads += [image_data_url(item) for item in image_items]
    uploads += [audio_data_url(item) for item in audio_items]
    if limit_mib is not None:
        # The profile's own body cap (a test knob) also bounds what arrives as a data URL.
        for upload in uploads[len(raw_uploads) :]:
            if len(upload.payload) > limit_mib * MIB:
                raise bad_request(f"Uploaded reference exceeds the {limit_mib:g} MiB size limit.")
    images, audios = decode_references(uploads)
    check_h3_reference_limits(images, audios)

    spec = GenerationSpec(
        prompt=prompt,
        negative_prompt=negative_prompt or "",
        width=out_width,
        height=out_height,
        num_frames=snap_frame_count(requested_frames),
        fps=out_fps,
        num_inference_steps=fields.num_inference_steps or DEFAULT_STEPS,
        # No default guidance: CFG doubles the cost and runs only when the request asks for it.
        guidance_scale=fields.guidance_scale,
        flow_shift=flow,
        # Like the real server, no seed means a fresh random one: only seeded runs repeat.
        seed=_random_seed() if fields.seed is None else fields.seed,
        # H3 always generates its soundtrack; only an explicit false drops the audio stream.
        generate_sound=generate_sound is not False,
        quality=fields.quality,
        extra_params=extra,
        images=images,
        audios=audios,
    )
    engine_state.runner.validate(spec)
    return VideoRequest(
        spec=spec,
        model=served_name,
        prompt=prompt,
        size=size,
        seconds=seconds,
        quality=fields.quality,
        requested_num_frames=requested_frames,
        return_stage_metrics=bool(return_stage_metrics),
    )
