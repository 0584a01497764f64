"""Media made for the tests, judge's and engine's alike: the reference inputs of H3's input
limits in memory (WAV, other audio, images) and small real MP4s on disk."""

from __future__ import annotations

import io
import wave
from pathlib import Path

import av
import numpy as np
from PIL import Image


def _sine(seconds: float, rate: int, hz: float = 220.0, amplitude: float = 0.3) -> np.ndarray:
    t = np.arange(round(seconds * rate)) / rate
    return (amplitude * np.sin(2 * np.pi * hz * t) * 32767).astype("<i2")


def wav_bytes(seconds: float, rate: int = 32_000, channels: int = 2, pad_bytes: int = 0, *,
              hz: float = 220.0, amplitude: float = 0.3) -> bytes:
    """A 16-bit sine WAV (every channel the same sine of ``hz`` at ``amplitude`` of full
    scale); pad_bytes adds a trailing chunk (a big file that still decodes)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(channels)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(np.repeat(_sine(seconds, rate, hz, amplitude), channels).tobytes())
    data = buffer.getvalue()
    if pad_bytes:
        body = data[12:] + b"junk" + pad_bytes.to_bytes(4, "little") + b"\0" * pad_bytes
        data = b"RIFF" + (4 + len(body)).to_bytes(4, "little") + b"WAVE" + body
    return data


def encoded_audio(fmt: str, codec: str, seconds: float = 3.0, rate: int = 32_000) -> bytes:
    """Stereo sine audio in another container or codec (mp3, flac, ...), encoded with PyAV."""
    mono = _sine(seconds, rate)
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format=fmt) as container:
        stream = container.add_stream(codec, rate=rate, layout="stereo")
        for start in range(0, len(mono), 1024):
            chunk = np.repeat(mono[start : start + 1024], 2)[None, :]
            frame = av.AudioFrame.from_ndarray(chunk, format="s16", layout="stereo")
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()


def image_bytes(width: int, height: int, fmt: str = "PNG") -> bytes:
    rgb = np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format=fmt)
    return buffer.getvalue()


def write_mp4(path: Path, frames: int = 124, *, size: tuple[int, int] = (64, 48),
              level: int | None = None, pictures: np.ndarray | None = None, audio: bool = True,
              samples: np.ndarray | None = None, faststart: bool = False,
              pix_fmt: str = "yuv420p", codec_options: dict[str, str] | None = None) -> Path:
    """A small real MP4 written with PyAV at ``path``: H.264 video at 24 fps and, with ``audio``,
    a stereo 32 kHz AAC track as long as the video.

    Frame i is a flat grey of ``i % 256`` at ``size`` (width, height), or of ``level`` for every
    frame; ``pictures`` ((frames, height, width, 3) uint8) gives the frames themselves. The audio
    is silent unless ``samples`` ((2, n) float32) gives it. ``faststart`` puts the index first
    (movflags); ``pix_fmt`` and ``codec_options`` go to the video encoder."""
    if pictures is None:
        width, height = size
        pictures = np.stack([np.full((height, width, 3), i % 256 if level is None else level,
                                     np.uint8) for i in range(frames)])
    count, height, width, _ = pictures.shape
    options = {"movflags": "faststart"} if faststart else {}
    with av.open(str(path), "w", options=options) as container:
        video = container.add_stream("libx264", rate=24)
        video.width, video.height, video.pix_fmt = width, height, pix_fmt
        if codec_options:
            video.options = codec_options
        sound = container.add_stream("aac", rate=32000) if audio else None
        if sound is not None:
            sound.layout = "stereo"
        for picture in pictures:
            container.mux(video.encode(av.VideoFrame.from_ndarray(picture, format="rgb24")))
        container.mux(video.encode())
        if sound is not None:
            if samples is None:
                samples = np.zeros((2, round(32000 * count / 24)), np.float32)
            chunk = av.AudioFrame.from_ndarray(samples, format="fltp", layout="stereo")
            chunk.sample_rate = 32000
            container.mux(sound.encode(chunk))
            container.mux(sound.encode())
    return path
