"""Open an MP4 container and read what its streams declare, with one-line errors.

Every error here names the file by its basename only: evidence bundles and messages must not leak
the host's directory layout. A file that opens with a demuxer outside the MP4/MOV family (a PNG, a
text file read by the ``tty`` demuxer, ...) raises :class:`MediaError` instead of being decoded as
whatever that demuxer makes of it.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

import av
import av.container

from ref2va_accept.errors import MediaError

# Demuxer names FFmpeg gives the ISO base media family; "mov,mp4,m4a,3gp,3g2,mj2" in practice.
MP4_FAMILY = frozenset({"mov", "mp4"})

__all__ = [
    "MP4_FAMILY",
    "av_reason",
    "is_mp4_family",
    "one_line",
    "open_mp4",
    "stream_fps",
    "stream_seconds",
    "x264_settings",
]


def one_line(text: str) -> str:
    return " ".join(text.split())


def is_mp4_family(format_name: str) -> bool:
    """Whether an FFmpeg demuxer name ("mov,mp4,m4a,...") belongs to the MP4/MOV family."""
    return bool(set(format_name.split(",")) & MP4_FAMILY)


def av_reason(exc: BaseException) -> str:
    """One line saying why PyAV/FFmpeg failed, without the path it was given."""
    # str(FFmpegError) embeds the path as given (often absolute); strerror alone does not.
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return one_line(str(reason))


def _box_layout_reason(path: Path, size: int) -> str | None:
    """Explain, from the top-level ISO BMFF boxes, why FFmpeg could not open an MP4.

    FFmpeg only says "Invalid data found"; a truncated upload is far easier to diagnose when the
    message says the ``moov`` box is missing or that a box runs past the end of the file.
    """
    seen: list[str] = []
    offset = 0
    try:
        with path.open("rb") as handle:
            while offset + 8 <= size:
                handle.seek(offset)
                header = handle.read(16)
                box_size, raw_type = struct.unpack(">I4s", header[:8])
                box_type = raw_type.decode("latin-1")
                if not (box_type.isascii() and box_type.isprintable()):
                    break
                if box_size == 1 and len(header) == 16:
                    box_size = struct.unpack(">Q", header[8:16])[0]
                elif box_size == 0:
                    box_size = size - offset
                if box_size < 8:
                    break
                seen.append(box_type)
                if offset + box_size > size:
                    missing = "" if "moov" in seen else ", no moov box"
                    return (
                        f"truncated: box '{box_type}' at byte {offset} declares {box_size} bytes "
                        f"but the file has {size} bytes{missing}"
                    )
                offset += box_size
    except OSError:
        return None
    if seen and seen[0] == "ftyp" and "moov" not in seen:
        return f"no moov box (top-level boxes: {', '.join(seen)})"
    return None


def open_mp4(path: Path) -> av.container.InputContainer:
    """Open ``path`` as an MP4 or raise one clear MediaError naming the file by basename."""
    name = path.name
    if not path.exists():
        raise MediaError(f"{name}: no such file")
    if not path.is_file():
        raise MediaError(f"{name}: not a regular file")
    size = path.stat().st_size
    if size == 0:
        raise MediaError(f"{name}: empty file (0 bytes), expected an MP4")
    try:
        container = av.open(str(path), mode="r")
    except (av.error.FFmpegError, OSError, ValueError) as exc:
        reason = _box_layout_reason(path, size) or av_reason(exc)
        raise MediaError(
            f"{name}: cannot open as an MP4 container ({size} bytes): {reason}"
        ) from None
    if not is_mp4_family(container.format.name):
        found = container.format.name
        container.close()
        raise MediaError(f"{name}: not an MP4 container, the demuxer found '{found}'")
    return container


def stream_seconds(value: int | None, time_base: Any) -> float | None:
    """A stream timestamp in seconds, or None when the stream does not declare it."""
    if value is None or time_base is None:
        return None
    return float(value * time_base)


def stream_fps(stream: av.video.stream.VideoStream) -> float:
    """The frame rate a video stream declares; 0.0 when it declares none."""
    # average_rate comes from the sample table (frames / track duration), which is what "24 fps
    # with 124 frames" means; the others are fallbacks for headers that lack it.
    for rate in (stream.average_rate, stream.guessed_rate, stream.base_rate):
        if rate:
            return float(rate)
    return 0.0


_X264_SEI = re.compile(rb"x264 - core (\d+)[^\x00]*? - options: ([ -~]+)")


def x264_settings(packet: bytes) -> str | None:
    """x264's options string from its SEI in the first packet, or None (another encoder)."""
    match = _X264_SEI.search(packet)
    if match is None:
        return None
    return f"x264 core {match.group(1).decode()}: {match.group(2).decode().strip()}"
