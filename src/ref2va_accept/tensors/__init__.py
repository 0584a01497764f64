"""Bit-exact comparison of comparison points held in safetensors dumps (judging/_decoded.py: MP4
output).

Equality is strict: equal dtype, equal shape, equal bytes. ``-0.0`` and ``0.0`` differ and NaNs
compare by bit pattern, because a lossless optimization must reproduce B0 bit for bit, and any
numerical notion of "close" would let a changed reduction order through.

Bytes are compared first, in large chunks, at memcmp speed: an equal point costs about what
``cmp`` costs. Values are interpreted only for a chunk whose bytes differ, to explain the
mismatch (how many elements, where the first one is, how far apart in value and in ULP).

The package, by seam:

- :mod:`.dtypes`: the safetensors dtype table, bit views, values and ULP distance;
- :mod:`.files`: safetensors headers parsed and validated with ``json`` and ``struct`` (no torch,
  no ``safetensors`` package, never a whole multi-GiB file in memory), dump folders, raw reads,
  and writing files for fixtures and benchmarks;
- :mod:`.comparison`: the per-dump result (:class:`DumpComparison`, its points the evidence's
  ``PointRecord``) and the explanation of differing elements;
- :mod:`.command`: ``ref2va-accept compare-tensors``, in a track's frozen order or the
  documented pipeline order;
- :mod:`.streaming`: the chunked comparison of stored tensors (:func:`compare_dumps`,
  :func:`compare_tensor_files`) and of in-memory points fed piece by piece
  (:class:`StreamingComparison`, :func:`compare_arrays`).

``CHUNK_BYTES`` is re-exported for reading; it is read at call time from
:mod:`ref2va_accept.tensors._streaming`, so patch it there.
"""

from ref2va_accept.tensors._comparison import (
    DumpComparison,
    Status,
    dit_step,
    in_order,
    pipeline_order,
)
from ref2va_accept.tensors._dtypes import DTYPES
from ref2va_accept.tensors._files import (
    DUMP_SUFFIX,
    MAX_HEADER_BYTES,
    TensorInfo,
    dump_points,
    open_unbuffered,
    point_file,
    read_header,
    read_into,
    single_tensor,
    write_tensor_file,
)
from ref2va_accept.tensors._streaming import (
    CHUNK_BYTES,
    StreamingComparison,
    compare_arrays,
    compare_dumps,
    compare_tensor_files,
)

__all__ = [
    "CHUNK_BYTES",
    "DTYPES",
    "DUMP_SUFFIX",
    "MAX_HEADER_BYTES",
    "DumpComparison",
    "Status",
    "StreamingComparison",
    "TensorInfo",
    "compare_arrays",
    "compare_dumps",
    "compare_tensor_files",
    "dit_step",
    "dump_points",
    "in_order",
    "open_unbuffered",
    "pipeline_order",
    "point_file",
    "read_header",
    "read_into",
    "single_tensor",
    "write_tensor_file",
]
