"""Reference media made in memory for the tests of H3's input limits (judge and engine alike)."""

from __future__ import annotations

import io
import wave

import av
import numpy as np
from PIL import Image


def _sine(seconds: float, rate: int) -> np.ndarray:
    t = np.arange(round(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 220.0 * t) * 32767).astype("<i2")


def wav_bytes(seconds: float, rate: int = 32_000, channels: int = 2, pad_bytes: int = 0) -> bytes:
    """A 16-bit sine WAV; pad_bytes adds a trailing chunk (a big file that still decodes)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(channels)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(np.repeat(_sine(seconds, rate), channels).tobytes())
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
