"""H3's server-side limits as campaign validation: refused at load, by verify and by freeze."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from ref2va_accept.campaign import _h3_limits as h3_limits
from ref2va_accept.campaign import freeze, load_campaign, lock_path, verify
from ref2va_accept.cli import main as cli_main
from ref2va_accept.core import CampaignError
from tests.media_samples import encoded_audio, image_bytes, wav_bytes

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[2]
SHIPPED_INPUTS = REPO / "fixtures" / "inputs"
MIB = 1024 * 1024


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- campaigns


PROMPT = b"A red ball rolls across a blue floor toward a yellow wall.\n"


def _track(seconds: float, frames: int, audio: bytes, image: bytes) -> dict[str, Any]:
    lossless = seconds == 5.0
    return {
        "duration_s": seconds,
        "num_frames": frames,
        "request": {
            "width": 112,
            "height": 64,
            "fps": 24,
            "num_inference_steps": 50,
            "flow_shift": 12.0,
            "seeds": [42],
            "extra_params": {"task": "ref2va", "duration": seconds},
        },
        "inputs": {
            "prompt": {"path": "inputs/prompt.txt", "sha256": _sha(PROMPT)},
            "reference_image": {"path": "inputs/reference.png", "sha256": _sha(image)},
            "reference_audio": {"path": "inputs/reference.wav", "sha256": _sha(audio)},
        },
        "comparison_points": (
            [{"name": "mp4.video", "source": "mp4", "dtype": "U8", "shape": [frames, 64, 112, 3]}]
            if lossless
            else []
        ),
        "lossy_gate": None if lossless else {"gated": ["vbench.temporal_flickering"]},
    }


def _source_pin(engine: str) -> Any:
    # Whatever form the shipped campaign of this engine kind uses is one the loader accepts.
    name = "reference.yaml" if engine == "reference" else "910c.yaml"
    shipped = yaml.safe_load((REPO / "fixtures" / "campaigns" / name).read_text())
    pin = shipped["engine"]["source_pin"]
    return "vllm-omni==0.30.0" if isinstance(pin, str) and pin.startswith("<FILL") else pin


def write_campaign(
    folder: Path,
    *,
    audio: bytes | None = None,
    image: bytes | None = None,
    engine: str = "reference",
    timeouts: dict[str, float] | None = None,
    environment: dict[str, str] | None = None,
    profile_env: dict[str, str] | None = None,
    tracks: tuple[str, ...] = ("5s-lossless",),
) -> Path:
    audio = (SHIPPED_INPUTS / "reference.wav").read_bytes() if audio is None else audio
    image = (SHIPPED_INPUTS / "reference.png").read_bytes() if image is None else image
    (folder / "inputs").mkdir(parents=True, exist_ok=True)
    (folder / "inputs" / "prompt.txt").write_bytes(PROMPT)
    (folder / "inputs" / "reference.png").write_bytes(image)
    (folder / "inputs" / "reference.wav").write_bytes(audio)
    profile = {
        "name": "b0",
        "declared": "baseline",
        "engine": engine,
        "args": {"enforce-eager": True},
        "env": profile_env or {},
    }
    (folder / "b0.yaml").write_text(yaml.safe_dump(profile))
    shapes = {"5s-lossless": (5.0, 124), "15s-lossy": (15.0, 362)}
    data = {
        "schema_version": 1,
        "name": "limits",
        "engine": {
            "kind": engine,
            "model": "m",
            "source_pin": _source_pin(engine),
            "startup_timeout_s": 60,
        },
        "devices": {"kind": "none"},
        "environment": environment or {},
        "baseline": {"id": "b0", "profile": "b0.yaml"},
        "tracks": {t: _track(*shapes[t], audio=audio, image=image) for t in tracks},
        "protocol": {
            "replication": "request",
            "warmups": 0,
            "repeats": 3,
            "ordering": "ABA",
            "order_seed": 1,
            "timeouts": {d: {"request_s": s} for d, s in (timeouts or {"5s": 120.0}).items()},
        },
        "budget": {},
    }
    path = folder / "campaign.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _lines(exc: pytest.ExceptionInfo[BaseException]) -> list[str]:
    return str(exc.value).splitlines()


AUDIO_LINE = (
    "tracks.5s-lossless.inputs.reference_audio: H3 accepts reference audio of 2 to 15 s "
    "(vLLM-Omni 0.30.0), found 1.500 s (inputs/reference.wav)"
)


# --------------------------------------------------------------------------- the 1.5 s audio


def test_short_audio_is_refused_by_load_with_one_line_naming_the_field(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, audio=wav_bytes(1.5))
    with pytest.raises(CampaignError) as info:
        load_campaign(path)
    assert _lines(info) == [f"{path}: {AUDIO_LINE}"]


def test_short_audio_is_refused_by_freeze_and_verify(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, audio=wav_bytes(1.5))
    with pytest.raises(CampaignError) as info:
        freeze(path)
    assert _lines(info) == [f"{path}: {AUDIO_LINE}"]
    assert not lock_path(path).exists()
    with pytest.raises(CampaignError) as info:
        verify(path)
    assert _lines(info) == [f"{path}: {AUDIO_LINE}"]


@pytest.mark.parametrize("command", ["verify", "freeze"])
def test_short_audio_is_refused_by_the_cli(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_campaign(tmp_path, audio=wav_bytes(1.5))
    assert cli_main([command, str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"ref2va-accept {command}: {path}: {AUDIO_LINE}"]


def test_shared_file_is_one_line_listing_the_other_fields(tmp_path: Path) -> None:
    path = write_campaign(
        tmp_path,
        audio=wav_bytes(1.5),
        tracks=("5s-lossless", "15s-lossy"),
        timeouts={"5s": 120.0, "15s": 300.0},
    )
    with pytest.raises(CampaignError) as info:
        load_campaign(path)
    assert _lines(info) == [
        f"{path}: {AUDIO_LINE[:-1]}; also tracks.15s-lossy.inputs.reference_audio)"
    ]


def test_passing_inputs_load_freeze_and_verify(tmp_path: Path) -> None:
    path = write_campaign(tmp_path)
    load_campaign(path)
    freeze(path)
    assert verify(path).state == "frozen"


def test_missing_input_loads_and_freeze_names_it(tmp_path: Path) -> None:
    path = write_campaign(tmp_path)
    (tmp_path / "inputs" / "reference.wav").unlink()
    load_campaign(path)
    with pytest.raises(Exception, match=r"file inputs/reference\.wav: missing"):
        freeze(path)


def test_a_drifted_input_is_reported_as_drift_not_judged(tmp_path: Path) -> None:
    path = write_campaign(tmp_path)
    freeze(path)
    (tmp_path / "inputs" / "reference.wav").write_bytes(wav_bytes(1.5))
    status = verify(path)
    assert status.state == "drifted"
    assert any(p.startswith("file inputs/reference.wav: locked sha256") for p in status.problems)


def test_shipped_inputs_are_within_the_limits() -> None:
    assert h3_limits.check_audio(SHIPPED_INPUTS / "reference.wav", "a") == []
    assert h3_limits.check_image(SHIPPED_INPUTS / "reference.png", "i") == []
    facts = h3_limits.probe_audio(SHIPPED_INPUTS / "reference.wav")
    assert facts.duration_s == pytest.approx(3.0) and facts.codec == "pcm_s16le"
    assert h3_limits.probe_image(SHIPPED_INPUTS / "reference.png") == h3_limits.ImageFacts(
        "png", 448, 256
    )


# --------------------------------------------------------------------------- each limit


def _audio_problems(tmp_path: Path, data: bytes, name: str = "a.wav") -> list[str]:
    path = tmp_path / name
    path.write_bytes(data)
    return h3_limits.check_audio(path, name)


def _image_problems(tmp_path: Path, data: bytes, name: str = "i.png") -> list[str]:
    path = tmp_path / name
    path.write_bytes(data)
    return h3_limits.check_image(path, name)


@pytest.mark.parametrize("seconds", [2.0, 3.0, 15.0])
def test_audio_duration_within_bounds_passes(tmp_path: Path, seconds: float) -> None:
    assert _audio_problems(tmp_path, wav_bytes(seconds)) == []


@pytest.mark.parametrize("seconds", [1.5, 1.99, 15.01])
def test_audio_duration_outside_bounds_fails(tmp_path: Path, seconds: float) -> None:
    assert _audio_problems(tmp_path, wav_bytes(seconds)) == [
        f"H3 accepts reference audio of 2 to 15 s (vLLM-Omni 0.30.0), found {seconds:.3f} s (a.wav)"
    ]


def test_audio_over_fifteen_mib_fails(tmp_path: Path) -> None:
    under = wav_bytes(3.0, pad_bytes=15 * MIB - len(wav_bytes(3.0)) - 8)
    assert len(under) == 15 * MIB and _audio_problems(tmp_path, under) == []
    over = wav_bytes(3.0, pad_bytes=15 * MIB)
    assert _audio_problems(tmp_path, over) == [
        "H3 accepts reference audio of at most 15 MiB (15728640 bytes, vLLM-Omni 0.30.0), found "
        f"{len(over)} bytes (a.wav)"
    ]


def test_mp3_passes_and_flac_fails(tmp_path: Path) -> None:
    assert _audio_problems(tmp_path, encoded_audio("mp3", "mp3", rate=44_100), "a.mp3") == []
    assert _audio_problems(tmp_path, encoded_audio("flac", "flac"), "a.flac") == [
        "H3 accepts WAV or MP3 reference audio (vLLM-Omni 0.30.0), found flac (a.flac)",
        "H3 accepts reference audio coded as MP3, AAC or PCM (vLLM-Omni 0.30.0), found flac "
        "(a.flac)",
    ]


def test_wav_with_a_non_pcm_codec_fails(tmp_path: Path) -> None:
    assert _audio_problems(tmp_path, encoded_audio("wav", "adpcm_ms")) == [
        "H3 accepts reference audio coded as MP3, AAC or PCM (vLLM-Omni 0.30.0), found adpcm_ms "
        "(a.wav)"
    ]


def test_audio_that_does_not_decode_fails_without_an_absolute_path(tmp_path: Path) -> None:
    assert _audio_problems(tmp_path, b"RIFF fake audio bytes") == [
        "H3 accepts WAV or MP3 reference audio (vLLM-Omni 0.30.0), found a file that does not "
        "decode as audio (a.wav)"
    ]


@pytest.mark.parametrize(
    ("size", "fmt"), [((256, 256), "PNG"), ((448, 256), "JPEG"), ((640, 256), "WEBP")]
)
def test_images_within_limits_pass(tmp_path: Path, size: tuple[int, int], fmt: str) -> None:
    assert _image_problems(tmp_path, image_bytes(*size, fmt=fmt)) == []


def test_image_with_a_short_edge_under_256_fails(tmp_path: Path) -> None:
    assert _image_problems(tmp_path, image_bytes(448, 255)) == [
        "H3 accepts reference images with edges of 256 to 5760 pixels (vLLM-Omni 0.30.0), "
        "found 448x255 (i.png)"
    ]


@pytest.mark.parametrize(("width", "height"), [(660, 256), (256, 660)])
def test_image_aspect_outside_bounds_fails(tmp_path: Path, width: int, height: int) -> None:
    assert _image_problems(tmp_path, image_bytes(width, height)) == [
        "H3 accepts reference images with an aspect ratio (width/height) of 0.4 to 2.5 "
        f"(vLLM-Omni 0.30.0), found {width}x{height} (i.png)"
    ]


def test_image_in_another_format_fails(tmp_path: Path) -> None:
    assert _image_problems(tmp_path, image_bytes(448, 256, fmt="BMP"), "i.bmp") == [
        "H3 accepts JPG, PNG, WEBP or HEIC reference images (vLLM-Omni 0.30.0), found bmp (i.bmp)"
    ]


def test_image_over_thirty_mib_fails(tmp_path: Path) -> None:
    png = image_bytes(448, 256)
    assert _image_problems(tmp_path, png + b"\0" * (30 * MIB - len(png))) == []
    assert _image_problems(tmp_path, png + b"\0" * (30 * MIB - len(png) + 1)) == [
        "H3 accepts reference images of at most 30 MiB (31457280 bytes, vLLM-Omni 0.30.0), "
        "found 31457281 bytes (i.png)"
    ]


def test_image_that_does_not_open_fails(tmp_path: Path) -> None:
    assert _image_problems(tmp_path, b"\x89PNG fake image bytes") == [
        "H3 accepts JPG, PNG, WEBP or HEIC reference images (vLLM-Omni 0.30.0), found a file "
        "that does not open as an image (i.png)"
    ]


def test_campaign_image_problems_are_named_at_the_image_field(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, image=image_bytes(660, 256))
    with pytest.raises(CampaignError) as info:
        load_campaign(path)
    assert _lines(info) == [
        f"{path}: tracks.5s-lossless.inputs.reference_image: H3 accepts reference images with "
        "an aspect ratio (width/height) of 0.4 to 2.5 (vLLM-Omni 0.30.0), found 660x256 "
        "(inputs/reference.png)"
    ]


# --------------------------------------------------------------------------- server time bounds


BOTH_SET = {"VLLM_OMNI_DLO_DP_WAVE_TIMEOUT": "3660", "VLLM_OMNI_VIDEO_SYNC_TIMEOUT": "3660"}


def _vllm_campaign(tmp_path: Path, **kwargs: Any) -> Path:
    return write_campaign(
        tmp_path,
        engine="vllm-omni",
        tracks=("5s-lossless", "15s-lossy"),
        **{"timeouts": {"5s": 900.0, "15s": 3660.0}, **kwargs},
    )


def test_long_timeout_with_the_dlo_bound_unset_is_refused_naming_the_variable(
    tmp_path: Path,
) -> None:
    env = {"VLLM_OMNI_VIDEO_SYNC_TIMEOUT": "3660"}
    path = _vllm_campaign(tmp_path, timeouts={"5s": 600.0, "15s": 3660.0}, environment=env)
    with pytest.raises(CampaignError) as info:
        load_campaign(path)
    assert _lines(info) == [
        f"{path}: protocol.timeouts.15s.request_s: 3660 s is above the server's "
        "VLLM_OMNI_DLO_DP_WAVE_TIMEOUT default of 600 s (vLLM-Omni 0.30.0: the generation RPC "
        "is cut and the engine shut down); set VLLM_OMNI_DLO_DP_WAVE_TIMEOUT to at least 3660 "
        "in environment"
    ]


def test_every_duration_and_bound_left_at_default_is_one_line(tmp_path: Path) -> None:
    path = _vllm_campaign(tmp_path)
    with pytest.raises(CampaignError) as info:
        load_campaign(path)
    lines = _lines(info)
    assert len(lines) == 4
    for duration in ("5s", "15s"):
        for name in h3_limits.SERVER_TIME_BOUNDS:
            assert sum(f"timeouts.{duration}.request_s" in ln and name in ln for ln in lines) == 1


def test_both_bounds_set_high_enough_load(tmp_path: Path) -> None:
    load_campaign(_vllm_campaign(tmp_path, environment=BOTH_SET))


def test_a_bound_in_the_b0_profile_env_counts(tmp_path: Path) -> None:
    env = {"VLLM_OMNI_VIDEO_SYNC_TIMEOUT": "3660"}
    profile_env = {"VLLM_OMNI_DLO_DP_WAVE_TIMEOUT": "4000"}
    load_campaign(_vllm_campaign(tmp_path, environment=env, profile_env=profile_env))


def test_a_set_bound_below_request_s_is_refused(tmp_path: Path) -> None:
    env = {**BOTH_SET, "VLLM_OMNI_VIDEO_SYNC_TIMEOUT": "3600"}
    path = _vllm_campaign(tmp_path, environment=env)
    with pytest.raises(CampaignError) as info:
        load_campaign(path)
    assert _lines(info) == [
        f"{path}: protocol.timeouts.15s.request_s: 3660 s is above the server's "
        "VLLM_OMNI_VIDEO_SYNC_TIMEOUT=3600 s (vLLM-Omni 0.30.0: the sync route answers 504 "
        "first); set VLLM_OMNI_VIDEO_SYNC_TIMEOUT to at least 3660"
    ]


def test_short_timeouts_need_no_bound_set(tmp_path: Path) -> None:
    load_campaign(_vllm_campaign(tmp_path, timeouts={"5s": 600.0, "15s": 600.0}))


def test_the_reference_engine_is_not_held_to_vllm_omnis_time_bounds(tmp_path: Path) -> None:
    timeouts = {"5s": 900.0, "15s": 3660.0}
    path = write_campaign(tmp_path, tracks=("5s-lossless", "15s-lossy"), timeouts=timeouts)
    load_campaign(path)


def test_a_bound_that_is_not_a_number_is_named(tmp_path: Path) -> None:
    env = {**BOTH_SET, "VLLM_OMNI_DLO_DP_WAVE_TIMEOUT": "an hour"}
    with pytest.raises(CampaignError, match="VLLM_OMNI_DLO_DP_WAVE_TIMEOUT must be a number"):
        load_campaign(_vllm_campaign(tmp_path, environment=env))
