"""The safetensors dtypes the comparator knows, their bit views, values and ULP distance.

Every dtype is read as raw integer bit patterns of its width (``Kind.bits``): equality is decided
on those, and values are interpreted only to explain a difference. BF16 and the two fp8 formats
have no numpy type; they travel as unsigned bit patterns and are named explicitly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = ["DTYPES", "F8_DTYPES", "Kind", "dtype_name", "max_ulp", "values_of"]

_U64 = np.dtype("<u8")
_I64 = np.dtype("<i8")


@dataclass(frozen=True)
class Kind:
    """How one safetensors dtype is stored, and how to read values out of its bit patterns."""

    itemsize: int
    bits: np.dtype[Any]  # the integer type its raw elements are viewed as
    family: Literal["float", "int", "bool"]


DTYPES: Mapping[str, Kind] = {
    "F64": Kind(8, np.dtype("<u8"), "float"),
    "F32": Kind(4, np.dtype("<u4"), "float"),
    "F16": Kind(2, np.dtype("<u2"), "float"),
    "BF16": Kind(2, np.dtype("<u2"), "float"),
    "F8_E4M3": Kind(1, np.dtype("u1"), "float"),
    "F8_E5M2": Kind(1, np.dtype("u1"), "float"),
    "I8": Kind(1, np.dtype("i1"), "int"),
    "I16": Kind(2, np.dtype("<i2"), "int"),
    "I32": Kind(4, np.dtype("<i4"), "int"),
    "I64": Kind(8, np.dtype("<i8"), "int"),
    "U8": Kind(1, np.dtype("u1"), "int"),
    "U16": Kind(2, np.dtype("<u2"), "int"),
    "U32": Kind(4, np.dtype("<u4"), "int"),
    "U64": Kind(8, np.dtype("<u8"), "int"),
    "BOOL": Kind(1, np.dtype("u1"), "bool"),
}

# numpy dtype -> safetensors dtype, for in-memory arrays. bf16 and fp8 have no numpy type: they
# travel as unsigned bit patterns and are named explicitly (StreamingComparison, write_tensor_file).
_NUMPY_NAMES = {
    "f8": "F64", "f4": "F32", "f2": "F16", "i1": "I8", "i2": "I16", "i4": "I32", "i8": "I64",
    "u1": "U8", "u2": "U16", "u4": "U32", "u8": "U64", "b1": "BOOL",
}


def dtype_name(dtype: np.dtype[Any]) -> str:
    """The safetensors dtype of a numpy dtype; ValueError for one that has none."""
    name = _NUMPY_NAMES.get(f"{dtype.kind}{dtype.itemsize}")
    if name is None:
        raise ValueError(f"unsupported array dtype {dtype}; expected one of "
                         f"{', '.join(sorted(_NUMPY_NAMES.values()))}")
    return name


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
F8_DTYPES = frozenset(_F8_VALUES)


def values_of(dtype: str, bits: npt.NDArray[Any]) -> npt.NDArray[Any]:
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


def max_ulp(dtype: str, a: npt.NDArray[Any], b: npt.NDArray[Any]) -> int:
    """Floats: the largest distance in ULPs along the ordered bit patterns; integers |a - b|."""
    if DTYPES[dtype].family != "float":
        return _max_distance(a, b)
    return _max_distance(_ordered(a), _ordered(b))
