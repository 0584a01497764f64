"""Chunked bit-exact comparison: stored tensors read piece by piece, in-memory points streamed.

Bytes are compared first, in large chunks, at memcmp speed: an equal point costs about what
``cmp`` costs. Values are interpreted only for a chunk whose bytes differ, to explain the
mismatch (:class:`~ref2va_accept.tensors._comparison.DiffStats`).
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ref2va_accept.evidence import PointRecord
from ref2va_accept.tensors._comparison import (
    DiffStats,
    DumpComparison,
    in_order,
    mismatch,
    pipeline_order,
)
from ref2va_accept.tensors._dtypes import DTYPES, F8_DTYPES, dtype_name
from ref2va_accept.tensors._files import (
    TensorInfo,
    dump_points,
    open_unbuffered,
    point_file,
    read_header,
    read_into,
    single_tensor,
)

__all__ = [
    "CHUNK_BYTES",
    "StreamingComparison",
    "compare_arrays",
    "compare_dumps",
    "compare_tensor_files",
]

# Bytes read from each side per step. Large enough that Python's per-chunk cost vanishes against
# the copy from the page cache, small enough to stay well clear of memory limits. Read at call
# time, so that tests can make it tiny to put differences across chunk boundaries.
CHUNK_BYTES = 8 << 20


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
) -> PointRecord:
    """Compare one tensor stored in two open files, bytes first, values only where bytes differ."""
    mismatched = mismatch(point, a.dtype, b.dtype, a.shape, b.shape)
    if mismatched is not None:
        return mismatched
    itemsize = DTYPES[a.dtype].itemsize
    buffers.fit(a.nbytes)
    chunk = buffers.size
    stats = DiffStats(a.dtype)
    first: int | None = None
    done = 0
    while done < a.nbytes:
        step = min(chunk, a.nbytes - done)
        if step == buffers.size:
            # bytearray == bytearray is a memcmp; memoryview == memoryview goes element by element.
            view_a, view_b = buffers.a, buffers.b
        else:
            view_a, view_b = bytearray(step), bytearray(step)
        read_into(handle_a, a.offset + done, view_a, names[0])
        read_into(handle_b, b.offset + done, view_b, names[1])
        if view_a != view_b:
            local = stats.update(memoryview(view_a), memoryview(view_b))
            if first is None and local is not None:
                first = done // itemsize + local
        done += step
    return stats.result(point, a.shape, first)


def _missing(point: str, a: TensorInfo | None, b: TensorInfo | None) -> PointRecord:
    # Absent on both sides reads as missing_in_a: the point is still reported, never skipped.
    if a is None:
        return PointRecord.of(point, "missing_in_a", None, None if b is None else b.dtype,
                               None, None if b is None else b.shape)
    return PointRecord.of(point, "missing_in_b", a.dtype, None, a.shape, None)


def compare_tensor_files(
    a: str | os.PathLike[str], b: str | os.PathLike[str], order: Sequence[str] | None = None,
) -> DumpComparison:
    """Compare every tensor of two safetensors files by name: in ``order`` (a track's frozen
    comparison points) for the names it lists, then in pipeline order (:func:`in_order`)."""
    path_a, path_b = Path(a), Path(b)
    header_a, header_b = read_header(path_a), read_header(path_b)
    names = in_order(header_a.keys() | header_b.keys(), order)
    points: list[PointRecord] = []
    buffers = _Buffers()
    with open_unbuffered(path_a) as handle_a, open_unbuffered(path_b) as handle_b:
        for name in names:
            info_a, info_b = header_a.get(name), header_b.get(name)
            if info_a is None or info_b is None:
                points.append(_missing(name, info_a, info_b))
            else:
                points.append(_compare_stored(name, info_a, info_b, handle_a, handle_b,
                                              (path_a.name, path_b.name), buffers))
    return DumpComparison.of(points)


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
    found_a, found_b = dump_points(folder_a), dump_points(folder_b)
    if points is None:
        points = sorted(found_a | found_b, key=pipeline_order)
    results: list[PointRecord] = []
    buffers = _Buffers()
    for point in points:
        if "/" in point or "\\" in point or point in {"", ".", ".."}:
            raise ValueError(f"comparison point {point!r} is not a plain name")
        file_a, file_b = point_file(folder_a, point), point_file(folder_b, point)
        info_a = single_tensor(file_a) if point in found_a else None
        info_b = single_tensor(file_b) if point in found_b else None
        if info_a is None or info_b is None:
            results.append(_missing(point, info_a, info_b))
            continue
        with open_unbuffered(file_a) as handle_a, open_unbuffered(file_b) as handle_b:
            results.append(_compare_stored(point, info_a, info_b, handle_a, handle_b,
                                           (file_a.name, file_b.name), buffers))
    return DumpComparison.of(results)


def _raw(array: npt.NDArray[Any]) -> memoryview:
    contiguous = np.ascontiguousarray(array, array.dtype.newbyteorder("<"))
    return contiguous.reshape(-1).view(np.uint8).data


def _same_bytes(a: memoryview, b: memoryview) -> bool:
    """memcmp-speed equality of two equal-length byte views held by numpy arrays."""
    head = len(a) - len(a) % 8
    bulk_a = np.frombuffer(a[:head], np.uint64)
    bulk_b = np.frombuffer(b[:head], np.uint64)
    return bool(np.array_equal(bulk_a, bulk_b)) and a[head:].tobytes() == b[head:].tobytes()


def compare_arrays(name: str, a: npt.NDArray[Any], b: npt.NDArray[Any]) -> PointRecord:
    """Compare two in-memory arrays with the same strict semantics as the files."""
    dtype_a, dtype_b = dtype_name(a.dtype), dtype_name(b.dtype)
    shape_a, shape_b = tuple(int(d) for d in a.shape), tuple(int(d) for d in b.shape)
    mismatched = mismatch(name, dtype_a, dtype_b, shape_a, shape_b)
    if mismatched is not None:
        return mismatched
    stream = StreamingComparison(name, dtype_a)
    stream.add(a.reshape(1, -1), b.reshape(1, -1))
    flat = stream.result()
    first = None if flat.first_index is None else tuple(
        int(i) for i in np.unravel_index(flat.first_index[1], shape_a))
    return PointRecord.of(name, flat.status, dtype_a, dtype_b, shape_a, shape_b, flat.elements,
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
        self._stats = DiffStats(dtype)
        self._first: tuple[int, ...] | None = None
        self._rest: list[tuple[int, ...] | None] = [None, None]  # shape without the axis
        self._length = [0, 0]
        self._dtypes: list[str] = [dtype, dtype]
        self._comparable = True

    def _side_dtype(self, array: npt.NDArray[Any]) -> str:
        kind = DTYPES[self.dtype]
        if (self.dtype in {"BF16", *F8_DTYPES} and array.dtype.kind == "u"
                and array.dtype.itemsize == kind.itemsize):
            return self.dtype
        return dtype_name(array.dtype)

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
               shape_b: tuple[int, ...] | None = None) -> PointRecord:
        """The point so far; shapes given by the caller (e.g. frame counts) override the seen."""
        seen_a, seen_b = self._shape(0), self._shape(1)
        shape_a = seen_a if shape_a is None else tuple(shape_a)
        shape_b = seen_b if shape_b is None else tuple(shape_b)
        if self._dtypes[0] != self._dtypes[1]:
            return PointRecord.of(self.name, "dtype_mismatch", self._dtypes[0], self._dtypes[1],
                                   shape_a, shape_b)
        if shape_a != shape_b or not self._comparable:
            return PointRecord.of(self.name, "shape_mismatch", self.dtype, self.dtype,
                                   shape_a, shape_b)
        if shape_a is None:  # nothing was added: an empty point
            return PointRecord.of(self.name, "equal", self.dtype, self.dtype, None, None)
        if seen_a is not None and seen_a != shape_a:
            raise ValueError(f"{self.name}: shape {shape_a} given, but chunks of {seen_a} seen")
        return self._stats.result(self.name, shape_a, self._first)
