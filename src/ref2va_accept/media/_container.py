"""Open an MP4 container and read what its streams declare, with one-line errors.

Every error here names the file by its basename only: evidence bundles and messages must not leak
the host's directory layout. A file that cannot be read at all (missing, a folder, no permission)
raises :class:`MediaError`; a file that was read and is not an MP4 (it does not start with an ISO
BMFF box, FFmpeg cannot open it, or it opens with a demuxer outside the MP4/MOV family) raises
:class:`MediaContentError`, a problem found in the input, instead of being decoded as whatever
another demuxer makes of it.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path
from typing import Any

import av
import av.container

from ref2va_accept.core import MediaContentError, MediaError

# Demuxer names FFmpeg gives the ISO base media family; "mov,mp4,m4a,3gp,3g2,mj2" in practice.
MP4_FAMILY = frozenset({"mov", "mp4"})
# The box types an MP4/MOV file can start with: those FFmpeg's mov demuxer probes for at the top
# level, and the fragmented-MP4 ones. A file whose first 4-byte type is none of these has no ISO
# BMFF box structure (text, an image, random bytes), whatever its first 4 bytes say as a size.
TOP_LEVEL_BOXES = frozenset({
    "ftyp", "styp", "moov", "mdat", "free", "skip", "wide", "pnot", "udta", "uuid", "junk",
    "pict", "prfl", "sidx", "moof", "meta",
})

__all__ = [
    "MP4_FAMILY",
    "TOP_LEVEL_BOXES",
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


def _not_iso_bmff(head: bytes) -> str | None:
    """Why the file's first bytes are not an ISO BMFF box header; None when they are one."""
    if len(head) < 8:
        return f"{len(head)} bytes, too short for an ISO BMFF box header"
    box_size = struct.unpack(">I", head[:4])[0]
    box_type = head[4:8].decode("latin-1")
    if box_type not in TOP_LEVEL_BOXES:
        shown = box_type if box_type.isascii() and box_type.isprintable() else head[4:8].hex()
        return f"the first box type {shown!r} is not an MP4 top-level box"
    if box_size not in (0, 1) and box_size < 8:
        return f"the first box '{box_type}' declares {box_size} bytes, less than its header"
    return None


def open_mp4(path: Path) -> av.container.InputContainer:
    """Open ``path`` as an MP4, or raise one clear line naming the file by basename:
    :class:`MediaError` when it cannot be read at all, :class:`MediaContentError` when it was
    read and is not an MP4 (or not one FFmpeg can open)."""
    name = path.name
    if not path.exists():
        raise MediaError(f"{name}: no such file")
    if not path.is_file():
        raise MediaError(f"{name}: not a regular file")
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            head = handle.read(8)
    except OSError as exc:
        raise MediaError(f"{name}: cannot read: {exc.strerror}") from None
    if size == 0:
        raise MediaContentError(f"{name}: empty file (0 bytes), expected an MP4")
    reason = _not_iso_bmff(head)
    if reason is not None:
        raise MediaContentError(f"{name}: not an MP4 (no ISO BMFF box structure: {reason})")
    try:
        container = av.open(str(path), mode="r")
    except (av.error.FFmpegError, OSError, ValueError) as exc:
        reason = _box_layout_reason(path, size) or av_reason(exc)
        raise MediaContentError(
            f"{name}: cannot open as an MP4 container ({size} bytes): {reason}"
        ) from None
    if not is_mp4_family(container.format.name):
        found = container.format.name
        container.close()
        raise MediaContentError(f"{name}: not an MP4 container, the demuxer found '{found}'")
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
