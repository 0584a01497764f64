"""What each VBench dimension costs on the CPU: a 15 s 1344x768 video, time and peak memory.

Run in the environment scripts/vbench_env.sh builds (MUSIQ needs pyiqa, which needs
torchvision), on checkpoints in VBench's cache layout (real ones, or `ref2va-accept scorers
standins DIR`: the same networks, so the same cost):

    .venv-vbench/bin/python benchmarks/vbench_cost.py --cache DIR [--video V.mp4] [--passes ...]

Without --video it first encodes a synthetic 15 s clip (362 frames of 1344x768 at 24 fps, H.264).
Each dimension is scored in a process of its own, through the judge's own scoring pass (decode,
temporal_flickering, the dimension's models), so its peak RSS is its own; DINO serves
subject_consistency and, given the reference image, i2v_subject in one pass; DreamSim's
i2v_background also takes the reference image (its stand-in folder is made in this
environment). The baseline is an ffmpeg decode of the same file to RGB (`ffmpeg -i V -f
rawvideo -pix_fmt rgb24`), timed before and after the dimensions in the same run; every
dimension's time is printed as a ratio to it, and so is the judge's decode with no model at
all. The figures are measurements of one machine: the README quotes them with the machine they
came from.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import av
import numpy as np
from PIL import Image

from ref2va_accept.cli import default_paths
from ref2va_accept.quality._pipeline import score_video

# Each measured pass: key (for --passes), label, weights names, whether it takes the reference
# image.
PASSES = (
    ("decode", "decode + temporal_flickering (no model)", (), False),
    ("dino", "subject_consistency + i2v_subject (DINO ViT-B/16)", ("dino_vitb16",), True),
    ("clip", "background_consistency (CLIP ViT-B/32)", ("clip_vitb32",), False),
    ("aesthetic", "aesthetic_quality (CLIP ViT-L/14 + LAION)", ("clip_vitl14", "laion_aesthetic"),
     False),
    ("musiq", "imaging_quality (MUSIQ)", ("musiq_spaq",), False),
    ("amt", "motion_smoothness (AMT-S)", ("amt_s",), False),
    ("raft", "dynamic_degree (RAFT)", ("raft",), False),
    ("dreamsim", "i2v_background (DreamSim ensemble)", ("dreamsim",), True),
)


def make_video(path: Path, frames: int = 362, width: int = 1344, height: int = 768) -> None:
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=24)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for t in range(frames):
            phase = t / 24.0
            r = 127 + 100 * np.sin(xx / 90.0 + 2.0 * phase) * np.cos(yy / 70.0)
            g = 127 + 100 * np.sin((xx + yy) / 120.0 - 1.3 * phase)
            b = 127 + 100 * np.cos(np.hypot(xx - width / 2 - 200 * np.sin(phase),
                                            yy - height / 2) / 40.0)
            rgb = np.clip(np.stack([r, g, b], axis=-1), 0, 255).astype(np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def ffmpeg_decode_s(video: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(video), "-f", "rawvideo", "-pix_fmt",
                    "rgb24", "-y", os.devnull], check=True)
    return time.perf_counter() - started


def one_pass(cache: Path, video: Path, names: list[str], reference: Path | None) -> None:
    """The child: score ``video`` with only ``names``' weights; print seconds and statuses."""
    paths = default_paths(cache)
    started = time.perf_counter()
    scores = score_video(video, reference_image=reference, include_proxies=False,
                         weights={n: paths[n] for n in names})
    seconds = time.perf_counter() - started
    states = {s.scorer: s.status for s in scores if s.scorer.startswith("vbench.")}
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB
    print(json.dumps({"seconds": seconds, "peak_mib": peak_mib, "states": states}))


def measure(cache: Path, video: Path, names: tuple[str, ...], reference: Path | None
            ) -> tuple[float, float, dict[str, str]]:
    command = [sys.executable, __file__, "--cache", str(cache), "--video", str(video),
               "--one", ",".join(names)]
    if reference is not None:
        command += ["--reference", str(reference)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{names}: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["seconds"], result["peak_mib"], result["states"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--video", type=Path)
    parser.add_argument("--reference", type=Path)
    parser.add_argument("--seconds", type=float, default=15.0,
                        help="length of the synthetic clip at 24 fps (default 15: 362 frames, "
                        "H3's 17n+5 snap); shorter for a quick look")
    keys = [key for key, *_ in PASSES]
    parser.add_argument("--passes", default=",".join(keys),
                        help=f"comma-separated passes to measure (default all: {','.join(keys)})")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    chosen = [key.strip() for key in args.passes.split(",") if key.strip()]
    unknown = sorted(set(chosen) - set(keys))
    if unknown or not chosen:
        parser.error(f"--passes: unknown {', '.join(unknown) or '(none given)'}; "
                     f"choose from {', '.join(keys)}")
    if args.one is not None:
        one_pass(args.cache, args.video, [n for n in args.one.split(",") if n], args.reference)
        return
    if shutil.which("ffmpeg") is None:
        raise SystemExit("ffmpeg is not on PATH: it is the baseline")
    video = args.video
    if video is None:
        frames = 17 * round((24 * args.seconds - 5) / 17) + 5 if args.seconds >= 1 else 5
        video = Path(f"vbench-cost-{frames}f-1344x768.mp4").resolve()
        if not video.exists():
            make_video(video, frames=frames)
    reference = args.reference
    if reference is None:
        reference = video.with_suffix(".png")
        with av.open(str(video)) as container:
            first = next(container.decode(video=0)).to_ndarray(format="rgb24")
        Image.fromarray(first).save(reference)
    baseline = [ffmpeg_decode_s(video)]
    print(f"  ffmpeg decode of {video.name} to RGB: {baseline[0]:.2f} s", file=sys.stderr,
          flush=True)
    rows = []
    for key, label, names, needs_reference in PASSES:
        if key not in chosen:
            continue
        seconds, peak_mib, states = measure(args.cache, video, names,
                                            reference if needs_reference else None)
        rows.append((label, seconds, peak_mib, states))
        # Each pass as it ends, with the decode measured before it: a run of hours that is
        # stopped keeps what it has measured.
        print(f"  measured {label}: {seconds:.1f} s ({seconds / baseline[0]:.1f}x the first "
              f"decode), peak RSS {peak_mib:.0f} MiB", file=sys.stderr, flush=True)
    baseline.append(ffmpeg_decode_s(video))
    decode = statistics.median(baseline)
    print(f"video {video.name}: ffmpeg decode to RGB {decode:.2f} s (median of "
          f"{', '.join(f'{b:.2f}' for b in baseline)})")
    print(f"{'pass':52} {'seconds':>9} {'x decode':>9} {'peak RSS MiB':>13}  scored")
    for label, seconds, peak_mib, states in rows:
        scored = ", ".join(f"{k.removeprefix('vbench.')} {v}" for k, v in states.items()
                           if v != "open")
        print(f"{label:52} {seconds:9.1f} {seconds / decode:9.1f} {peak_mib:13.0f}  {scored}")


if __name__ == "__main__":
    main()
