"""Write the frozen, semantically aligned Ref2VA inputs under fixtures/inputs/.

The preflight's 5 s prompt and reference image did not match each other, so quality baselines need
inputs whose prompt, image and audio describe one scene: a red ball rolling across a blue floor
toward a yellow wall, with a soft rolling sound. One prompt serves both durations so that the 5 s
and 15 s tracks differ only in length.

Determinism: pixels and samples come from integer arithmetic and a counter-based hash (splitmix64),
never from a library RNG whose stream may change between numpy versions. The PNG is compressed by
the stdlib's zlib at a fixed level; a different zlib build could emit different (equally valid)
bytes, which the sha256 pins in the campaign files would catch at freeze/verify time.

Usage: python scripts/make_reference_inputs.py [OUTPUT_DIR]   (default: fixtures/inputs)
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import struct
import sys
import wave
import zlib
from pathlib import Path

import numpy as np
import numpy.typing as npt

logger = logging.getLogger("make_reference_inputs")

PROMPT = (
    "A glossy red ball rolls steadily across a smooth blue floor toward a plain yellow wall, "
    "lit by soft daylight from the left; the camera stays still at floor height. "
    "A soft, low rolling sound follows the ball as it moves from left to right.\n"
)

# 7:4, the aspect of the 1344x768 request, small enough to keep the fixtures tiny.
IMAGE_WIDTH, IMAGE_HEIGHT = 448, 256
HORIZON_Y = 112  # wall above, floor below

AUDIO_RATE = 32_000  # H3 emits stereo 32 kHz audio; the reference matches that format
# H3 refuses standalone reference audio outside 2..15 s (vLLM-Omni 0.30.0,
# model_executor/models/minimax_h3/reference_video.py); 3 s sits clear of the lower bound, so
# resampling or container rounding cannot push it under, and keeps the WAV at 375 KiB.
AUDIO_SECONDS = 3.0

WALL_RGB = (236, 200, 40)
FLOOR_RGB = (40, 72, 196)
BALL_RGB = (214, 30, 30)


def _splitmix64(counter: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Counter-based hash: the same input gives the same output on every platform."""
    with np.errstate(over="ignore"):
        z = counter + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def draw_reference_image() -> npt.NDArray[np.uint8]:
    """A red ball on a blue floor before a yellow wall, in integer arithmetic only."""
    h, w = IMAGE_HEIGHT, IMAGE_WIDTH
    ys, xs = np.mgrid[0:h, 0:w].astype(np.int64)
    img = np.zeros((h, w, 3), dtype=np.int64)

    # Wall: flat yellow, slightly darker toward the floor (light comes from above-left).
    wall = ys < HORIZON_Y
    for c in range(3):
        img[..., c] = np.where(wall, WALL_RGB[c] - (ys * 24) // HORIZON_Y - xs // 64, img[..., c])
    # Floor: blue, brighter toward the viewer.
    floor = ~wall
    for c in range(3):
        shade = FLOOR_RGB[c] + ((ys - HORIZON_Y) * 40) // (h - HORIZON_Y)
        img[..., c] = np.where(floor, shade, img[..., c])
    # Skirting line where wall meets floor.
    img[(ys >= HORIZON_Y - 2) & (ys < HORIZON_Y + 1)] = (150, 120, 30)

    # Ball resting on the floor, left of centre (it rolls to the right), with a soft shadow.
    cx, cy, r = 150, 186, 40
    shadow = ((xs - cx - 10) ** 2) * 16 + ((ys - (cy + r - 2)) ** 2) * 144 <= (r * 4) ** 2
    img[shadow & floor] = (img[shadow & floor] * 3) // 5
    d2 = (xs - cx) ** 2 + (ys - cy) ** 2
    ball = d2 <= r * r
    # Highlight toward the upper left: brightness falls with distance from the light spot.
    hx, hy = cx - r // 3, cy - r // 3
    light = 255 - np.minimum(((xs - hx) ** 2 + (ys - hy) ** 2) * 160 // (r * r * 4), 160)
    for c in range(3):
        img[..., c] = np.where(ball, (BALL_RGB[c] * light) // 255, img[..., c])
    spot = (xs - hx) ** 2 + (ys - hy) ** 2 <= (r // 6) ** 2
    img[spot] = (250, 200, 200)
    return np.clip(img, 0, 255).astype(np.uint8)


def encode_png(rgb: npt.NDArray[np.uint8]) -> bytes:
    """A minimal RGB8 PNG: one IDAT, filter 0 on every row, no ancillary chunks (no timestamps)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


def synth_rolling_sound() -> npt.NDArray[np.int16]:
    """Soft low rumble with a slow rolling pulse, panned left to right as the ball moves."""
    n = int(AUDIO_RATE * AUDIO_SECONDS)
    idx = np.arange(n, dtype=np.uint64)
    # Uniform noise in [-1, 1) from the top 24 bits of the hash.
    noise = (_splitmix64(idx) >> np.uint64(40)).astype(np.float64) / float(1 << 23) - 1.0
    # Two passes of a one-pole low-pass turn hiss into rumble.
    rumble = np.empty(n)
    acc = 0.0
    for _ in range(2):
        for i in range(n):
            acc += 0.02 * (noise[i] - acc)
            rumble[i] = acc
        noise = rumble.copy()
    rumble /= np.max(np.abs(rumble))
    t = np.arange(n) / AUDIO_RATE
    tone = 0.25 * np.sin(2 * np.pi * 90.0 * t)  # the ball's hum
    pulse = 0.7 + 0.3 * np.sin(2 * np.pi * 5.0 * t)  # one bump per rotation
    fade = np.minimum(1.0, np.minimum(t, AUDIO_SECONDS - t) / 0.1)
    mono = 0.3 * (0.75 * rumble + tone) * pulse * fade
    pan = t / AUDIO_SECONDS
    left = mono * np.sqrt(1.0 - pan)
    right = mono * np.sqrt(pan)
    stereo = np.stack([left, right], axis=1)
    return np.round(stereo * 32767).astype("<i2")


def encode_wav(samples: npt.NDArray[np.int16], path: Path) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(2)
        out.setsampwidth(2)
        out.setframerate(AUDIO_RATE)
        out.writeframes(samples.tobytes())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    default_out = Path(__file__).resolve().parent.parent / "fixtures" / "inputs"
    parser.add_argument("output_dir", nargs="?", type=Path, default=default_out)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    out: Path = args.output_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "prompt.txt").write_bytes(PROMPT.encode("utf-8"))
    (out / "reference.png").write_bytes(encode_png(draw_reference_image()))
    encode_wav(synth_rolling_sound(), out / "reference.wav")
    for name in ("prompt.txt", "reference.png", "reference.wav"):
        data = (out / name).read_bytes()
        logger.info("%s  %s  (%d bytes)", hashlib.sha256(data).hexdigest(), name, len(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
