"""safetensors files and dump folders: header parsing and validation, raw reads, fixture writing.

The format is parsed here with ``json`` and ``struct``: the judge needs neither torch nor the
``safetensors`` package, and never holds a whole multi-GiB file in memory. Every problem is a
:class:`TensorFileError` naming the file (basename) and what is wrong.
"""

from __future__ import annotations

import io
import json
import math
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ref2va_accept.core import TensorFileError
from ref2va_accept.tensors._dtypes import DTYPES, dtype_name
from ref2va_contract.diagnostics import DUMP_SUFFIX

__all__ = [
    "DUMP_SUFFIX",
    "MAX_HEADER_BYTES",
    "TensorInfo",
    "dump_points",
    "open_unbuffered",
    "point_file",
    "read_header",
    "read_into",
    "single_tensor",
    "write_tensor_file",
]

# The safetensors reference implementation refuses headers above 100 MB; a larger length prefix
# is a corrupt file, not a header worth allocating for.
MAX_HEADER_BYTES = 100_000_000


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int  # absolute, in the file
    nbytes: int


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _not_safetensors(length: int, opening: bytes) -> str | None:
    """Why a file does not even start like a safetensors file; None when it does."""
    if not opening:
        return "nothing after the 8-byte header length"
    if opening != b"{":
        return "no JSON object after the 8-byte header length"
    if length < 2:
        return f"header length {length} cannot hold a JSON object"
    if length > MAX_HEADER_BYTES:
        return (f"header length {length} is above the {MAX_HEADER_BYTES}-byte limit "
                "safetensors sets")
    return None


def read_header(path: str | os.PathLike[str]) -> dict[str, TensorInfo]:
    """Parse and validate the header of a safetensors file; tensors in file order.

    Raises :class:`TensorFileError` naming the file (basename) and what is wrong: missing,
    unreadable, not a safetensors file at all (no JSON object after the length prefix, an absurd
    length, a header that is not JSON), truncated, an unknown dtype, or offsets that do not
    match the shape or run past the end of the file.
    """
    file_path = Path(path)
    name = file_path.name
    try:
        with file_path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise TensorFileError(
                    f"{name}: truncated: expected an 8-byte header length, file has {size} bytes")
            (length,) = struct.unpack("<Q", prefix)
            # The format says the header MUST begin with "{" (0x7B). Without one, the 8-byte
            # length prefix is whatever other bytes the file starts with (text, an MP4's box
            # header), and calling that number a header length would mislead.
            opening = handle.read(1)
            problem = _not_safetensors(length, opening)
            if problem:
                raise TensorFileError(f"{name}: not a safetensors file ({problem}; the file "
                                      f"has {size} bytes)")
            if 8 + length > size:
                raise TensorFileError(
                    f"{name}: truncated: header length {length} runs past the end of the file "
                    f"({size} bytes)")
            raw = opening + handle.read(length - 1)
    except FileNotFoundError:
        raise TensorFileError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise TensorFileError(f"{name}: is a folder, expected a safetensors file") from None
    except OSError as exc:
        raise TensorFileError(f"{name}: cannot read: {exc.strerror}") from None
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_reject_duplicates)
    except (UnicodeDecodeError, ValueError) as exc:
        reason = str(exc).splitlines()[0]
        raise TensorFileError(f"{name}: not a safetensors file (header is not valid JSON: "
                              f"{reason})") from None
    # A text that starts with "{" and parses is a JSON object: nothing else to check here.
    buffer_size = size - 8 - length
    tensors: dict[str, TensorInfo] = {}
    for key, entry in header.items():
        if key == "__metadata__":
            if not isinstance(entry, dict):
                raise TensorFileError(f"{name}: __metadata__ must be an object")
            continue
        tensors[key] = _tensor_info(name, key, entry, 8 + length, buffer_size)
    return tensors


def _tensor_info(name: str, key: str, entry: Any, start: int, buffer_size: int) -> TensorInfo:
    where = f"{name}: tensor {key!r}"
    if not isinstance(entry, dict):
        raise TensorFileError(f"{where}: expected an object with dtype, shape and data_offsets")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise TensorFileError(
            f"{where}: unsupported dtype {dtype!r}, expected one of {', '.join(DTYPES)}")
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise TensorFileError(f"{where}: shape must be a list of non-negative integers, "
                              f"found {shape!r}")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(_is_int(o) for o in offsets)):
        raise TensorFileError(f"{where}: data_offsets must be [begin, end], found {offsets!r}")
    begin, end = offsets
    if not 0 <= begin <= end <= buffer_size:
        raise TensorFileError(f"{where}: data_offsets [{begin}, {end}] out of range of the "
                              f"{buffer_size}-byte data buffer")
    expected = math.prod(shape) * DTYPES[dtype].itemsize
    if end - begin != expected:
        raise TensorFileError(f"{where}: data_offsets span {end - begin} bytes, shape {shape} "
                              f"of {dtype} needs {expected}")
    return TensorInfo(key, dtype, tuple(shape), start + begin, end - begin)


def single_tensor(path: Path) -> TensorInfo:
    """The one tensor of a comparison point's file; TensorFileError for none or several."""
    tensors = read_header(path)
    if len(tensors) != 1:
        raise TensorFileError(f"{path.name}: expected one tensor per comparison point, "
                              f"found {len(tensors)}")
    return next(iter(tensors.values()))


def point_file(folder: Path, point: str) -> Path:
    """Where a dump folder holds one comparison point: ``<folder>/<point>.safetensors``."""
    return folder / (point + DUMP_SUFFIX)


def dump_points(folder: Path) -> set[str]:
    """The points of a dump folder: the names of its ``<point>.safetensors`` files."""
    if not folder.is_dir():
        what = "no such folder" if not folder.exists() else "not a folder"
        raise TensorFileError(f"{folder.name or folder}: {what}, expected a dump folder")
    return {p.name[: -len(DUMP_SUFFIX)] for p in folder.iterdir()
            if p.name.endswith(DUMP_SUFFIX) and p.is_file()}


def open_unbuffered(path: Path) -> io.FileIO:
    try:
        # Unbuffered: readinto goes straight from the page cache into our buffer, one copy.
        return path.open("rb", buffering=0)
    except OSError as exc:
        raise TensorFileError(f"{path.name}: cannot open: {exc.strerror}") from None


def read_into(handle: io.FileIO, offset: int, view: memoryview | bytearray, name: str) -> None:
    """Fill ``view`` from ``offset`` of an open file; TensorFileError if the file ends first."""
    handle.seek(offset)
    done = 0
    while done < len(view):
        got = handle.readinto(memoryview(view)[done:])
        if not got:
            raise TensorFileError(f"{name}: file ended at byte {offset + done} while reading "
                                  f"{len(view)} bytes from byte {offset}")
        done += got


def write_tensor_file(
    path: str | os.PathLike[str], tensors: Mapping[str, npt.NDArray[Any]], *,
    dtypes: Mapping[str, str] | None = None, metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write a safetensors file (for fixtures and benchmarks; the judge only reads them).

    ``dtypes`` names the safetensors dtype of a tensor whose numpy type does not say it, such as
    BF16 or F8 stored as unsigned bit patterns.
    """
    header: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
    blobs: list[npt.NDArray[Any]] = []
    offset = 0
    for key, array in tensors.items():
        dtype = (dtypes or {}).get(key) or dtype_name(array.dtype)
        if DTYPES[dtype].itemsize != array.dtype.itemsize:
            raise ValueError(f"{key}: {array.dtype} elements cannot hold {dtype}")
        data = np.ascontiguousarray(array, array.dtype.newbyteorder("<"))
        header[key] = {"dtype": dtype, "shape": list(array.shape),
                       "data_offsets": [offset, offset + data.nbytes]}
        blobs.append(data)
        offset += data.nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # keep the buffer 8-byte aligned, as safetensors does
    target = Path(path)
    with target.open("wb") as handle:
        handle.write(struct.pack("<Q", len(encoded)) + encoded)
        for data in blobs:
            handle.write(data.reshape(-1).view(np.uint8).data)
    return target
