"""`ref2va-accept` as a user runs it: one clear line and a non-zero exit for bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ref2va_accept.cli", *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)


def _mp4(path: Path, frames: int = 124, audio: bool = True) -> Path:
    with av.open(str(path), "w") as container:
        video = container.add_stream("libx264", rate=24)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        sound = container.add_stream("aac", rate=32000) if audio else None
        if sound is not None:
            sound.layout = "stereo"
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), i % 256, np.uint8),
                                               format="rgb24")
            container.mux(video.encode(frame))
        container.mux(video.encode())
        if sound is not None:
            samples = np.zeros((2, round(32000 * frames / 24)), np.float32)
            chunk = av.AudioFrame.from_ndarray(samples, format="fltp", layout="stereo")
            chunk.sample_rate = 32000
            container.mux(sound.encode(chunk))
            container.mux(sound.encode())
    return path


def _one_clear_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_probe_good_file_prints_json(tmp_path: Path) -> None:
    result = _cli("probe", str(_mp4(tmp_path / "good.mp4")), "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["video"]["frames_decoded"] == 124 and payload["video"]["fps"] == 24
    assert (payload["video"]["width"], payload["video"]["height"]) == (64, 48)
    assert payload["audio"]["sample_rate"] == 32000 and payload["audio"]["channels"] == 2
    assert payload["audio"]["duration_s"] > 5 and payload["complete"] is True
    assert str(tmp_path) not in result.stdout


def test_probe_with_expectation_names_the_wrong_frame_count(tmp_path: Path) -> None:
    path = _mp4(tmp_path / "short.mp4", frames=120)
    line = _one_clear_line(_cli("probe", str(path), "--frames", "124", "--width", "64",
                                "--height", "48"))
    assert "frame_count" in line and "124" in line and "120" in line


def test_probe_truncated_file(tmp_path: Path) -> None:
    good = _mp4(tmp_path / "good.mp4").read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(good[: len(good) // 2])
    assert "cut.mp4" in _one_clear_line(_cli("probe", str(cut)))


def test_probe_file_without_audio(tmp_path: Path) -> None:
    line = _one_clear_line(_cli("probe", str(_mp4(tmp_path / "mute.mp4", audio=False))))
    assert "no_audio_stream" in line


def test_probe_file_that_is_not_an_mp4(tmp_path: Path) -> None:
    text = tmp_path / "notes.mp4"
    text.write_text("this is not a video\n")
    assert "notes.mp4" in _one_clear_line(_cli("probe", str(text)))


def test_probe_missing_file(tmp_path: Path) -> None:
    assert "nothing.mp4" in _one_clear_line(_cli("probe", str(tmp_path / "nothing.mp4")))


@pytest.fixture
def campaign_copy(tmp_path: Path) -> Path:
    """The reference campaign with the files it pins, laid out as in the repository."""
    for rel in ("fixtures/campaigns/reference.yaml", "fixtures/inputs/prompt.txt",
                "fixtures/inputs/reference.png", "fixtures/inputs/reference.wav"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    shutil.copytree(ROOT / "engine/profiles/reference", tmp_path / "engine/profiles/reference")
    return tmp_path / "fixtures/campaigns/reference.yaml"


def test_freeze_then_verify_is_clean(campaign_copy: Path) -> None:
    assert _cli("freeze", str(campaign_copy)).returncode == 0
    result = _cli("verify", str(campaign_copy))
    assert result.returncode == 0 and result.stdout.splitlines()[0].endswith(": frozen")
    # Then what the frozen protocol costs, per track and candidate.
    assert "protocol: instance design: 3 fresh instances per arm" in result.stdout
    assert any(line.split()[:3] == ["5s-lossless", "lossless-text-kv", "6"]
               for line in result.stdout.splitlines())


def test_one_changed_byte_of_the_reference_image_fails_verify_naming_it(
    campaign_copy: Path,
) -> None:
    assert _cli("freeze", str(campaign_copy)).returncode == 0
    image = campaign_copy.parents[2] / "fixtures/inputs/reference.png"
    data = bytearray(image.read_bytes())
    data[100] ^= 0x01
    image.write_bytes(bytes(data))
    result = _cli("verify", str(campaign_copy))
    assert result.returncode == 1
    assert "reference.png" in result.stdout and "drifted" in result.stdout


def test_verify_json_reports_unfilled_placeholders_of_the_910c_campaign() -> None:
    result = _cli("verify", "fixtures/campaigns/910c.yaml", "--json")
    assert result.returncode == 1
    payload = json.loads(result.stdout)
    assert "engine.model" in payload["unfilled"]
    assert "engine.source_pin.npu_firmware" in payload["unfilled"]
    assert payload["verdict_cap"] is not None
    cost = {(c["track"], c["candidate"]): c for c in payload["cost"]}
    fifteen = cost["15s-lossless", "cache-dit-lossless-guard"]
    assert fifteen["instance_starts"] == 6 and fifteen["b0_requests"] == [9, 12]
    assert fifteen["host_s_at_target"] < fifteen["host_s_upper"]


def test_malformed_campaign_is_one_line_naming_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 1\nname: x\nsurprise: 1\n")
    result = _cli("verify", str(bad))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    # One line per problem, each naming the file and the field.
    assert all("bad.yaml" in line for line in lines)
    assert any("surprise: unknown key" in line for line in lines)
