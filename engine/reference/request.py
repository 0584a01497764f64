"""The multipart form of ``POST /v1/videos[/sync]``: parsing and validation, as vLLM-Omni does it.

Field names, defaults, which combinations of reference fields are refused, H3's upload limits and
the model-name check follow ``_parse_video_form`` of vLLM-Omni 0.30.0. What the reference engine
cannot honour (video references, remote URLs) is refused with a 400 that says so.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import File, Form, Request, UploadFile
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from engine.reference.errors import bad_request, invalid_field
from engine.reference.generator import GenerationSpec, snap_frame_count
from engine.reference.references import (
    ReferenceAudio,
    ReferenceDecodeError,
    ReferenceImage,
    decode_audio,
    decode_image,
)

MIB = 1024 * 1024
# H3's per-kind upload limits and reference count (vLLM-Omni's video helpers).
MAX_IMAGE_BYTES = 30 * MIB
MAX_VIDEO_BYTES = 50 * MIB
MAX_AUDIO_BYTES = 15 * MIB
MAX_REFERENCE_COUNT = 12
IMAGE_FORMATS = ("png", "jpeg", "webp", "heic", "heif")  # matched against FFmpeg demuxer names
AUDIO_SUFFIXES = frozenset({".wav", ".mp3"})
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".heic", ".heif"})
OTHER_AUDIO_SUFFIXES = frozenset({".m4a", ".aac", ".flac", ".ogg"})
QUALITY_LEVELS = ("lossless", "high")
INT64 = 2**63

DEFAULT_FPS = 24.0
DEFAULT_STEPS = 50
DEFAULT_GUIDANCE = 5.0  # H3's; the reference engine runs no CFG unless asked
DEFAULT_FLOW_SHIFT = 12.0
# H3 Ref2VA's default canvas (16:9) and a 5 s clip when neither frames nor a duration is given.
DEFAULT_WIDTH, DEFAULT_HEIGHT = 1344, 768
DEFAULT_SECONDS = 5.0


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


@dataclass(frozen=True)
class _Upload:
    filename: str
    content_type: str
    payload: bytes


def _parse_form_json(value: str | None) -> Any:
    if value is None or value == "":
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise bad_request("Invalid JSON in form field.") from None


def _media_kind(content_type: str, filename: str) -> str:
    content_type = content_type.lower()
    if content_type.startswith("image/"):
        return "image"
    if content_type.startswith("audio/"):
        return "audio"
    suffix = Path(filename).suffix.lower()
    if suffix in IMAGE_SUFFIXES:
        return "image"
    if suffix in AUDIO_SUFFIXES | OTHER_AUDIO_SUFFIXES:
        return "audio"
    return "video"


def _limit_for(kind: str, override_mib: float | None) -> int:
    if override_mib is not None:
        return int(override_mib * MIB)
    return {"image": MAX_IMAGE_BYTES, "audio": MAX_AUDIO_BYTES}.get(kind, MAX_VIDEO_BYTES)


async def _read_upload(upload: UploadFile, limit_mib: float | None) -> _Upload:
    filename = upload.filename or ""
    content_type = upload.content_type or ""
    limit = _limit_for(_media_kind(content_type, filename), limit_mib)
    too_large = f"Uploaded reference exceeds the {limit / MIB:g} MiB size limit."
    if upload.size is not None and upload.size > limit:
        raise bad_request(too_large)
    payload = await upload.read(limit + 1)
    if len(payload) > limit:
        raise bad_request(too_large)
    return _Upload(filename, content_type, payload)


def _data_url_upload(item: Any, url_key: str, field_name: str) -> _Upload:
    if not isinstance(item, dict) or set(item) != {url_key}:
        raise invalid_field(f"{field_name} must be an object with exactly the key '{url_key}'.")
    url = item[url_key]
    if not isinstance(url, str) or not url.startswith("data:") or "," not in url:
        raise bad_request(
            f"{field_name}.{url_key}: the reference engine accepts only base64 data: URLs."
        )
    header, _, body = url[len("data:") :].partition(",")
    mime, _, encoding = header.partition(";")
    if encoding != "base64":
        raise bad_request(f"{field_name}.{url_key}: data URL must be base64-encoded.")
    try:
        payload = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request(f"{field_name}.{url_key}: invalid base64 payload.") from None
    return _Upload(f"{field_name}.{url_key}", mime, payload)


def _reference_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _decode_references(
    uploads: list[_Upload],
) -> tuple[tuple[ReferenceImage, ...], tuple[ReferenceAudio, ...]]:
    images: list[ReferenceImage] = []
    audios: list[ReferenceAudio] = []
    for upload in uploads:
        kind = _media_kind(upload.content_type, upload.filename)
        if not upload.payload:
            raise bad_request(f"Uploaded reference must not be empty: {upload.filename}")
        suffix = Path(upload.filename).suffix.lower()
        try:
            if kind == "image":
                image = decode_image(upload.payload, upload.filename)
                if not any(name in image.format_name for name in IMAGE_FORMATS):
                    raise bad_request(
                        "MiniMax H3 reference images must use JPG, JPEG, PNG, WEBP, HEIC, or "
                        f"HEIF; got {image.format_name.removesuffix('_pipe')}."
                    )
                images.append(image)
            elif kind == "audio":
                if suffix and suffix not in AUDIO_SUFFIXES:
                    raise bad_request("MiniMax H3 reference audio must use a WAV or MP3 file.")
                audios.append(decode_audio(upload.payload, upload.filename))
            else:
                raise bad_request(
                    "The reference engine accepts image and audio references only; "
                    f"{upload.filename or 'an upload'} ({upload.content_type or 'no type'}) "
                    "is neither."
                )
        except ReferenceDecodeError as exc:
            raise bad_request(str(exc)) from None
    return tuple(images), tuple(audios)


def _resolve_num_frames(
    num_frames: int | None, seconds: str | None, fps: float, extra_params: dict[str, Any]
) -> int:
    if num_frames is not None:
        return num_frames
    duration = extra_params.get("duration")
    if duration is not None:
        # H3 recipes ask for their clip length through extra_params (15 s -> 362 frames at 24 fps).
        if isinstance(duration, bool) or not isinstance(duration, int | float):
            raise bad_request("extra_params.duration must be a number of seconds.")
        if not math.isfinite(duration) or duration <= 0:
            raise bad_request("extra_params.duration must be a positive, finite number.")
        return max(1, int(float(duration) * fps))
    if seconds is not None:
        return int(float(seconds) * fps)
    return int(DEFAULT_SECONDS * fps)


def _random_seed() -> int:
    return int.from_bytes(os.urandom(8), "little", signed=True)


def _resolve_size(size: str | None, width: int | None, height: int | None) -> tuple[int, int]:
    if size is not None:
        w_text, _, h_text = size.partition("x")
        width, height = int(w_text), int(h_text)
    elif width is None and height is None:
        return DEFAULT_WIDTH, DEFAULT_HEIGHT
    elif width is None or height is None:
        raise bad_request("width and height must be given together.")
    if width < 1 or height < 1:
        raise invalid_field(f"width and height must be positive, got {width}x{height}.")
    if width % 2 or height % 2:
        # yuv420p subsamples chroma by two; the real pipeline also needs even latent canvases.
        raise bad_request(f"width and height must be even, got {width}x{height}.")
    return width, height


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

    out_width, out_height = _resolve_size(size, fields.width, fields.height)
    out_fps = DEFAULT_FPS if fps is None else fps
    requested_frames = _resolve_num_frames(fields.num_frames, seconds, out_fps, extra)

    limit_mib: float | None = engine_state.max_upload_mib
    raw_uploads = list(references)
    if input_reference is not None:
        raw_uploads.append(input_reference)
    image_items = _reference_list(parsed_image_reference)
    audio_items = _reference_list(parsed_audio_reference)
    if len(raw_uploads) + len(image_items) + len(audio_items) > MAX_REFERENCE_COUNT:
        raise bad_request(f"MiniMax H3 accepts at most {MAX_REFERENCE_COUNT} total references.")
    uploads = [await _read_upload(upload, limit_mib) for upload in raw_uploads]
    uploads += [_data_url_upload(item, "image_url", "image_reference") for item in image_items]
    uploads += [_data_url_upload(item, "audio_url", "audio_reference") for item in audio_items]
    for upload in uploads[len(raw_uploads) :]:
        limit = _limit_for(_media_kind(upload.content_type, upload.filename), limit_mib)
        if len(upload.payload) > limit:
            raise bad_request(f"Uploaded reference exceeds the {limit / MIB:g} MiB size limit.")
    images, audios = _decode_references(uploads)

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
