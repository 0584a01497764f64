"""Bit-exact comparison of comparison points held in safetensors dumps (decoded.py: MP4 output).

Equality is strict: equal dtype, equal shape, equal bytes. ``-0.0`` and ``0.0`` differ and NaNs
compare by bit pattern, because a lossless optimization must reproduce B0 bit for bit, and any
numerical notion of "close" would let a changed reduction order through.

Bytes are compared first, in large chunks, at memcmp speed: an equal point costs about what
``cmp`` costs. Values are interpreted only for a chunk whose bytes differ, to explain the
mismatch (how many elements, where the first one is, how far apart in value and in ULP).

The safetensors format is parsed here with ``json`` and ``struct``: the judge needs neither torch
nor the ``safetensors`` package, and never holds a whole multi-GiB file in memory.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ref2va_accept.errors import TensorFileError

log = logging.getLogger(__name__)

__all__ = [
    "CHUNK_BYTES",
    "DTYPES",
    "DumpComparison",
    "PointComparison",
    "StreamingComparison",
    "TensorInfo",
    "compare_arrays",
    "compare_dumps",
    "compare_tensor_files",
    "pipeline_order",
    "read_header",
    "write_tensor_file",
]

# Bytes read from each side per step. Large enough that Python's per-chunk cost vanishes against
# the copy from the page cache, small enough to stay well clear of memory limits. Read at call
# time, so that tests can make it tiny to put differences across chunk boundaries.
CHUNK_BYTES = 8 << 20
# The safetensors reference implementation refuses headers above 100 MB; a larger length prefix
# is a corrupt file, not a header worth allocating for.
MAX_HEADER_BYTES = 100_000_000
DUMP_SUFFIX = ".safetensors"

Status = Literal[
    "equal", "differs", "missing_in_a", "missing_in_b", "dtype_mismatch", "shape_mismatch"
]
_U64 = np.dtype("<u8")
_I64 = np.dtype("<i8")


@dataclass(frozen=True)
class _Kind:
    """How one safetensors dtype is stored, and how to read values out of its bit patterns."""

    itemsize: int
    bits: np.dtype[Any]  # the integer type its raw elements are viewed as
    family: Literal["float", "int", "bool"]


DTYPES: Mapping[str, _Kind] = {
    "F64": _Kind(8, np.dtype("<u8"), "float"),
    "F32": _Kind(4, np.dtype("<u4"), "float"),
    "F16": _Kind(2, np.dtype("<u2"), "float"),
    "BF16": _Kind(2, np.dtype("<u2"), "float"),
    "F8_E4M3": _Kind(1, np.dtype("u1"), "float"),
    "F8_E5M2": _Kind(1, np.dtype("u1"), "float"),
    "I8": _Kind(1, np.dtype("i1"), "int"),
    "I16": _Kind(2, np.dtype("<i2"), "int"),
    "I32": _Kind(4, np.dtype("<i4"), "int"),
    "I64": _Kind(8, np.dtype("<i8"), "int"),
    "U8": _Kind(1, np.dtype("u1"), "int"),
    "U16": _Kind(2, np.dtype("<u2"), "int"),
    "U32": _Kind(4, np.dtype("<u4"), "int"),
    "U64": _Kind(8, np.dtype("<u8"), "int"),
    "BOOL": _Kind(1, np.dtype("u1"), "bool"),
}

# numpy dtype -> safetensors dtype, for in-memory arrays. bf16 and fp8 have no numpy type: they
# travel as unsigned bit patterns and are named explicitly (StreamingComparison, write_tensor_file).
_NUMPY_NAMES = {
    "f8": "F64", "f4": "F32", "f2": "F16", "i1": "I8", "i2": "I16", "i4": "I32", "i8": "I64",
    "u1": "U8", "u2": "U16", "u4": "U32", "u8": "U64", "b1": "BOOL",
}


def _f8_table(exponent_bits: int, mantissa_bits: int, ieee_specials: bool) -> npt.NDArray[Any]:
    """Value of each of the 256 fp8 bit patterns (OCP E4M3FN without inf, or IEEE-like E5M2)."""
    bias = (1 << (exponent_bits - 1)) - 1
    top = (1 << exponent_bits) - 1
    values = np.empty(256, np.float64)
    for bits in range(256):
        sign = -1.0 if bits & 0x80 else 1.0
        exponent = (bits >> mantissa_bits) & top
        mantissa = bits & ((1 << mantissa_bits) - 1)
        if ieee_specials and exponent == top:
            values[bits] = sign * math.inf if mantissa == 0 else math.nan
        elif not ieee_specials and exponent == top and mantissa == (1 << mantissa_bits) - 1:
            values[bits] = math.nan
        elif exponent == 0:
            values[bits] = sign * mantissa * 2.0 ** (1 - bias - mantissa_bits)
        else:
            values[bits] = sign * (1 + mantissa / (1 << mantissa_bits)) * 2.0 ** (exponent - bias)
    return values


_F8_VALUES = {"F8_E4M3": _f8_table(4, 3, False), "F8_E5M2": _f8_table(5, 2, True)}


def _values(dtype: str, bits: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Numeric values of raw elements, in a float type that holds every value of the dtype.

    Differences are taken in float64 (``np.subtract(..., dtype=float64)``), so that two large
    F32 values of opposite sign do not overflow to inf; 64-bit integers round, which only
    touches ``max_abs_diff``, never the element counts or the ULP distance.
    """
    if dtype == "F64":
        return bits.view("<f8")
    if dtype == "F32":
        return bits.view("<f4")
    if dtype == "F16":
        return bits.view("<f2")
    if dtype == "BF16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    if dtype in _F8_VALUES:
        looked_up: npt.NDArray[np.float64] = _F8_VALUES[dtype][bits]
        return looked_up
    return bits


def _ordered(raw: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Sign-magnitude float bits mapped onto a monotonic signed integer line of the same width.

    +0 and -0 both land on 0 and neighbouring floats are 1 apart, so a -0/+0 difference is a
    differing element at ULP 0. Branch-free in the narrow type: this is the hot part of
    explaining a dense mismatch.
    """
    signed = raw.view(np.dtype(f"<i{raw.itemsize}"))
    width = raw.itemsize * 8
    magnitude = signed & np.array((1 << (width - 1)) - 1, signed.dtype)
    negative = signed >> np.array(width - 1, signed.dtype)  # all ones when the sign bit is set
    ordered: npt.NDArray[Any] = (magnitude ^ negative) - negative
    return ordered


def _max_distance(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> int:
    """max |a - b| over two signed or unsigned integer arrays, exact even for 64-bit ones."""
    if a.itemsize <= 2:  # the narrowest type that holds the difference is the fastest
        return int(np.abs(np.subtract(a, b, dtype=np.int32)).max())
    if a.itemsize == 4:
        return int(np.abs(np.subtract(a, b, dtype=_I64)).max())
    if a.dtype.kind == "i":
        # |a - b| of two int64 reaches 2**64 - 2: take it modulo 2**64, exact once the larger
        # operand comes first.
        ua, ub = a.view(_U64), b.view(_U64)
        return int(np.where(a >= b, ua - ub, ub - ua).max())
    return int(np.where(a >= b, a - b, b - a).max())


def _max_ulp(dtype: str, a: npt.NDArray[Any], b: npt.NDArray[Any]) -> int:
    """Floats: the largest distance in ULPs along the ordered bit patterns; integers |a - b|."""
    if DTYPES[dtype].family != "float":
        return _max_distance(a, b)
    return _max_distance(_ordered(a), _ordered(b))


class _DiffStats:
    """Running explanation of the differing elements of one point, fed chunk by chunk."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype
        self.bits = DTYPES[dtype].bits
        self.differing = 0
        self.max_abs_diff: float | None = None
        self.max_ulp: int | None = None

    def update(self, a: memoryview | bytes, b: memoryview | bytes) -> int | None:
        """Account for one pair of equal-length raw chunks; the first differing element's index."""
        bits_a = np.frombuffer(a, self.bits)
        bits_b = np.frombuffer(b, self.bits)
        where = np.flatnonzero(bits_a != bits_b)
        if where.size == 0:
            return None
        # Only the differing elements: equal ones add nothing, and an equal NaN pattern would
        # otherwise poison the maximum difference.
        sub_a, sub_b = bits_a[where], bits_b[where]
        self.differing += int(where.size)
        ulp = _max_ulp(self.dtype, sub_a, sub_b)
        self.max_ulp = ulp if self.max_ulp is None else max(self.max_ulp, ulp)
        if DTYPES[self.dtype].family == "float":
            with np.errstate(over="ignore", invalid="ignore"):
                gaps = np.subtract(_values(self.dtype, sub_a), _values(self.dtype, sub_b),
                                   dtype=np.float64)
            # max propagates NaN: a NaN on either side has no distance, and the report should
            # say that NaN appeared rather than hide it behind the largest finite gap.
            gap = float(np.abs(gaps).max())
        else:
            gap = float(ulp)
        if self.max_abs_diff is None or math.isnan(gap):
            self.max_abs_diff = gap
        elif not math.isnan(self.max_abs_diff):
            self.max_abs_diff = max(self.max_abs_diff, gap)
        return int(where[0])


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int  # absolute, in the file
    nbytes: int


def _json_float(value: float | None) -> float | str | None:
    # Strict JSON has no NaN or Infinity; the report keeps them readable as strings.
    if value is None or math.isfinite(value):
        return value
    return str(value)


@dataclass(frozen=True)
class PointComparison:
    """One comparison point, A against B.

    ``elements``, ``differing`` and ``fraction`` describe an element-wise comparison; they are 0
    when none was possible (missing on a side, dtype or shape mismatch), and ``status`` says why.
    """

    name: str
    status: Status
    dtype_a: str | None
    dtype_b: str | None
    shape_a: tuple[int, ...] | None
    shape_b: tuple[int, ...] | None
    elements: int = 0
    differing: int = 0
    fraction: float = 0.0
    first_index: tuple[int, ...] | None = None
    max_abs_diff: float | None = None
    max_ulp: int | None = None

    @property
    def equal(self) -> bool:
        return self.status == "equal"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; a non-finite ``max_abs_diff`` is the string ``"nan"`` or ``"inf"``."""
        return {
            "name": self.name, "status": self.status, "equal": self.equal,
            "dtype_a": self.dtype_a, "dtype_b": self.dtype_b,
            "shape_a": None if self.shape_a is None else list(self.shape_a),
            "shape_b": None if self.shape_b is None else list(self.shape_b),
            "elements": self.elements, "differing": self.differing, "fraction": self.fraction,
            "first_index": None if self.first_index is None else list(self.first_index),
            "max_abs_diff": _json_float(self.max_abs_diff), "max_ulp": self.max_ulp,
        }

    def summary(self) -> str:
        """One line: ``name: equal`` or what differs, where first, and by how much."""
        if self.status == "equal":
            return f"{self.name}: equal"
        if self.status == "missing_in_a":
            return f"{self.name}: MISSING in A"
        if self.status == "missing_in_b":
            return f"{self.name}: MISSING in B"
        if self.status == "dtype_mismatch":
            return f"{self.name}: DTYPE MISMATCH {self.dtype_a} vs {self.dtype_b}"
        if self.status == "shape_mismatch":
            return f"{self.name}: SHAPE MISMATCH {self.shape_a} vs {self.shape_b}"
        percent = 100.0 * self.fraction
        share = f"{percent:.2f}%" if percent >= 0.01 else f"{percent:.2g}%"
        return (f"{self.name}: DIFFERS {self.differing}/{self.elements} elements ({share}), "
                f"first at {self.first_index}, max |diff| {self.max_abs_diff:.2g}, "
                f"max ULP {self.max_ulp}")


@dataclass(frozen=True)
class DumpComparison:
    points: tuple[PointComparison, ...]  # in the order compared
    first_divergence: str | None  # the first point, in that order, that is not equal

    @classmethod
    def of(cls, points: Iterable[PointComparison]) -> DumpComparison:
        compared = tuple(points)
        return cls(compared, next((p.name for p in compared if not p.equal), None))

    @property
    def equal(self) -> bool:
        return all(p.equal for p in self.points)

    def to_dict(self) -> dict[str, Any]:
        return {
            "equal": self.equal,
            "first_divergence": self.first_divergence,
            "points": [p.to_dict() for p in self.points],
        }


def pipeline_order(name: str) -> tuple[int, int, str]:
    """Sort key: cond.* < dit.stepNNN (numeric) < other dit.* < latent.* < decoded.* < the rest."""
    step = re.fullmatch(r"dit\.step(\d+)(.*)", name)
    if step:
        return (1, int(step.group(1)), step.group(2))
    for rank, prefix in ((0, "cond."), (2, "dit."), (3, "latent."), (4, "decoded.")):
        if name.startswith(prefix):
            return (rank, 0, name)
    return (5, 0, name)


# ---------------------------------------------------------------------------------------------
# safetensors files


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_header(path: str | os.PathLike[str]) -> dict[str, TensorInfo]:
    """Parse and validate the header of a safetensors file; tensors in file order.

    Raises :class:`TensorFileError` naming the file (basename) and what is wrong: missing,
    unreadable, truncated, a header that is not JSON, an unknown dtype, or offsets that do not
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
            if length > MAX_HEADER_BYTES:
                raise TensorFileError(
                    f"{name}: header length {length} exceeds the {MAX_HEADER_BYTES}-byte limit")
            if 8 + length > size:
                raise TensorFileError(
                    f"{name}: header length {length} runs past the end of the file "
                    f"({size} bytes)")
            raw = handle.read(length)
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
        raise TensorFileError(f"{name}: header is not valid JSON: {reason}") from None
    if not isinstance(header, dict):
        raise TensorFileError(
            f"{name}: header must be a JSON object, found {type(header).__name__}")
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


def _read_into(handle: io.FileIO, offset: int, view: memoryview | bytearray, name: str) -> None:
    handle.seek(offset)
    done = 0
    while done < len(view):
        got = handle.readinto(memoryview(view)[done:])
        if not got:
            raise TensorFileError(f"{name}: file ended at byte {offset + done} while reading "
                                  f"{len(view)} bytes from byte {offset}")
        done += got


class _Buffers:
    """Two reusable read buffers, so that comparing a point allocates nothing per chunk.

    They grow to fit the largest point seen, up to CHUNK_BYTES, and stay a multiple of 8 bytes so
    that a chunk always holds whole elements of every dtype.
    """

    def __init__(self) -> None:
        self.size = 0
        self.a = self.b = bytearray()

    def fit(self, nbytes: int) -> None:
        wanted = max(8, min(CHUNK_BYTES, nbytes) // 8 * 8)
        if wanted > self.size:
            self.size = wanted
            self.a, self.b = bytearray(wanted), bytearray(wanted)


def _compare_stored(
    point: str, a: TensorInfo, b: TensorInfo, handle_a: io.FileIO, handle_b: io.FileIO,
    names: tuple[str, str], buffers: _Buffers,
) -> PointComparison:
    """Compare one tensor stored in two open files, bytes first, values only where bytes differ."""
    mismatch = _mismatch(point, a.dtype, b.dtype, a.shape, b.shape)
    if mismatch is not None:
        return mismatch
    itemsize = DTYPES[a.dtype].itemsize
    buffers.fit(a.nbytes)
    chunk = buffers.size
    stats = _DiffStats(a.dtype)
    first: int | None = None
    done = 0
    while done < a.nbytes:
        step = min(chunk, a.nbytes - done)
        if step == buffers.size:
            # bytearray == bytearray is a memcmp; memoryview == memoryview goes element by element.
            view_a, view_b = buffers.a, buffers.b
        else:
            view_a, view_b = bytearray(step), bytearray(step)
        _read_into(handle_a, a.offset + done, view_a, names[0])
        _read_into(handle_b, b.offset + done, view_b, names[1])
        if view_a != view_b:
            local = stats.update(memoryview(view_a), memoryview(view_b))
            if first is None and local is not None:
                first = done // itemsize + local
        done += step
    return _result(point, a.dtype, a.shape, stats, first)


def _mismatch(point: str, dtype_a: str, dtype_b: str, shape_a: tuple[int, ...],
              shape_b: tuple[int, ...]) -> PointComparison | None:
    status: Status | None = None
    if dtype_a != dtype_b:
        status = "dtype_mismatch"
    elif shape_a != shape_b:
        status = "shape_mismatch"
    if status is None:
        return None
    return PointComparison(point, status, dtype_a, dtype_b, shape_a, shape_b)


def _result(point: str, dtype: str, shape: tuple[int, ...], stats: _DiffStats,
            first: int | tuple[int, ...] | None) -> PointComparison:
    elements = math.prod(shape)
    if stats.differing == 0:
        return PointComparison(point, "equal", dtype, dtype, shape, shape, elements)
    if isinstance(first, int):
        first = tuple(int(i) for i in np.unravel_index(first, shape))
    return PointComparison(
        point, "differs", dtype, dtype, shape, shape, elements, stats.differing,
        stats.differing / elements, first, stats.max_abs_diff, stats.max_ulp,
    )


def _open(path: Path) -> io.FileIO:
    try:
        # Unbuffered: readinto goes straight from the page cache into our buffer, one copy.
        return path.open("rb", buffering=0)
    except OSError as exc:
        raise TensorFileError(f"{path.name}: cannot open: {exc.strerror}") from None


def _missing(point: str, a: TensorInfo | None, b: TensorInfo | None) -> PointComparison:
    # Absent on both sides reads as missing_in_a: the point is still reported, never skipped.
    if a is None:
        return PointComparison(point, "missing_in_a", None, None if b is None else b.dtype,
                               None, None if b is None else b.shape)
    return PointComparison(point, "missing_in_b", a.dtype, None, a.shape, None)


def compare_tensor_files(
    a: str | os.PathLike[str], b: str | os.PathLike[str]
) -> DumpComparison:
    """Compare every tensor of two safetensors files by name, in pipeline order of the names."""
    path_a, path_b = Path(a), Path(b)
    header_a, header_b = read_header(path_a), read_header(path_b)
    names = sorted(header_a.keys() | header_b.keys(), key=pipeline_order)
    points: list[PointComparison] = []
    buffers = _Buffers()
    with _open(path_a) as handle_a, _open(path_b) as handle_b:
        for name in names:
            info_a, info_b = header_a.get(name), header_b.get(name)
            if info_a is None or info_b is None:
                points.append(_missing(name, info_a, info_b))
            else:
                points.append(_compare_stored(name, info_a, info_b, handle_a, handle_b,
                                              (path_a.name, path_b.name), buffers))
    return DumpComparison.of(points)


def _dump_points(folder: Path) -> set[str]:
    if not folder.is_dir():
        what = "no such folder" if not folder.exists() else "not a folder"
        raise TensorFileError(f"{folder.name or folder}: {what}, expected a dump folder")
    return {p.name[: -len(DUMP_SUFFIX)] for p in folder.iterdir()
            if p.name.endswith(DUMP_SUFFIX) and p.is_file()}


def _single_tensor(path: Path) -> TensorInfo:
    tensors = read_header(path)
    if len(tensors) != 1:
        raise TensorFileError(f"{path.name}: expected one tensor per comparison point, "
                              f"found {len(tensors)}")
    return next(iter(tensors.values()))


def compare_dumps(
    a_dir: str | os.PathLike[str], b_dir: str | os.PathLike[str],
    points: Sequence[str] | None = None,
) -> DumpComparison:
    """Compare two dump folders holding one ``<point>.safetensors`` each per point.

    ``points`` names the points and the pipeline order in which the first divergence is
    reported; ``None`` takes every point found in either folder, in :func:`pipeline_order`.
    A point missing on one side is reported as such, never skipped.
    """
    folder_a, folder_b = Path(a_dir), Path(b_dir)
    found_a, found_b = _dump_points(folder_a), _dump_points(folder_b)
    if points is None:
        points = sorted(found_a | found_b, key=pipeline_order)
    results: list[PointComparison] = []
    buffers = _Buffers()
    for point in points:
        if "/" in point or "\\" in point or point in {"", ".", ".."}:
            raise ValueError(f"comparison point {point!r} is not a plain name")
        file_a = folder_a / (point + DUMP_SUFFIX)
        file_b = folder_b / (point + DUMP_SUFFIX)
        info_a = _single_tensor(file_a) if point in found_a else None
        info_b = _single_tensor(file_b) if point in found_b else None
        if info_a is None or info_b is None:
            results.append(_missing(point, info_a, info_b))
            continue
        with _open(file_a) as handle_a, _open(file_b) as handle_b:
            results.append(_compare_stored(point, info_a, info_b, handle_a, handle_b,
                                           (file_a.name, file_b.name), buffers))
    return DumpComparison.of(results)


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
        dtype = (dtypes or {}).get(key) or _dtype_name(array.dtype)
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


# ---------------------------------------------------------------------------------------------
# in-memory and streamed points


def _dtype_name(dtype: np.dtype[Any]) -> str:
    name = _NUMPY_NAMES.get(f"{dtype.kind}{dtype.itemsize}")
    if name is None:
        raise ValueError(f"unsupported array dtype {dtype}; expected one of "
                         f"{', '.join(sorted(_NUMPY_NAMES.values()))}")
    return name


def _raw(array: npt.NDArray[Any]) -> memoryview:
    contiguous = np.ascontiguousarray(array, array.dtype.newbyteorder("<"))
    return contiguous.reshape(-1).view(np.uint8).data


def _same_bytes(a: memoryview, b: memoryview) -> bool:
    """memcmp-speed equality of two equal-length byte views held by numpy arrays."""
    head = len(a) - len(a) % 8
    bulk_a = np.frombuffer(a[:head], np.uint64)
    bulk_b = np.frombuffer(b[:head], np.uint64)
    return bool(np.array_equal(bulk_a, bulk_b)) and a[head:].tobytes() == b[head:].tobytes()


def compare_arrays(name: str, a: npt.NDArray[Any], b: npt.NDArray[Any]) -> PointComparison:
    """Compare two in-memory arrays with the same strict semantics as the files."""
    dtype_a, dtype_b = _dtype_name(a.dtype), _dtype_name(b.dtype)
    shape_a, shape_b = tuple(int(d) for d in a.shape), tuple(int(d) for d in b.shape)
    mismatch = _mismatch(name, dtype_a, dtype_b, shape_a, shape_b)
    if mismatch is not None:
        return mismatch
    stream = StreamingComparison(name, dtype_a)
    stream.add(a.reshape(1, -1), b.reshape(1, -1))
    flat = stream.result()
    first = flat.first_index
    if first is not None:
        first = tuple(int(i) for i in np.unravel_index(first[1], shape_a))
    return PointComparison(name, flat.status, dtype_a, dtype_b, shape_a, shape_b, flat.elements,
                           flat.differing, flat.fraction, first, flat.max_abs_diff, flat.max_ulp)


class StreamingComparison:
    """One point compared chunk by chunk, e.g. frame by frame, never held whole.

    Chunks are consecutive slices of the point along ``axis`` (a video's frames along axis 0 as
    ``frame[None]``; audio ``[channels, samples]`` along axis 1). BF16 and F8 points take their
    chunks as unsigned integers of the same width, holding the bit patterns.
    """

    def __init__(self, name: str, dtype: str, *, axis: int = 0) -> None:
        if dtype not in DTYPES:
            raise ValueError(f"{name}: unsupported dtype {dtype!r}")
        self.name = name
        self.dtype = dtype
        self.axis = axis
        self._stats = _DiffStats(dtype)
        self._first: tuple[int, ...] | None = None
        self._rest: list[tuple[int, ...] | None] = [None, None]  # shape without the axis
        self._length = [0, 0]
        self._dtypes: list[str] = [dtype, dtype]
        self._comparable = True

    def _side_dtype(self, array: npt.NDArray[Any]) -> str:
        kind = DTYPES[self.dtype]
        if (self.dtype in {"BF16", *_F8_VALUES} and array.dtype.kind == "u"
                and array.dtype.itemsize == kind.itemsize):
            return self.dtype
        return _dtype_name(array.dtype)

    def add(self, a: npt.NDArray[Any], b: npt.NDArray[Any]) -> None:
        """Compare the next chunk of each side."""
        for side, chunk in enumerate((a, b)):
            if chunk.ndim <= self.axis:
                raise ValueError(f"{self.name}: a chunk of shape {chunk.shape} has no axis "
                                 f"{self.axis}")
            rest = chunk.shape[: self.axis] + chunk.shape[self.axis + 1:]
            if self._rest[side] is None:
                self._rest[side] = rest
            elif self._rest[side] != rest:
                raise ValueError(f"{self.name}: chunk shape {chunk.shape} does not continue "
                                 f"the chunks before it")
            self._length[side] += chunk.shape[self.axis]
            dtype = self._side_dtype(chunk)
            if dtype != self.dtype:
                self._dtypes[side] = dtype
        if (not self._comparable or a.shape != b.shape or self._dtypes[0] != self.dtype
                or self._dtypes[1] != self.dtype):
            self._comparable = False
            return
        raw_a, raw_b = _raw(a), _raw(b)
        if _same_bytes(raw_a, raw_b):
            return
        local = self._stats.update(raw_a, raw_b)
        if local is not None:
            index = [int(i) for i in np.unravel_index(local, a.shape)]
            index[self.axis] += self._length[0] - a.shape[self.axis]
            # Chunks along an inner axis interleave in row-major order: keep the smallest.
            if self._first is None or tuple(index) < self._first:
                self._first = tuple(index)

    def _shape(self, side: int) -> tuple[int, ...] | None:
        rest = self._rest[side]
        if rest is None:
            return None
        return (*rest[: self.axis], self._length[side], *rest[self.axis:])

    def result(self, shape_a: tuple[int, ...] | None = None,
               shape_b: tuple[int, ...] | None = None) -> PointComparison:
        """The point so far; shapes given by the caller (e.g. frame counts) override the seen."""
        seen_a, seen_b = self._shape(0), self._shape(1)
        shape_a = seen_a if shape_a is None else tuple(shape_a)
        shape_b = seen_b if shape_b is None else tuple(shape_b)
        if self._dtypes[0] != self._dtypes[1]:
            return PointComparison(self.name, "dtype_mismatch", self._dtypes[0], self._dtypes[1],
                                   shape_a, shape_b)
        if shape_a != shape_b or not self._comparable:
            return PointComparison(self.name, "shape_mismatch", self.dtype, self.dtype,
                                   shape_a, shape_b)
        if shape_a is None:  # nothing was added: an empty point
            return PointComparison(self.name, "equal", self.dtype, self.dtype, None, None)
        if seen_a is not None and seen_a != shape_a:
            raise ValueError(f"{self.name}: shape {shape_a} given, but chunks of {seen_a} seen")
        return _result(self.name, self.dtype, shape_a, self._stats, self._first)
