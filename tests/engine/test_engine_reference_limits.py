"""H3's reference limits in the reference engine: upstream's status code and words, every form.

vLLM-Omni 0.30.0 refuses, with HTTP 400, reference audio outside 2..15 s or over 15 MiB or not
WAV/MP3, and reference images whose shortest edge is under 256 px or whose aspect ratio is outside
0.4..2.5; it accepts references as file parts and as JSON data-URL fields. Driven in-process.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.reference.app import create_app
from engine.reference.profile import load_profile
from tests.engine.asgi_engine import AsgiEngine
from tests.engine.conftest import B0_PROFILE, png_bytes
from tests.media_samples import encoded_audio, wav_bytes

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[2]
SHIPPED_AUDIO = REPO / "fixtures" / "inputs" / "reference.wav"
SHIPPED_IMAGE = REPO / "fixtures" / "inputs" / "reference.png"
FORM = {
    "prompt": "a red ball",
    "width": "32",
    "height": "32",
    "num_frames": "5",
    "num_inference_steps": "2",
    "seed": "5",
}


@pytest.fixture(scope="module")
def engine() -> Iterator[AsgiEngine]:
    served = AsgiEngine(create_app(load_profile(B0_PROFILE)))
    yield served
    served.close()


def _post(
    engine: AsgiEngine, files: list[tuple[str, tuple[str, bytes, str]]] | None = None, **fields: str
) -> tuple[int, dict[str, object] | bytes]:
    response = engine.post("/v1/videos/sync", data={**FORM, **fields}, files=files or None)
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.status_code, response.json()
    return response.status_code, response.content


def _error(body: dict[str, object] | bytes) -> str:
    assert isinstance(body, dict), "expected a JSON error body"
    error = body["error"]
    assert isinstance(error, dict) and error["code"] == 400
    return str(error["message"])


def _image_part(data: bytes, name: str = "ref.png") -> tuple[str, tuple[str, bytes, str]]:
    return ("input_references", (name, data, "image/png"))


def _audio_part(data: bytes, name: str = "ref.wav") -> tuple[str, tuple[str, bytes, str]]:
    return ("input_references", (name, data, "audio/wav"))


IMAGE = SHIPPED_IMAGE.read_bytes()  # 448x256, within every limit


# ------------------------------------------------------------------------------------ audio


def test_the_old_one_and_a_half_second_audio_is_400_with_upstreams_message(
    engine: AsgiEngine,
) -> None:
    status, body = _post(engine, [_image_part(IMAGE), _audio_part(wav_bytes(1.5))])
    assert status == 400
    assert _error(body) == "reference audio 0 duration must be in [2, 15] seconds, got 1.500"


def test_audio_just_over_fifteen_seconds_is_400(engine: AsgiEngine) -> None:
    status, body = _post(engine, [_image_part(IMAGE), _audio_part(wav_bytes(15.5))])
    assert status == 400
    assert _error(body) == "reference audio 0 duration must be in [2, 15] seconds, got 15.500"


def test_three_second_audio_and_the_shipped_inputs_generate(engine: AsgiEngine) -> None:
    status, body = _post(engine, [_image_part(IMAGE), _audio_part(wav_bytes(3.0))])
    assert status == 200 and isinstance(body, bytes) and body[4:8] == b"ftyp"
    shipped = SHIPPED_AUDIO.read_bytes()
    status, body = _post(engine, [_image_part(IMAGE), _audio_part(shipped)])
    assert status == 200, body


def test_two_seconds_exactly_is_accepted(engine: AsgiEngine) -> None:
    status, body = _post(engine, [_image_part(IMAGE), _audio_part(wav_bytes(2.0))])
    assert status == 200, body


def test_audio_total_over_fifteen_seconds_is_400(engine: AsgiEngine) -> None:
    parts = [_image_part(IMAGE), _audio_part(wav_bytes(8.0), "a.wav"),
             _audio_part(wav_bytes(8.0), "b.wav")]
    status, body = _post(engine, parts)
    assert status == 400
    assert _error(body) == "reference audio must be at most 15 seconds in total"


def test_oversized_audio_file_is_400(engine: AsgiEngine) -> None:
    big = wav_bytes(3.0, pad_bytes=15 * 1024 * 1024)
    status, body = _post(engine, [_image_part(IMAGE), _audio_part(big)])
    assert status == 400
    assert _error(body) == "Uploaded reference exceeds the 15 MiB size limit."


def test_audio_in_another_container_is_400_naming_it(engine: AsgiEngine) -> None:
    # A FLAC file part is refused by its name before it is decoded, as upstream does.
    status, body = _post(engine, [_image_part(IMAGE), _audio_part(wav_bytes(3.0), "ref.flac")])
    assert status == 400
    assert _error(body) == "MiniMax H3 reference audio must use a WAV or MP3 file."


# -------------------------------------------------------------------------- data-URL forms


def _data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def test_audio_reference_data_url_generates(engine: AsgiEngine) -> None:
    audio = json.dumps({"audio_url": _data_url("audio/wav", wav_bytes(3.0))})
    status, body = _post(engine, [_image_part(IMAGE)], audio_reference=audio)
    assert status == 200, body


def test_mp3_audio_reference_data_url_generates(engine: AsgiEngine) -> None:
    mp3 = encoded_audio("mp3", "mp3", 3.0, 44_100)
    audio = json.dumps({"audio_url": _data_url("audio/mpeg", mp3)})
    status, body = _post(engine, [_image_part(IMAGE)], audio_reference=audio)
    assert status == 200, body


def test_audio_reference_data_url_is_held_to_the_same_limits(engine: AsgiEngine) -> None:
    audio = json.dumps({"audio_url": _data_url("audio/wav", wav_bytes(1.5))})
    status, body = _post(engine, [_image_part(IMAGE)], audio_reference=audio)
    assert status == 400
    assert _error(body) == "reference audio 0 duration must be in [2, 15] seconds, got 1.500"


def test_audio_reference_index_counts_file_parts_first(engine: AsgiEngine) -> None:
    audio = json.dumps([{"audio_url": _data_url("audio/x-wav", wav_bytes(1.0))}])
    status, body = _post(
        engine, [_image_part(IMAGE), _audio_part(wav_bytes(3.0))], audio_reference=audio
    )
    assert status == 400
    assert _error(body) == "reference audio 1 duration must be in [2, 15] seconds, got 1.000"


def test_audio_reference_that_is_not_a_data_audio_url_is_400(engine: AsgiEngine) -> None:
    audio = json.dumps({"audio_url": _data_url("application/octet-stream", wav_bytes(3.0))})
    status, body = _post(engine, [_image_part(IMAGE)], audio_reference=audio)
    assert status == 400
    assert _error(body) == "Invalid audio_reference.audio_url: must be an http(s) URL or data URL."


def test_image_reference_data_url_generates(engine: AsgiEngine) -> None:
    image = json.dumps({"image_url": _data_url("image/png", IMAGE)})
    audio = json.dumps({"audio_url": _data_url("audio/wav", wav_bytes(3.0))})
    status, body = _post(engine, image_reference=image, audio_reference=audio)
    assert status == 200, body


def test_image_reference_data_url_is_held_to_the_image_limits(engine: AsgiEngine) -> None:
    image = json.dumps({"image_url": _data_url("image/png", png_bytes(200, 300))})
    status, body = _post(engine, image_reference=image)
    assert status == 400
    assert _error(body) == "reference image dimensions must be in [256, 5760] pixels, got 200x300"


def test_image_reference_that_is_not_an_image_is_400(engine: AsgiEngine) -> None:
    image = json.dumps({"image_url": _data_url("image/png", b"not an image")})
    status, body = _post(engine, image_reference=image)
    assert status == 400
    assert (
        _error(body) == "Invalid image_reference.image_url: provided content is not a valid image."
    )


# ----------------------------------------------------------------------------------- images


def test_too_small_image_is_400(engine: AsgiEngine) -> None:
    status, body = _post(engine, [_image_part(png_bytes(400, 255))])
    assert status == 400
    assert _error(body) == "reference image dimensions must be in [256, 5760] pixels, got 400x255"


def test_smallest_allowed_image_generates(engine: AsgiEngine) -> None:
    status, body = _post(engine, [_image_part(png_bytes(256, 256))])
    assert status == 200, body


def test_wrong_aspect_is_400(engine: AsgiEngine) -> None:
    status, body = _post(engine, [_image_part(png_bytes(660, 256))])
    assert status == 400
    assert _error(body) == "reference image aspect ratio must be in [0.4, 2.5], got 660x256"


def test_widest_allowed_aspect_generates(engine: AsgiEngine) -> None:
    status, body = _post(engine, [_image_part(png_bytes(640, 256))])
    assert status == 200, body


def test_oversized_image_file_is_400(engine: AsgiEngine) -> None:
    big = IMAGE + b"\0" * (30 * 1024 * 1024)
    status, body = _post(engine, [_image_part(big)])
    assert status == 400
    assert _error(body) == "Uploaded reference exceeds the 30 MiB size limit."
