"""Reference uploads: file parts and the JSON reference fields' data URLs, read and decoded.

The JSON reference fields (``image_reference``, ``audio_reference``) are read as vLLM-Omni
0.30.0's ``decode_image_url``/``decode_audio_url`` read them; a file part is classified by MIME
type and suffix and held to its kind's upload limit. The reference engine downloads nothing:
a remote URL is refused with a 400 that says so.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import UploadFile

from engine.reference.errors import bad_request, invalid_field
from engine.reference.references import (
    ReferenceAudio,
    ReferenceDecodeError,
    ReferenceImage,
    decode_audio,
    decode_image,
)
from engine.reference.request_limits import MAX_AUDIO_BYTES, MAX_IMAGE_BYTES, MAX_VIDEO_BYTES, MIB

IMAGE_FORMATS = ("png", "jpeg", "webp", "heic", "heif")  # matched against FFmpeg demuxer names
AUDIO_SUFFIXES = frozenset({".wav", ".mp3"})
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".heic", ".heif"})
OTHER_AUDIO_SUFFIXES = frozenset({".m4a", ".aac", ".flac", ".ogg"})


@dataclass(frozen=True)
class Upload:
    filename: str
    content_type: str
    payload: bytes
    # A JSON reference field says its kind itself; a file part is classified by MIME and suffix.
    kind: str | None = None


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


async def read_upload(upload: UploadFile, limit_mib: float | None) -> Upload:
    filename = upload.filename or ""
    content_type = upload.content_type or ""
    limit = _limit_for(_media_kind(content_type, filename), limit_mib)
    too_large = f"Uploaded reference exceeds the {limit / MIB:g} MiB size limit."
    if upload.size is not None and upload.size > limit:
        raise bad_request(too_large)
    payload = await upload.read(limit + 1)
    if len(payload) > limit:
        raise bad_request(too_large)
    return Upload(filename, content_type, payload)


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


def image_data_url(item: Any) -> Upload:
    """``image_reference`` as vLLM-Omni's ``decode_image_url`` reads it: a ``data:image`` URL."""
    url = _reference_url(item, "image_url", "image_reference")
    if not url.startswith("data:image"):
        raise bad_request("Invalid image_reference.image_url: must be an http(s) URL or data URL.")
    mime = url[len("data:") :].split(";", 1)[0].split(",", 1)[0]
    body = url.split(",", 1)[1] if "," in url else ""
    payload = _b64(body, "Invalid image_reference.image_url: image data is not valid base64.")
    return Upload("image_reference.image_url", mime, payload, kind="image")


def audio_data_url(item: Any) -> Upload:
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
    return Upload(f"audio_reference{suffix}", mime, payload, kind="audio")


def reference_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def decode_references(
    uploads: list[Upload],
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
