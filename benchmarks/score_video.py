"""The video scorer's speed against decoding the same file with ffmpeg to null, in one run.

Writes a 15 s, 1344x768, 24 fps MP4 (362 frames of moving gradients, shapes and noise, libx264 at
its default CRF, plus AAC audio) to a temporary folder, then alternates rounds of
``ffmpeg -v error -i FILE -f null -`` and what ``ref2va-accept score FILE`` computes: every
CPU-computable metric (temporal flickering, the proxies, temporal consistency; no weights) and
the soundtrack's loudness, peak, clipping and silence, each scoring round in a fresh child
process so its peak RSS is its own. Prints the median times, their ratio (target <= 2x) and the
scoring's peak RSS (target < 2 GiB).

    .venv/bin/python benchmarks/score_video.py [--rounds 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WIDTH, HEIGHT, FPS, FRAMES, RATE = 1344, 768, 24, 362, 32000
GIB = float(1 << 30)
log = logging.getLogger("benchmarks.score_video")

_CHILD = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from ref2va_accept.quality import score_video
from ref2va_accept.quality.audio import audio_stats, decode_audio
start = time.perf_counter()
scores = score_video(sys.argv[1])
video_s = time.perf_counter() - start
stats = audio_stats(decode_audio(sys.argv[1]))
elapsed = time.perf_counter() - start
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": elapsed, "video_seconds": video_s, "peak_rss_kib": peak_kib,
                  "scores": {s.scorer.id: s.value for s in scores if s.status == "ok"},
                  "audio": stats.to_dict()}))
"""


def make_video(path: Path, preset: str) -> None:
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=FPS, options={"preset": preset})
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


def time_ffmpeg(path: Path) -> float:
    start = time.perf_counter()
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-f", "null", "-"], check=True)
    return time.perf_counter() - start


def score_in_child(path: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(ROOT / "src")],
                          check=True, capture_output=True, text=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--preset", default="medium", help="libx264 preset (its default)")
    parser.add_argument("--keep", type=Path, help="reuse/keep the MP4 in this folder")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if shutil.which("ffmpeg") is None:
        log.error("ffmpeg CLI not found; the benchmark compares against it")
        return 2
    folder = args.keep or Path(tempfile.mkdtemp(prefix="score-video-"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bench_1344x768_24fps_15s.mp4"
    try:
        if not path.exists():
            start = time.perf_counter()
            make_video(path, args.preset)
            log.info("wrote %s (%.1f MiB) in %.1f s", path.name, path.stat().st_size / 2**20,
                     time.perf_counter() - start)
        ffmpeg_s: list[float] = []
        score_s: list[float] = []
        peaks: list[int] = []
        last: dict[str, object] = {}
        for round_ in range(args.rounds):
            ffmpeg_s.append(time_ffmpeg(path))
            last = score_in_child(path)
            score_s.append(float(last["seconds"]))  # type: ignore[arg-type]
            peaks.append(int(last["peak_rss_kib"]))  # type: ignore[call-overload]
            log.info("round %d: ffmpeg %.2f s, scoring %.2f s (video %.2f s), peak RSS %.0f MiB",
                     round_ + 1, ffmpeg_s[-1], score_s[-1],
                     float(last["video_seconds"]), peaks[-1] / 1024)  # type: ignore[arg-type]
        ff, sc = statistics.median(ffmpeg_s), statistics.median(score_s)
        log.info("scores: %s", json.dumps(last["scores"], indent=1))
        log.info("audio: %s", json.dumps(last["audio"]))
        log.info("median ffmpeg decode-to-null: %.2f s", ff)
        log.info("median scoring:               %.2f s", sc)
        log.info("ratio score/ffmpeg: %.2fx (target <= 2x)", sc / ff)
        log.info("peak RSS of scoring: %.2f GiB (target < 2 GiB)", max(peaks) * 1024 / GIB)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
