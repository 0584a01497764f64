"""The video scorer against decoding the same file with FFmpeg, in one run.

Writes a 15 s, 1344x768, 24 fps MP4 (362 frames of moving gradients, shapes and noise, libx264
at its default CRF, plus AAC audio), then alternates an FFmpeg decode of the whole file (the
benchmark's setup: `ffmpeg -v error -i FILE -f null -` when the ffmpeg CLI is on PATH, else the
same FFmpeg libraries through PyAV decoding every video frame and audio frame) and what
`ref2va-accept score FILE` computes (the timed subject): every CPU-computable metric (temporal
flickering, the proxies, temporal consistency; no weights) and the soundtrack's loudness, peak,
clipping and silence. Target: at most 2x the decode. One more scoring run in a fresh child
process gives the scoring's own peak RSS (target under 2 GiB; frames are streamed).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from benchmarks.support import ROOT, Ratio, median, median_of
from ref2va_accept.quality import score_video
from ref2va_accept.quality._audio import audio_stats, decode_audio

WIDTH, HEIGHT, FPS, FRAMES, RATE = 1344, 768, 24, 362, 32000
GIB = float(1 << 30)

_CHILD = """
import json, resource, sys
sys.path.insert(0, sys.argv[2])
from ref2va_accept.quality import score_video
from ref2va_accept.quality._audio import audio_stats, decode_audio
score_video(sys.argv[1])
audio_stats(decode_audio(sys.argv[1]))
print(json.dumps({"peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def make_video(path: Path) -> None:
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=FPS, options={"preset": "medium"})
        video.width, video.height, video.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        audio = out.add_stream("aac", rate=RATE, layout="stereo")
        for i in range(FRAMES):
            t = i / FPS
            base = np.stack([
                127 + 100 * np.sin(xx / 180 + 2.0 * t),
                127 + 100 * np.sin(yy / 120 - 1.3 * t),
                127 + 100 * np.sin((xx + yy) / 250 + 0.7 * t),
            ], axis=-1)
            cx, cy = int(WIDTH / 2 + 400 * np.sin(t)), int(HEIGHT / 2 + 200 * np.cos(0.8 * t))
            base[max(cy - 80, 0):cy + 80, max(cx - 120, 0):cx + 120] = (230, 40, 60)
            base += rng.normal(0, 6, size=base.shape).astype(np.float32)
            frame = av.VideoFrame.from_ndarray(np.clip(base, 0, 255).astype(np.uint8), "rgb24")
            for packet in video.encode(frame):
                out.mux(packet)
        for packet in video.encode():
            out.mux(packet)
        samples = int(FRAMES / FPS * RATE)
        tone = 0.2 * np.sin(2 * np.pi * 440 * np.arange(samples) / RATE).astype(np.float32)
        stereo = np.stack([tone, tone])
        for start in range(0, samples, 1024):
            chunk = av.AudioFrame.from_ndarray(
                np.ascontiguousarray(stereo[:, start:start + 1024]), format="fltp",
                layout="stereo")
            chunk.sample_rate, chunk.pts, chunk.time_base = RATE, start, Fraction(1, RATE)
            for packet in audio.encode(chunk):
                out.mux(packet)
        for packet in audio.encode():
            out.mux(packet)


def ffmpeg_decode(path: Path) -> str:
    """Decode every frame of the file with FFmpeg; which decoder ran."""
    if shutil.which("ffmpeg"):
        subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-f", "null", "-"], check=True)
        return "ffmpeg -f null"
    with av.open(str(path)) as container:
        frames = sum(1 for _ in container.decode(video=0, audio=0))
    assert frames > FRAMES, "the decode must cover the video and the audio"
    return "FFmpeg decode (PyAV)"


def score(path: Path) -> None:
    scores = score_video(path)
    assert any(s.scorer == "vbench.temporal_flickering" and s.status == "ok" for s in scores)
    audio_stats(decode_audio(path))


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("score-video") / "bench_1344x768_24fps_15s.mp4"
    make_video(path)
    return path


def test_scoring_vs_ffmpeg_decode(benchmark: Any, video: Path,
                                  record_ratio: Callable[[Ratio], None],
                                  pytestconfig: pytest.Config) -> None:
    decode_s: list[float] = []
    decoder: list[str] = []

    def timed_decode() -> None:
        start = time.perf_counter()
        decoder.append(ffmpeg_decode(video))
        decode_s.append(time.perf_counter() - start)

    score(video)  # imports and first-touch costs out of the timed rounds
    ffmpeg_decode(video)
    benchmark.pedantic(score, args=(video,), setup=timed_decode,
                       rounds=pytestconfig.getoption("bench_rounds"), iterations=1)
    child = subprocess.run([sys.executable, "-c", _CHILD, str(video), str(ROOT / "src")],
                           check=True, capture_output=True, text=True)
    peak_gib = json.loads(child.stdout.strip().splitlines()[-1])["peak_rss_kib"] * 1024 / GIB
    ours, theirs = median_of(benchmark), median(decode_s)
    record_ratio(Ratio("scoring", "score + audio stats", ours, decoder[-1], theirs,
                       "<= 2x and peak RSS < 2 GiB", ours / theirs <= 2.0 and peak_gib < 2.0,
                       f"peak RSS of scoring {peak_gib:.2f} GiB"))
