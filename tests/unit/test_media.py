"""Unit tests of ref2va_accept.media against small MP4s built here with PyAV."""

from __future__ import annotations

import dataclasses
import json
import struct
import zlib
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from ref2va_accept.core import MediaContentError, MediaError
from ref2va_accept.media import (
    FrameCount,
    MediaExpectation,
    MediaProbe,
    MediaProblem,
    audio_video_tolerance_s,
    check_media,
    iter_video_frames,
    probe,
)

pytestmark = pytest.mark.fast

WIDTH, HEIGHT, FRAMES, FPS, RATE = 64, 48, 124, 24, 32000
EXPECT = MediaExpectation(num_frames=FRAMES, fps=FPS, width=WIDTH, height=HEIGHT)
NO_BOXES = r"not an MP4 \(no ISO BMFF box structure"
# A saturated red that survives yuv420p; lets a test see that frames come back as RGB, not BGR.
RED = (200, 30, 30)


def make_mp4(
    path: Path,
    *,
    frames: int = FRAMES,
    fps: int = FPS,
    size: tuple[int, int] = (WIDTH, HEIGHT),
    video_codec: str | None = "libx264",
    sample_rate: int = RATE,
    layout: str | None = "stereo",
    audio_seconds: float | None = None,
    faststart: bool = False,
) -> Path:
    """Write an MP4 whose audio, unless told otherwise, is exactly as long as its video."""
    options = {"movflags": "faststart"} if faststart else {}
    width, height = size
    with av.open(str(path), "w", options=options) as out:
        video = None
        if video_codec is not None:
            video = out.add_stream(video_codec, rate=fps)
            video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        audio = out.add_stream("aac", rate=sample_rate, layout=layout) if layout else None
        if video is not None:
            for index in range(frames):
                pixels = np.empty((height, width, 3), dtype=np.uint8)
                pixels[:] = RED
                pixels[: height // 2, : width // 2] = (index * 2) % 256  # some motion
                frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
                frame.pts = index
                out.mux(video.encode(frame))
            out.mux(video.encode(None))
        if audio is not None:
            seconds = frames / fps if audio_seconds is None else audio_seconds
            total = round(seconds * sample_rate)
            channels = 1 if layout == "mono" else 2
            tone = 0.2 * np.sin(2 * np.pi * 440 * np.arange(total) / sample_rate)
            samples = np.tile(tone.astype(np.float32), (channels, 1))
            for start in range(0, total, 1024):
                chunk = np.ascontiguousarray(samples[:, start : start + 1024])
                frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout=layout)
                frame.sample_rate, frame.pts = sample_rate, start
                frame.time_base = Fraction(1, sample_rate)
                out.mux(audio.encode(frame))
            out.mux(audio.encode(None))
    return path


def codes(problems: list[MediaProblem]) -> set[str]:
    return {problem.code for problem in problems}


@pytest.fixture(scope="module")
def good_mp4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_mp4(tmp_path_factory.mktemp("media") / "good.mp4")


@pytest.fixture(scope="module")
def good_probe(good_mp4: Path) -> MediaProbe:
    return probe(good_mp4)


def assert_one_line_media_error(path: Path, match: str) -> None:
    with pytest.raises(MediaError, match=match) as caught:
        probe(path)
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith(f"{path.name}:")
    assert str(path.parent) not in text


# --- complete files ---------------------------------------------------------------------------


def test_good_file_passes_with_expectation(good_probe: MediaProbe) -> None:
    assert check_media(good_probe, EXPECT) == []


def test_good_file_passes_generic_check(good_probe: MediaProbe) -> None:
    assert check_media(good_probe) == []


def test_probe_counts_frames_by_decoding(good_probe: MediaProbe) -> None:
    video = good_probe.video
    assert video is not None
    assert (video.codec, video.width, video.height, video.fps) == ("h264", WIDTH, HEIGHT, FPS)
    assert video.frames_decoded == FRAMES == video.frames_declared
    assert video.duration_s == pytest.approx(FRAMES / FPS)
    assert video.pix_fmt == "yuv420p"


def test_aac_priming_is_already_dropped_and_padding_is_under_one_frame(
    good_probe: MediaProbe,
) -> None:
    # Encoded from exactly 165333 samples: the demuxer's edit list hides the 1024 priming samples
    # and the decoder returns the last frame whole, so the count is rounded up to 1024.
    audio = good_probe.audio
    assert audio is not None
    encoded = round(FRAMES / FPS * RATE)
    assert audio.samples_decoded == -(-encoded // 1024) * 1024
    assert audio.start_time_s == 0.0
    assert (audio.codec, audio.sample_rate, audio.channels, audio.layout) == (
        "aac",
        RATE,
        2,
        "stereo",
    )


def test_to_dict_is_json_ready_and_names_the_file_by_basename(
    good_mp4: Path, good_probe: MediaProbe
) -> None:
    text = json.dumps(good_probe.json_dict())
    record = json.loads(text)
    assert record["name"] == "good.mp4"
    assert record["video"]["frames_decoded"] == FRAMES
    assert record["decode_errors"] == []
    assert len(record["sha256"]) == 64
    assert str(good_mp4.parent) not in text


def test_iter_video_frames_streams_rgb_frames(good_mp4: Path) -> None:
    count = 0
    for frame in iter_video_frames(good_mp4):
        assert frame.shape == (HEIGHT, WIDTH, 3)
        assert frame.dtype == np.uint8
        corner = frame[-4:, -4:].reshape(-1, 3).mean(axis=0)
        assert corner[0] > 150 and corner[1] < 60  # RGB order, not BGR
        count += 1
    assert count == FRAMES


def test_iter_video_frames_gives_pyav_own_rgb_pixels(tmp_path: Path) -> None:
    # Noise at the reference campaign's 112x64, H.264 yuv420p: every pixel, chroma included, must
    # be what PyAV's own frame.to_ndarray(format="rgb24") gives (the decoder shares one swscale
    # context across frames; a shortcut in the conversion would show here).
    path = tmp_path / "noise.mp4"
    rng = np.random.default_rng(7)
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=FPS)
        video.width, video.height, video.pix_fmt = 112, 64, "yuv420p"
        for index in range(30):
            pixels = rng.integers(0, 256, size=(64, 112, 3), dtype=np.uint8)
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            frame.pts = index
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
    with av.open(str(path)) as container:
        expected = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    got = list(iter_video_frames(path))
    assert len(got) == len(expected) == 30
    for index, (a, b) in enumerate(zip(got, expected, strict=True)):
        assert a.dtype == b.dtype and a.shape == b.shape == (64, 112, 3), index
        assert np.array_equal(a, b), f"frame {index} differs"
    assert len({frame.tobytes() for frame in got}) == 30  # the frames are not one repeated


# --- incomplete or wrong files ----------------------------------------------------------------


def test_fewer_frames_fails_frame_count_naming_expected_and_found(tmp_path: Path) -> None:
    problems = check_media(probe(make_mp4(tmp_path / "short.mp4", frames=120)), EXPECT)
    assert codes(problems) == {"frame_count"}
    assert "124" in problems[0].message and "120" in problems[0].message


def test_missing_audio_fails_no_audio_stream(tmp_path: Path) -> None:
    silent = probe(make_mp4(tmp_path / "silent.mp4", layout=None))
    assert codes(check_media(silent, EXPECT)) == {"no_audio_stream"}
    assert codes(check_media(silent)) == {"no_audio_stream"}


def test_no_audio_expected_accepts_silent_and_rejects_audio(
    tmp_path: Path, good_probe: MediaProbe
) -> None:
    silent_expect = dataclasses.replace(EXPECT, audio=False)
    silent = probe(make_mp4(tmp_path / "silent.mp4", layout=None))
    assert check_media(silent, silent_expect) == []
    assert codes(check_media(good_probe, silent_expect)) == {"unexpected_audio_stream"}


def test_missing_video_fails_no_video_stream(tmp_path: Path) -> None:
    audio_only = probe(make_mp4(tmp_path / "audio_only.mp4", video_codec=None))
    assert codes(check_media(audio_only, EXPECT)) == {"no_video_stream"}


def test_short_audio_fails_audio_duration(tmp_path: Path) -> None:
    clipped = probe(make_mp4(tmp_path / "clipped.mp4", audio_seconds=3.0))
    problems = check_media(clipped, EXPECT)
    assert codes(problems) == {"audio_duration"}
    assert "5.1667" in problems[0].message and "3.0" in problems[0].message
    assert codes(check_media(clipped)) == {"audio_duration"}


def test_audio_longer_than_two_aac_frames_and_half_a_video_frame_fails(tmp_path: Path) -> None:
    tolerance = audio_video_tolerance_s(RATE, FPS)
    assert tolerance == pytest.approx(2 * 1024 / RATE + 0.5 / FPS)
    long_audio = make_mp4(tmp_path / "long.mp4", audio_seconds=FRAMES / FPS + tolerance + 0.04)
    assert codes(check_media(probe(long_audio), EXPECT)) == {"audio_duration"}


def test_tolerance_rejects_nonsense_rates() -> None:
    with pytest.raises(ValueError):
        audio_video_tolerance_s(0, FPS)


def test_mono_audio_fails_audio_channels(tmp_path: Path) -> None:
    mono = probe(make_mp4(tmp_path / "mono.mp4", layout="mono"))
    problems = check_media(mono, EXPECT)
    assert codes(problems) == {"audio_channels"}
    assert "2" in problems[0].message and "1" in problems[0].message


def test_44k_audio_fails_audio_sample_rate(tmp_path: Path) -> None:
    cd_rate = probe(make_mp4(tmp_path / "cd.mp4", sample_rate=44100))
    problems = check_media(cd_rate, EXPECT)
    assert codes(problems) == {"audio_sample_rate"}
    assert "32000" in problems[0].message and "44100" in problems[0].message


def test_25_fps_fails_fps(tmp_path: Path) -> None:
    pal = probe(make_mp4(tmp_path / "pal.mp4", fps=25))
    problems = check_media(pal, EXPECT)
    assert codes(problems) == {"fps"}
    assert "24" in problems[0].message and "25" in problems[0].message


def test_wrong_size_fails_resolution(tmp_path: Path) -> None:
    small = probe(make_mp4(tmp_path / "small.mp4", size=(32, 32)))
    problems = check_media(small, EXPECT)
    assert codes(problems) == {"resolution"}
    assert "64x48" in problems[0].message and "32x32" in problems[0].message


def test_other_video_codec_fails_video_codec(tmp_path: Path) -> None:
    mpeg4 = probe(make_mp4(tmp_path / "mpeg4.mp4", video_codec="mpeg4"))
    assert codes(check_media(mpeg4, EXPECT)) == {"video_codec"}
    assert codes(check_media(mpeg4)) == {"video_codec"}


def test_probe_from_other_container_fails_not_mp4(good_probe: MediaProbe) -> None:
    # probe() itself refuses non-MP4 demuxers; this guards probes loaded back from evidence.
    foreign = good_probe.model_copy(update={"container": "matroska,webm"})
    assert codes(check_media(foreign)) == {"not_mp4"}


# --- damaged files ----------------------------------------------------------------------------


@pytest.mark.parametrize("keep", ["half", "1000 bytes"])
def test_truncated_file_raises_one_line_media_error(
    tmp_path: Path, good_mp4: Path, keep: str
) -> None:
    data = good_mp4.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2] if keep == "half" else data[:1000])
    assert_one_line_media_error(cut, "truncated.*no moov box")
    with pytest.raises(MediaContentError):  # found in the file's content: exit 1 in the CLI
        probe(cut)


def test_truncated_faststart_file_fails_frame_count_without_expectation(
    tmp_path: Path,
) -> None:
    # With the moov box first the file still opens; only decoding shows the missing frames.
    whole = make_mp4(tmp_path / "whole.mp4", faststart=True)
    data = whole.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])
    problems = check_media(probe(cut))
    assert "frame_count" in codes(problems)
    assert "declares 124" in next(p for p in problems if p.code == "frame_count").message
    assert "frame_count" in codes(check_media(probe(cut), EXPECT))


def test_garbage_inside_mdat_fails_decode_error(tmp_path: Path, good_mp4: Path) -> None:
    data = bytearray(good_mp4.read_bytes())
    start = len(data) // 4
    data[start : start + len(data) // 4] = np.random.default_rng(3).bytes(len(data) // 4)
    damaged = tmp_path / "damaged.mp4"
    damaged.write_bytes(bytes(data))
    result = probe(damaged)
    assert result.decode_errors
    assert all("\n" not in error and str(tmp_path) not in error for error in result.decode_errors)
    assert "decode_error" in codes(check_media(result, EXPECT))
    with pytest.raises(MediaError, match=r"damaged\.mp4: decode failed after"):
        sum(1 for _ in iter_video_frames(damaged))


@pytest.mark.parametrize(
    ("decoded", "declared", "expected", "problem", "partial"),
    [
        (124, 124, None, None, False),
        (124, 124, 124, None, False),
        (124, None, 124, None, False),
        (81, 124, None, "81 frames decoded, the container declares 124", True),
        (81, 124, 124, "81 frames decoded, the container declares 124 and 124 expected", True),
        (81, 81, 124, "81 frames decoded, 124 expected", False),  # a whole, shorter video
        (130, 124, None, "130 frames decoded, the container declares 124", False),
        (0, 124, None, "0 frames decoded, the container declares 124", False),
        (81, None, None, "declares no frame count", False),
    ],
)
def test_frame_count_names_each_count_missed(
    decoded: int, declared: int | None, expected: int | None, problem: str | None, partial: bool,
) -> None:
    count = FrameCount("cut.mp4", decoded, declared, expected)
    found = count.problem()
    if problem is None:
        assert found is None
    else:
        assert found is not None and found.startswith("cut.mp4: ") and problem in found
    assert count.partial is partial


def test_partial_text_names_the_frames_against_the_runs_count() -> None:
    assert FrameCount("a.mp4", 81, 124).partial_text() == "partial: 81 of 124 frames"
    assert FrameCount("a.mp4", 81, 130, 124).partial_text() == "partial: 81 of 124 frames"


def _png_bytes() -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 8 for _ in range(8))
    header = struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("random.mp4", np.random.default_rng(7).bytes(50_000), NO_BOXES),
        ("notes.txt", b"this is not a video\n" * 100, NO_BOXES),
        # Text whose first 8 bytes read as a printable box type ('deo '): still no MP4 box.
        ("text.mp4", b"a video file, honestly\n" * 100, NO_BOXES + ".*'deo '"),
        ("empty.mp4", b"", "empty file"),
        ("tiny.mp4", b"ftyp", "too short for an ISO BMFF box header"),
        ("image.png", _png_bytes(), NO_BOXES),
        # An ISO BMFF box structure that FFmpeg still cannot open as a movie.
        ("boxes.mp4", b"\x00\x00\x00\x10free" + bytes(8) + b"\x00\x00\x00\x08skip",
         "cannot open as an MP4 container"),
    ],
)
def test_non_mp4_input_raises_one_line_media_content_error(
    tmp_path: Path, name: str, content: bytes, match: str
) -> None:
    target = tmp_path / name
    target.write_bytes(content)
    assert_one_line_media_error(target, match)
    with pytest.raises(MediaContentError):
        next(iter_video_frames(target))
    with pytest.raises(MediaContentError) as caught:
        probe(target)
    assert "truncated" not in str(caught.value)


def test_missing_path_and_directory_raise_media_error(tmp_path: Path) -> None:
    # A file that cannot be read at all is not a problem found in its content.
    assert_one_line_media_error(tmp_path / "absent.mp4", "no such file")
    folder = tmp_path / "folder.mp4"
    folder.mkdir()
    assert_one_line_media_error(folder, "not a regular file")
    for path in (tmp_path / "absent.mp4", folder):
        with pytest.raises(MediaError) as caught:
            probe(path)
        assert not isinstance(caught.value, MediaContentError)


def test_frame_buffers_are_kept_for_reuse_on_glibc() -> None:
    import platform

    from ref2va_accept.media import keep_frame_buffers

    applied = keep_frame_buffers()
    assert applied == (platform.libc_ver()[0] == "glibc")
    assert keep_frame_buffers() is applied  # once per process


