"""``POST /v1/videos/sync`` against a real engine process: media, determinism, headers, errors."""

from __future__ import annotations

import json
from fractions import Fraction

import httpx
import numpy as np
import pytest

from tests.engine.conftest import png_bytes, probe
from tests.media_samples import wav_bytes

pytestmark = pytest.mark.engine

SMALL = {"width": "96", "height": "64", "fps": "24", "num_inference_steps": "8", "seed": "7"}
# For the tests about the media's frames, streams and codecs: neither depends on how many steps
# denoised the latents (the 124-frame request at 8 steps cost 4x its denoise at 2).
FEW_STEPS = "2"


def _sync(client: httpx.Client, files: object = None, **fields: str) -> httpx.Response:
    data = {"prompt": "a red fox in snow", **SMALL, **fields}
    return client.post("/v1/videos/sync", data=data, files=files)  # type: ignore[arg-type]


def test_health_and_models(client: httpx.Client) -> None:
    assert client.get("/health").json() == {"status": "healthy"}
    models = client.get("/v1/models").json()
    assert models["object"] == "list"
    assert [card["id"] for card in models["data"]] == ["ref2va-reference"]


def test_124_frames_decode_with_matching_stereo_aac(client: httpx.Client) -> None:
    response = _sync(client, num_frames="124", num_inference_steps=FEW_STEPS)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "video/mp4"
    media = probe(response.content)
    assert media.video_frames == 124
    assert media.fps == Fraction(24)
    assert (media.width, media.height, media.video_codec) == (96, 64, "h264")
    assert media.pix_fmt == "yuv420p"
    assert (media.audio_codec, media.audio_rate, media.audio_channels) == ("aac", 32_000, 2)
    assert media.audio_duration_s == pytest.approx(round(124 * 32_000 / 24) / 32_000, abs=1e-6)


def test_sync_headers_follow_the_real_server(client: httpx.Client) -> None:
    headers = _sync(client, num_frames="22").headers
    assert headers["x-request-id"].startswith("video_sync-")
    assert headers["x-model"] == "ref2va-reference"
    assert json.loads(headers["x-stage-durations"]) == {}
    for name in ("x-inference-time-s", "x-peak-memory-mb"):
        assert len(headers[name].split(".")[1]) == 3 and float(headers[name]) > 0


def test_frame_count_snaps_up_to_17n_plus_5(client: httpx.Client) -> None:
    assert probe(_sync(client, num_frames="100", num_inference_steps=FEW_STEPS).content) \
        .video_frames == 107


def test_duration_in_extra_params_sets_the_frame_count(client: httpx.Client) -> None:
    response = _sync(client, extra_params=json.dumps({"task": "ref2va", "duration": 5.0}),
                     num_inference_steps=FEW_STEPS)
    assert probe(response.content).video_frames == 124


def test_same_seed_gives_identical_bytes(client: httpx.Client) -> None:
    first = _sync(client, num_frames="39")
    second = _sync(client, num_frames="39")
    assert first.status_code == second.status_code == 200
    assert first.content == second.content


def test_different_seed_gives_different_bytes(client: httpx.Client) -> None:
    seven = _sync(client, num_frames="39").content
    assert seven != _sync(client, num_frames="39", seed="8").content


def test_generate_sound_false_omits_the_audio_stream(client: httpx.Client) -> None:
    media = probe(_sync(client, num_frames="22", generate_sound="false").content)
    assert media.audio_codec is None and media.video_frames == 22


def test_references_change_the_output_deterministically(client: httpx.Client) -> None:
    plain = _sync(client, num_frames="22").content
    # Sizes within H3's reference limits (shortest edge >= 256 px, audio 2..15 s), or it is a 400.
    refs = [
        ("input_references", ("ref.png", png_bytes(448, 256), "image/png")),
        ("input_references", ("voice.wav", wav_bytes(3.0, 16_000, 1, hz=440.0, amplitude=0.5),
                              "audio/wav")),
    ]
    with_refs = _sync(client, files=refs, num_frames="22")
    assert with_refs.status_code == 200, with_refs.text
    assert with_refs.content != plain
    assert _sync(client, files=refs, num_frames="22").content == with_refs.content


def test_single_input_reference_image_is_visible(client: httpx.Client) -> None:
    def first_frame(image: bytes) -> np.ndarray:
        files = {"input_reference": ("ref.png", image, "image/png")}
        return probe(_sync(client, files=files, num_frames="5").content).first_frame

    frame, other = first_frame(png_bytes(448, 256, 1)), first_frame(png_bytes(448, 256, 2))
    assert np.abs(frame.astype(int) - other.astype(int)).mean() > 5


BAD_REQUESTS = {
    "missing-prompt": ({"prompt": None}, None),
    "malformed-extra-params": ({"extra_params": "{not json"}, None),
    "extra-params-not-object": ({"extra_params": "[1, 2]"}, None),
    "odd-width": ({"width": "95"}, None),
    "zero-height": ({"height": "0"}, None),
    "zero-frames": ({"num_frames": "0"}, None),
    "unknown-quality": ({"quality": "ultra"}, None),
    "wrong-model": ({"model": "someone-else"}, None),
    "unreadable-image": ({}, [("input_references", ("x.png", b"not a png", "image/png"))]),
    "unreadable-audio": ({}, [("input_references", ("x.wav", b"RIFFjunk", "audio/wav"))]),
    "too-many-references": (
        {},
        [("input_references", (f"r{i}.png", png_bytes(8, 8), "image/png")) for i in range(13)],
    ),
    "both-reference-fields": (
        {},
        [
            ("input_reference", ("a.png", png_bytes(8, 8), "image/png")),
            ("input_references", ("b.png", png_bytes(8, 8), "image/png")),
        ],
    ),
    "video-reference": ({}, [("input_references", ("clip.mp4", b"\0" * 64, "video/mp4"))]),
}


@pytest.mark.parametrize(("fields", "files"), BAD_REQUESTS.values(), ids=BAD_REQUESTS.keys())
def test_bad_input_is_400_in_vllm_error_shape_and_server_stays_healthy(
    client: httpx.Client, fields: dict[str, str | None], files: object
) -> None:
    data = {"prompt": "p", **SMALL, "num_frames": "5", **fields}
    response = client.post(
        "/v1/videos/sync",
        data={key: value for key, value in data.items() if value is not None},
        files=files,  # type: ignore[arg-type]
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == 400 and error["message"]
    assert client.get("/health").status_code == 200
