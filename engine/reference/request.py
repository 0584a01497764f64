"""The multipart form of ``POST /v1/videos[/sync]``: parsing and validation, as vLLM-Omni does it.

Field names, defaults, which combinations of reference fields are refused, H3's upload limits and
the model-name check follow ``_parse_video_form`` of vLLM-Omni 0.30.0; the JSON reference fields
(``image_reference``, ``audio_reference``) are read as its ``decode_image_url``/``decode_audio_url``
read them. H3's own reference limits (image edges and aspect, audio length, size, format and codec),
which the real server checks when its encoder stage prepares the request and answers with a 400,
are checked here at parse time with upstream's messages. What the reference engine cannot honour
(video references, remote URLs) is refused with a 400 that says so.
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
# H3's reference limits at encode time (model_executor/models/minimax_h3/: reference_video.py for
# audio, preprocessing.py for images, encoder_processing.py for the per-kind counts).
MIN_REFERENCE_AUDIO_S, MAX_REFERENCE_AUDIO_S = 2.0, 15.0
MAX_REFERENCE_AUDIO_TOTAL_S = 15.0
AUDIO_FORMATS = frozenset({"wav", "mp3"})  # container names, as ffprobe (and PyAV) report them
AUDIO_CODECS = frozenset({"aac", "mp3"})  # plus any pcm_*
MIN_IMAGE_EDGE, MAX_IMAGE_EDGE = 256, 5760
MIN_IMAGE_ASPECT, MAX_IMAGE_ASPECT = 0.4, 2.5
MAX_IMAGE_REFERENCES, MAX_AUDIO_REFERENCES = 9, 3
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
    # A JSON reference field says its kind itself; a file part is classified by MIME and suffix.
    kind: str | None = None


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


def _reference_url(item: Any, url_key: str, field_name: str) -> str:
    if isinstance(item, dict) and set(item) == {"file_id"} and field_name == "image_reference":
        raise bad_request(f"Invalid {field_name}: file_id is not supported yet.")
    if not isinstance(item, dict) or set(item) != {url_key} or not isinstance(item[url_key], str):
        raise invalid_field(f"{field_name} must be an object with exactly the key '{url_key}'.")
    url: str = item[url_key]
    if url.startswith(("http://", "https://")):
        raise bad_request(
            f"{field_name}.{url_key}: the reference engine downloads nothing; it accepts only "
            "base64 data: URLs."
        )
    return url


def _b64(body: str, message: str) -> bytes:
    # Upstream decodes without validate=True: characters outside the alphabet are dropped.
    try:
        return base64.b64decode(body)
    except (binascii.Error, ValueError):
        raise bad_request(message) from None


def _image_data_url(item: Any) -> _Upload:
    """``image_reference`` as vLLM-Omni's ``decode_image_url`` reads it: a ``data:image`` URL."""
    url = _reference_url(item, "image_url", "image_reference")
    if not url.startswith("data:image"):
        raise bad_request("Invalid image_reference.image_url: must be an http(s) URL or data URL.")
    mime = url[len("data:") :].split(";", 1)[0].split(",", 1)[0]
    body = url.split(",", 1)[1] if "," in url else ""
    payload = _b64(body, "Invalid image_reference.image_url: image data is not valid base64.")
    return _Upload("image_reference.image_url", mime, payload, kind="image")


def _audio_data_url(item: Any) -> _Upload:
    """``audio_reference`` as vLLM-Omni's ``decode_audio_url`` reads it: a ``data:audio`` URL."""
    url = _reference_url(item, "audio_url", "audio_reference")
    if not url.startswith("data:audio"):
        raise bad_request("Invalid audio_reference.audio_url: must be an http(s) URL or data URL.")
    if "," not in url:
        raise bad_request("Invalid audio_reference.audio_url: audio data is not valid base64.")
    payload = _b64(
        url.split(",", 1)[1], "Invalid audio_reference.audio_url: audio data is not valid base64."
    )
    if not payload:
        raise bad_request("Invalid audio_reference: audio data is empty.")
    mime = url.split(";", 1)[0].removeprefix("data:")
    # Upstream names the temporary file after the MIME subtype; the container decides the rest.
    ext = mime.split("/")[-1]
    if ext in ("mpeg", "mp3"):
        suffix = ".mp3"
    else:
        suffix = f".{ext}" if ext.isalnum() and len(ext) <= 8 else ".wav"
    return _Upload(f"audio_reference{suffix}", mime, payload, kind="audio")


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
        kind = upload.kind or _media_kind(upload.content_type, upload.filename)
        if upload.kind == "image":
            # decode_image_url: any image Pillow opens; the format list is the upload path's.
            try:
                images.append(decode_image(upload.payload, upload.filename))
            except ReferenceDecodeError:
                raise bad_request(
                    "Invalid image_reference.image_url: provided content is not a valid image."
                ) from None
            continue
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
                # Only a file part's name is checked; a data URL's audio is judged by its content.
                if upload.kind is None and suffix and suffix not in AUDIO_SUFFIXES:
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


def _check_h3_reference_limits(
    images: tuple[ReferenceImage, ...], audios: tuple[ReferenceAudio, ...]
) -> None:
    """H3's encoder-stage checks, in upstream's order and words (OmniClientError -> 400)."""
    if len(images) > MAX_IMAGE_REFERENCES:
        raise bad_request(f"ref2va accepts at most {MAX_IMAGE_REFERENCES} image references")
    if len(audios) > MAX_AUDIO_REFERENCES:
        raise bad_request(
            f"ref2va accepts at most {MAX_AUDIO_REFERENCES} standalone audio references"
        )
    for image in images:
        height, width = image.rgb.shape[:2]
        if not MIN_IMAGE_ASPECT <= width / height <= MAX_IMAGE_ASPECT:
            raise bad_request(
                f"reference image aspect ratio must be in [0.4, 2.5], got {width}x{height}"
            )
        if min(width, height) < MIN_IMAGE_EDGE or max(width, height) > MAX_IMAGE_EDGE:
            raise bad_request(
                f"reference image dimensions must be in [256, 5760] pixels, got {width}x{height}"
            )
    total = 0.0
    for index, audio in enumerate(audios):
        if len(audio.payload) > MAX_AUDIO_BYTES:
            raise bad_request(f"reference audio {index} exceeds the 15 MiB size limit")
        if not AUDIO_FORMATS.intersection(audio.format_names):
            formats = ", ".join(audio.format_names) or "unknown"
            raise bad_request(f"reference audio {index} must be WAV or MP3, got {formats}")
        if audio.codec not in AUDIO_CODECS and not audio.codec.startswith("pcm_"):
            raise bad_request(
                f"reference audio {index} must use MP3 or PCM audio, got {audio.codec or 'unknown'}"
            )
        duration = audio.duration_s
        if not (
            math.isfinite(duration) and MIN_REFERENCE_AUDIO_S <= duration <= MAX_REFERENCE_AUDIO_S
        ):
            raise bad_request(
                f"reference audio {index} duration must be in [2, 15] seconds, got {duration:.3f}"
            )
        total += duration
    if total > MAX_REFERENCE_AUDIO_TOTAL_S:
        raise bad_request("reference audio must be at most 15 seconds in total")


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
    # Upstream reads image references, then appends audio references after the file parts' audio.
    uploads += [_image_data_url(item) for item in image_items]
    uploads += [_audio_data_url(item) for item in audio_items]
    if limit_mib is not None:
        # The profile's own body cap (a test knob) also bounds what arrives as a data URL.
        for upload in uploads[len(raw_uploads) :]:
            if len(upload.payload) > limit_mib * MIB:
                raise bad_request(f"Uploaded reference exceeds the {limit_mib:g} MiB size limit.")
    images, audios = _decode_references(uploads)
    _check_h3_reference_limits(images, audios)

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
