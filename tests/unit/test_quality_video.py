"""Proxies, fidelity, consistency, relative error, the streaming pass and the score CLI."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path

import av
import numpy as np
import pytest

from ref2va_accept.cli import main
from ref2va_accept.core import MediaError, Ref2VAError
from ref2va_accept.evidence import ScoreRecord
from ref2va_accept.media import probe
from ref2va_accept.quality import (
    ScorerError,
    check_comparable,
    compare_frames,
    compare_videos,
    relative_errors,
    score_frames,
    score_video,
)
from ref2va_accept.quality._registry import ok_score, open_score, scorer
from ref2va_accept.quality._scoring import aggregate_relative_error

pytestmark = pytest.mark.fast

H, W = 64, 96


def _by_id(scores: Sequence[ScoreRecord]) -> dict[str, ScoreRecord]:
    return {s.scorer: s for s in scores}


def _textured(shift: int = 0, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (H, W + 64, 3), dtype=np.uint8)
    base = np.repeat(np.repeat(base[::4, ::4], 4, 0), 4, 1)[:H]
    return np.ascontiguousarray(base[:, shift:shift + W])


def _write_mp4(path: Path, frames: Sequence[np.ndarray], fps: int = 24,
               codec: str = "libx264rgb", pix_fmt: str = "rgb24",
               tone: np.ndarray | None = None, qp: int = 0) -> Path:
    """Lossless video (qp 0); with ``tone`` (mono float32 at 32 kHz) also an AAC soundtrack."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=fps, options={"qp": str(qp), "preset": "ultrafast"})
        stream.width, stream.height = frames[0].shape[1], frames[0].shape[0]
        stream.pix_fmt = pix_fmt
        sound = None if tone is None else out.add_stream("aac", rate=32000, layout="mono")
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, "rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
        if sound is not None and tone is not None:
            for start in range(0, tone.size, 1024):
                chunk = av.AudioFrame.from_ndarray(
                    np.ascontiguousarray(tone[None, start:start + 1024], np.float32),
                    format="fltp", layout="mono")
                chunk.sample_rate, chunk.pts = 32000, start
                for packet in sound.encode(chunk):
                    out.mux(packet)
            for packet in sound.encode():
                out.mux(packet)
    return path


def _tone(seconds: float, delay_s: float = 0.0) -> np.ndarray:
    t = np.arange(int(seconds * 32000)) / 32000.0
    burst = 0.3 * np.sin(2 * np.pi * 440 * t) * (np.sin(2 * np.pi * 3 * t) > 0)
    return np.roll(burst, int(delay_s * 32000)).astype(np.float32)


# ---- proxies ---------------------------------------------------------------------------------

def test_static_clip_is_not_dynamic_and_moving_clip_is() -> None:
    static = _by_id(score_frames([_textured()] * 24, fps=24))
    moving = _by_id(score_frames([_textured(shift=2 * i) for i in range(24)], fps=24))
    assert static["proxy.dynamic_degree.dis_flow"].value == 0.0
    assert moving["proxy.dynamic_degree.dis_flow"].value == 1.0
    assert static["proxy.dynamic_degree.dis_flow"].kind == "proxy"


def test_static_clip_proxies_are_perfect() -> None:
    scores = _by_id(score_frames([_textured()] * 6, fps=24))
    assert scores["proxy.motion_smoothness.flow_warp"].value == 1.0
    assert scores["proxy.subject_consistency.ssim"].value == 1.0
    assert scores["proxy.background_consistency.histogram"].value == pytest.approx(1.0)
    assert 0.0 < scores["proxy.imaging_quality.sharpness"].value < 1.0  # type: ignore[operator]


def test_blur_lowers_the_sharpness_proxy() -> None:
    import cv2

    sharp = _textured()
    blurred = np.asarray(cv2.GaussianBlur(sharp, (9, 9), 3))
    s = _by_id(score_frames([sharp] * 3, fps=24))["proxy.imaging_quality.sharpness"].value
    b = _by_id(score_frames([blurred] * 3, fps=24))["proxy.imaging_quality.sharpness"].value
    assert b is not None and s is not None and b < s


def test_proxy_scores_are_never_labelled_vbench() -> None:
    for s in score_frames([_textured()] * 3, fps=24):
        assert s.json_dict()["kind"] == s.scorer.split(".")[0].replace("consistency",
                                                                        "consistency")
        if s.scorer.startswith("proxy."):
            assert s.json_dict()["kind"] == "proxy"


# ---- temporal and reference consistency ------------------------------------------------------

@pytest.mark.parametrize(("height", "width", "expected"), [
    (768, 1344, (128, 224)),  # two halvings, then an area resize by 3
    (563, 1001, (128, 228)),  # odd sizes: one area resize
    (256, 512, (128, 256)),   # one exact halving
    (100, 160, (100, 160)),   # never upscales
])
def test_resize_short_side_is_a_box_average(height: int, width: int,
                                            expected: tuple[int, int]) -> None:
    import cv2

    from ref2va_accept.quality._imageops import resize_short_side

    rng = np.random.default_rng(height)
    frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    small = resize_short_side(frame, 128)
    assert small.shape == (*expected, 3) and small.dtype == np.uint8
    one_step = cv2.resize(frame, expected[::-1], interpolation=cv2.INTER_AREA)
    # Halvings round an intermediate uint8 image: at most one level from one area resize.
    assert int(np.abs(small.astype(int) - one_step.astype(int)).max()) <= 1
    flat = np.full((height, width, 3), 77, np.uint8)
    assert (resize_short_side(flat, 128) == 77).all()


def test_frozen_frames_and_scene_cuts_are_counted() -> None:
    a, b = _textured(seed=1), np.full((H, W, 3), [250, 10, 10], np.uint8)
    scores = _by_id(score_frames([a, a, a, b, b], fps=24))
    assert scores["consistency.temporal.frozen_frames"].value == 3.0
    assert scores["consistency.temporal.scene_cuts"].value == 1.0
    assert scores["consistency.temporal.scene_cuts"].extra["at_frames"] == [3]


def test_reference_equal_to_frames_is_fully_consistent() -> None:
    frame = _textured(seed=2)
    ref = np.repeat(np.repeat(frame, 2, 0), 2, 1)  # twice the size: resized down to the frame
    scores = _by_id(score_frames([frame] * 3, fps=24, reference_image=ref))
    assert scores["consistency.reference.histogram"].value == pytest.approx(1.0, abs=1e-3)
    assert scores["consistency.reference.first_frame_ssim"].value > 0.95  # type: ignore[operator]
    assert scores["consistency.reference.dhash"].value == pytest.approx(1.0, abs=0.05)


def test_reference_scores_are_open_without_a_reference() -> None:
    scores = _by_id(score_frames([_textured()] * 2, fps=24))
    assert scores["consistency.reference.histogram"].status == "open"


# ---- fidelity --------------------------------------------------------------------------------

def test_identical_frames_have_infinite_psnr_and_ssim_one() -> None:
    frames = [_textured(seed=i) for i in range(3)]
    report = compare_frames(frames, [f.copy() for f in frames])
    assert report.all_identical and report.psnr_db == math.inf
    assert report.psnr_per_frame == [math.inf] * 3
    assert report.ssim_per_frame == [1.0, 1.0, 1.0]
    assert report.json_dict()["psnr_db"] == "inf"


def test_psnr_of_known_mse() -> None:
    a = np.full((H, W, 3), 100, np.uint8)
    b = a + np.uint8(4)  # MSE 16 everywhere
    report = compare_frames([a, a], [a, b])
    assert report.psnr_per_frame[1] == pytest.approx(10 * math.log10(255**2 / 16))
    assert report.psnr_per_frame[0] == math.inf
    assert report.psnr_db == pytest.approx(10 * math.log10(255**2 / 8))  # from the mean MSE
    assert not report.all_identical and report.identical_frames == 1


def test_frame_count_mismatch_is_an_error() -> None:
    with pytest.raises(ScorerError, match="frame counts differ"):
        compare_frames([_textured()] * 3, [_textured()] * 2)


def test_compare_videos_streams_lossless_files(tmp_path: Path) -> None:
    frames = [_textured(shift=i) for i in range(4)]
    a = _write_mp4(tmp_path / "a.mp4", frames)
    b = _write_mp4(tmp_path / "b.mp4", frames)
    assert compare_videos(a, b).all_identical


# ---- relative error --------------------------------------------------------------------------

def _s(scorer_id: str, value: float | None) -> ScoreRecord:
    info = scorer(scorer_id)
    return ok_score(info, value) if value is not None else open_score(info, "weights missing")


def test_relative_error_is_two_sided() -> None:
    errs = relative_errors([_s("vbench.temporal_flickering", 0.99)],
                           [_s("vbench.temporal_flickering", 0.98)], normalized=False)
    assert errs[0].error == pytest.approx(0.01 / 0.98)
    assert errs[0].status == "ok"
    flipped = relative_errors([_s("vbench.temporal_flickering", 0.97)],
                              [_s("vbench.temporal_flickering", 0.98)], normalized=False)
    assert flipped[0].error == pytest.approx(0.01 / 0.98)


def test_relative_error_of_equal_infinities_is_zero() -> None:
    # A reference-consistency PSNR can be inf on both arms (frame 0 equals the reference).
    from ref2va_accept.quality._scoring import relative_error

    assert relative_error(math.inf, math.inf) == 0.0
    assert relative_error(math.inf, 30.0) == math.inf
    assert relative_error(0.5, 0.0) == math.inf and relative_error(0.0, 0.0) == 0.0


def test_open_dimension_propagates_as_open_never_zero() -> None:
    errs = relative_errors([_s("vbench.subject_consistency", None)],
                           [_s("vbench.subject_consistency", 0.9)], normalized=False)
    assert errs[0].status == "open" and errs[0].error is None
    assert errs[-1].dimension == "aggregate" and errs[-1].status == "open"


def test_missing_score_on_one_side_is_open() -> None:
    errs = relative_errors([], [_s("proxy.subject_consistency.ssim", 0.9)], normalized=False)
    assert errs[0].status == "open" and "no candidate score" in errs[0].detail


def test_normalized_aggregate_matches_hand_computation() -> None:
    cand = [_s("vbench.temporal_flickering", 0.95), _s("vbench.dynamic_degree", 1.0)]
    base = [_s("vbench.temporal_flickering", 0.97), _s("vbench.dynamic_degree", 1.0)]
    agg = aggregate_relative_error(cand, base, kind="vbench", normalized=True)
    nc = ((0.95 - 0.6293) / (1 - 0.6293) + 0.5 * 1.0) / 1.5
    nb = ((0.97 - 0.6293) / (1 - 0.6293) + 0.5 * 1.0) / 1.5
    assert agg.candidate == pytest.approx(nc) and agg.baseline == pytest.approx(nb)
    assert agg.error == pytest.approx(abs(nc - nb) / nb)
    raw = aggregate_relative_error(cand, base, kind="vbench", normalized=False)
    assert raw.error == pytest.approx(abs((0.95 + 0.5) - (0.97 + 0.5)) / (0.97 + 0.5))


def test_i2v_dimensions_aggregate_as_vbench_plus_plus_i2v_total() -> None:
    # VBench++ (scripts/cal_i2v_final_score.py): normalise with NORMALIZE_DIC_I2V, weighted
    # mean per part, total = (quality + i2v) / 2.
    cand = [_s("vbench.subject_consistency", 0.95), _s("vbench.dynamic_degree", 0.0),
            _s("vbench.i2v_subject", 0.97), _s("vbench.i2v_background", 0.96)]
    base = [_s("vbench.subject_consistency", 0.96), _s("vbench.dynamic_degree", 0.0),
            _s("vbench.i2v_subject", 0.98), _s("vbench.i2v_background", 0.97)]
    agg = aggregate_relative_error(cand, base, kind="vbench", normalized=True)

    def total(subject: float, i2v_s: float, i2v_b: float) -> float:
        quality = ((subject - 0.1462) / (1 - 0.1462) + 0.5 * 0.0) / 1.5
        i2v = ((i2v_s - 0.1462) / (1 - 0.1462) + (i2v_b - 0.2615) / (1 - 0.2615)) / 2
        return (quality + i2v) / 2

    assert agg.candidate == pytest.approx(total(0.95, 0.97, 0.96), abs=1e-12)
    assert agg.baseline == pytest.approx(total(0.96, 0.98, 0.97), abs=1e-12)
    assert "I2V total" in agg.detail
    only_i2v = aggregate_relative_error(cand[2:], base[2:], kind="vbench", normalized=False)
    assert only_i2v.candidate == pytest.approx((0.97 + 0.96) / 2, abs=1e-12)


def test_proxies_and_vbench_aggregate_separately() -> None:
    cand = [_s("vbench.temporal_flickering", 0.9), _s("proxy.subject_consistency.ssim", 0.5)]
    base = [_s("vbench.temporal_flickering", 0.9), _s("proxy.subject_consistency.ssim", 0.6)]
    aggs = {e.scorer: e for e in relative_errors(cand, base, normalized=False)
            if e.dimension == "aggregate"}
    assert aggs["vbench.aggregate"].error == 0.0
    assert aggs["proxy.aggregate"].error == pytest.approx(0.1 / 0.6)


# ---- comparability and broken input ----------------------------------------------------------

def test_check_comparable_flags_fps_size_frames_and_codec(tmp_path: Path) -> None:
    frames = [_textured(shift=i) for i in range(4)]
    a = probe(_write_mp4(tmp_path / "a.mp4", frames))
    assert check_comparable(a, probe(_write_mp4(tmp_path / "b.mp4", frames))) == []
    fps = check_comparable(a, probe(_write_mp4(tmp_path / "c.mp4", frames, fps=25)))
    count = check_comparable(a, probe(_write_mp4(tmp_path / "d.mp4", frames[:3])))
    size = check_comparable(a, probe(_write_mp4(tmp_path / "e.mp4", [f[:32] for f in frames])))
    codec = check_comparable(a, probe(_write_mp4(tmp_path / "f.mp4", frames, codec="libx264",
                                                 pix_fmt="yuv444p")))
    assert any("fps" in p for p in fps)
    assert any("frame count" in p for p in count)
    assert any("resolution" in p for p in size)
    assert any("pixel format" in p for p in codec)
    assert a.video is not None
    other = a.model_copy(update={"video": a.video.model_copy(update={"codec": "hevc"})})
    assert any("video codec" in p for p in check_comparable(a, other))


def test_check_comparable_names_the_encoder_options_that_differ(tmp_path: Path) -> None:
    frames = [_textured(shift=i) for i in range(4)]
    a = probe(_write_mp4(tmp_path / "a.mp4", frames))
    assert a.video is not None and a.video.encoder_settings is not None
    assert a.video.encoder_settings.startswith("x264 core ")
    b = probe(_write_mp4(tmp_path / "b.mp4", frames, qp=12))
    problems = check_comparable(a, b)
    assert len(problems) == 1, problems
    assert problems[0].startswith("encoder settings differ: a.mp4 vs b.mp4: ")
    assert "qp 0 vs 12" in problems[0]
    assert b.video is not None
    other = b.model_copy(update={"video": b.video.model_copy(
        update={"encoder_settings": None, "colour": "space 1, range 2"})})
    problems = check_comparable(a, other)
    assert any("colour description differs" in p for p in problems)
    assert any("b.mp4 carries no x264 options, a.mp4 does" in p for p in problems)


def test_truncated_mp4_is_a_clear_error(tmp_path: Path) -> None:
    good = _write_mp4(tmp_path / "good.mp4", [_textured(shift=i) for i in range(8)])
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(good.read_bytes()[: good.stat().st_size // 3])
    with pytest.raises(Ref2VAError, match=r"bad\.mp4"):
        score_video(bad)


def test_not_a_video_is_a_clear_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"\x00" * 100)
    with pytest.raises(MediaError):
        score_video(junk)


def test_zero_frames_and_mismatched_sizes_are_errors() -> None:
    with pytest.raises(ScorerError, match="no frames"):
        score_frames([], fps=24)
    with pytest.raises(ScorerError, match="differs"):
        score_frames([_textured(), _textured()[:32]], fps=24)


# ---- the streaming pass and the CLI ----------------------------------------------------------

def test_score_video_matches_in_memory_frames_for_lossless_file(tmp_path: Path) -> None:
    frames = [_textured(shift=i, seed=3) for i in range(6)]
    path = _write_mp4(tmp_path / "v.mp4", frames)
    from_file = _by_id(score_video(path))
    in_memory = _by_id(score_frames(frames, fps=24))
    assert from_file["vbench.temporal_flickering"].value == \
        in_memory["vbench.temporal_flickering"].value


def _vbench_flicker_via_opencv(path: Path) -> float:
    """VBench temporal_flickering.py as it runs: cv2.VideoCapture frames (BGR), float32 absdiff
    means per consecutive pair, (255 - mean) / 255."""
    import cv2

    capture = cv2.VideoCapture(str(path))
    frames = []
    while capture.isOpened():
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    maes = [np.mean(cv2.absdiff(np.array(a, dtype=np.float32), np.array(b, dtype=np.float32)))
            for a, b in itertools.pairwise(frames)]
    return (255.0 - np.mean(np.array(maes)).item()) / 255.0


def test_cli_flicker_equals_vbench_on_a_lossy_h264_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The H.264/yuv420p case the real outputs are: decoding and colour conversion must match
    # what VBench's OpenCV reader sees, to six decimals.
    rng = np.random.default_rng(5)
    frames = [np.clip(_textured(shift=2 * i, seed=4).astype(int)
                      + rng.integers(-20, 20, (H, W, 3)), 0, 255).astype(np.uint8)
              for i in range(30)]
    path = _write_mp4(tmp_path / "lossy.mp4", frames, codec="libx264", pix_fmt="yuv420p")
    assert main(["score", str(path), "--json"]) == 0
    ours = {s["scorer"]: s for s in json.loads(capsys.readouterr().out)["scores"]}
    value = ours["vbench.temporal_flickering"]["value"]
    vbench = _vbench_flicker_via_opencv(path)
    assert round(value, 6) == round(vbench, 6)
    # Tighter than six decimals: VBench's float32 means differ from our exact ones by ~1e-9,
    # while another YUV->RGB conversion (OpenCV's own I420) moved this clip's score by 5e-7.
    assert abs(value - vbench) < 2e-8
    assert value < 0.99  # not a static clip: the comparison means something


def test_cli_score_json_with_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frames = [_textured(shift=i) for i in range(6)]
    a = _write_mp4(tmp_path / "a.mp4", frames)
    b = _write_mp4(tmp_path / "b.mp4", frames)
    assert main(["score", str(a), "--baseline", str(b), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    ids = {s["scorer"]: s for s in payload["scores"]}
    assert ids["vbench.temporal_flickering"]["status"] == "ok"
    assert ids["vbench.subject_consistency"]["status"] == "open"
    errs = {e["scorer"]: e for e in payload["relative_errors"]}
    assert errs["vbench.temporal_flickering"]["error"] == 0.0
    assert payload["fidelity"]["all_identical"] is True


def test_cli_score_text_shows_the_comparison_its_json_records(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.media_samples import write_mp4

    a = write_mp4(tmp_path / "a.mp4", frames=24)
    b = write_mp4(tmp_path / "b.mp4", frames=24, level=40)
    assert main(["score", str(a), "--baseline", str(b), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert main(["score", str(a), "--baseline", str(b)]) == 0
    lines = capsys.readouterr().out.splitlines()
    flicker = next(e for e in payload["relative_errors"]
                   if e["scorer"] == "vbench.temporal_flickering")
    assert (f"rel.err {'vbench.temporal_flickering':<34} {'vbench':<12} "
            f"{flicker['error']:.4%}") in lines
    assert any(line.startswith("rel.err vbench.subject_consistency ") and " open candidate "
               "is open: weights missing" in line for line in lines)
    fidelity = payload["fidelity"]
    assert (f"fidelity: PSNR {fidelity['psnr_db']} dB (min {fidelity['psnr_min_db']}), SSIM "
            f"{fidelity['ssim_mean']:.6f} (min {fidelity['ssim_min']:.6f})") in lines
    # silent soundtracks: their loudness is -inf, written out as the evidence spells it
    assert "audio: 1.056 s from 0.000 s, 32000 Hz x2, loudness -inf LUFS, peak -inf dBFS, " \
        "clipping 0.0000%, silence 100.0%" in lines
    assert any(line.startswith("audio vs baseline: lag 0.00 ms, SNR inf dB") for line in lines)
    # without a soundtrack, and not comparable with one that has it
    silent = write_mp4(tmp_path / "v.mp4", frames=24, audio=False)
    assert main(["score", str(silent), "--baseline", str(a)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2:] == ["not comparable: audio stream present in only one of v.mp4, a.mp4",
                          "audio: absent: no audio stream"]


def test_cli_score_not_an_mp4_is_one_line_exit_1_and_no_file_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"garbage")
    assert main(["score", str(junk), "--json"]) == 1  # a problem found in the input
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "junk.mp4: not an MP4" in err
    assert main(["score", str(tmp_path / "absent.mp4")]) == 2  # nothing to check at all
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "absent.mp4: no such file" in err


def test_cli_score_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write_mp4(tmp_path / "a.mp4", [_textured(shift=i) for i in range(4)])
    assert main(["score", str(a)]) == 0
    out = capsys.readouterr().out
    assert "vbench.temporal_flickering" in out
    assert "audio: absent: no audio stream" in out


def test_cli_score_reports_the_soundtrack_and_its_lag_against_b0(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frames = [_textured(shift=i) for i in range(24)]
    a = _write_mp4(tmp_path / "a.mp4", frames, tone=_tone(1.0, delay_s=0.010))
    b = _write_mp4(tmp_path / "b.mp4", frames, tone=_tone(1.0))
    assert main(["score", str(a), "--baseline", str(b), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    audio = payload["audio"]
    assert audio["status"] == "ok" and audio["sample_rate"] == 32000
    assert audio["duration_s"] == pytest.approx(1.0, abs=0.05)
    assert -40.0 < audio["loudness_lufs"] < 0.0 and audio["clipping_ratio"] == 0.0
    cmp = payload["audio_comparison"]
    assert cmp["lag_ms"] == pytest.approx(10.0, abs=0.1)  # the candidate arrives 10 ms late
    assert cmp["scorers"]["si_sdr_db"]
    assert main(["score", str(a), "--baseline", str(b)]) == 0
    table = capsys.readouterr().out
    assert "audio: " in table and "Hz x1" in table and "audio vs baseline: lag 10.00 ms" in table


def test_cli_score_without_audio_on_one_side_is_not_comparable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frames = [_textured(shift=i) for i in range(24)]
    a = _write_mp4(tmp_path / "a.mp4", frames, tone=_tone(1.0))
    b = _write_mp4(tmp_path / "b.mp4", frames)
    assert main(["score", str(a), "--baseline", str(b), "--json"]) == 1  # a failed precondition
    payload = json.loads(capsys.readouterr().out)
    assert any("audio stream present in only one" in p for p in payload["precondition_problems"])
    assert "audio_comparison" not in payload and payload["audio"]["status"] == "ok"


def _exif_rotated_jpeg(path: Path) -> np.ndarray:
    """A 64x32 (w x h) JPEG whose EXIF says to show it rotated a quarter turn (orientation 6),
    as a phone writes a portrait photo; returns its stored pixels."""
    from PIL import Image

    stored = np.zeros((32, 64, 3), np.uint8)
    stored[:, :32] = (200, 30, 30)
    stored[:, 32:] = (30, 30, 200)
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 CW to display
    Image.fromarray(stored).save(path, "JPEG", quality=95, exif=exif)
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def test_reference_image_is_read_as_vbench_reads_it_without_exif_rotation(tmp_path: Path) -> None:
    import cv2

    from ref2va_accept.quality._consistency import load_reference_image

    path = tmp_path / "portrait.jpg"
    stored = _exif_rotated_jpeg(path)
    # OpenCV applies the EXIF orientation (what the loader did before): 32 wide, 64 high.
    assert cv2.imread(str(path), cv2.IMREAD_COLOR).shape[:2] == (64, 32)
    loaded = load_reference_image(path)
    assert loaded.shape == (32, 64, 3) and loaded.dtype == np.uint8
    assert np.array_equal(loaded, stored)
    # A file that is not an image is one line naming it.
    bad = tmp_path / "notes.jpg"
    bad.write_text("not an image")
    with pytest.raises(MediaError, match=r"notes\.jpg: cannot read as an image"):
        load_reference_image(bad)


def _tagged_clip(path: Path, *, bt709: bool) -> None:
    """A 48-frame 224x128 H.264 clip of moving gradients, BT.709-tagged (and converted with
    BT.709's matrix) or untagged."""
    height, width = 128, 224
    yy, xx = np.mgrid[0:height, 0:width]
    noise = np.random.default_rng(0)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=24)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        if bt709:
            context = stream.codec_context
            context.colorspace, context.color_primaries, context.color_trc = 1, 1, 1
        for t in range(48):
            rgb = np.stack([(xx * 255 // width + 3 * t) % 256, (yy * 255 // height + 2 * t) % 256,
                            ((xx + yy) // 2 + 5 * t) % 256], -1)
            rgb = np.clip(rgb + noise.integers(-8, 9, rgb.shape), 0, 255).astype(np.uint8)
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(
                format="yuv420p", dst_colorspace="ITU709" if bt709 else None)
            frame.pts = t
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))


def _flicker(frames: Sequence[np.ndarray]) -> float:
    scores = score_frames(iter(frames), fps=24, include_proxies=False)
    return next(s.value for s in scores if s.scorer == "vbench.temporal_flickering")


def test_a_bt709_tag_selects_the_decode_matrix_and_every_score_records_it(tmp_path: Path) -> None:
    from ref2va_accept.media._decoding import decoder_record, iter_video_frames

    tagged, plain = tmp_path / "bt709.mp4", tmp_path / "untagged.mp4"
    _tagged_clip(tagged, bt709=True)
    _tagged_clip(plain, bt709=False)
    assert decoder_record(tagged)["colour_matrix"] == "BT.709"
    assert decoder_record(plain)["colour_matrix"] == "BT.601 (untagged)"
    ours = list(iter_video_frames(tagged))
    with av.open(str(tagged)) as container:
        decoded = list(container.decode(video=0))
        as_709 = [f.reformat(format="rgb24", src_colorspace="ITU709").to_ndarray() for f in decoded]
        # What upstream VBench's OpenCV 4.x gives for this file, whatever the tag: BT.601
        # (checked against opencv-python-headless 4.10.0.84 in a separate environment: the same
        # bytes; OpenCV 5 follows the tag, as this decoder does).
        as_601 = [f.reformat(format="rgb24", src_colorspace="ITU601").to_ndarray() for f in decoded]
    assert all(np.array_equal(a, b) for a, b in zip(ours, as_709, strict=True))
    assert max(int(np.abs(a.astype(int) - b).max()) for a, b in zip(ours, as_601, strict=True)) > 10
    # The flicker difference docs/quality.md reports: small, and not zero.
    difference = abs(_flicker(ours) - _flicker(as_601)) / _flicker(as_601)
    assert 1e-4 < difference < 5e-3, difference
    scores = score_video(tagged, include_proxies=False)
    assert all(s.extra["decoded_with"]["colour_matrix"] == "BT.709" for s in scores)
    assert {s.extra["decoded_with"]["pyav"] for s in scores} == {av.__version__}
