"""The evidence's record of one bit-exact comparison point, B0 against the candidate: its
status, dtypes, shapes and how the bytes differ, built by the comparison itself
(tensors.compare_dumps, judging's MP4 points) and read back in the gates' data."""

from __future__ import annotations

from pydantic import ConfigDict

from ref2va_accept.evidence._base import JsonNumber, Number, Record
from ref2va_accept.evidence._closed_sets import PointStatus

__all__ = ["PointRecord"]


class PointRecord(Record):
    """One comparison point, A (B0) against B (the candidate), as the bit-exact comparison
    finds it (tensors.compare_dumps and judging's MP4 points build it with `of`).

    `elements`, `differing` and `fraction` describe an element-wise comparison; they are 0 when
    none was possible (missing on a side, dtype or shape mismatch), and `status` says why. A
    non-finite `max_abs_diff` is written as the string "nan", "inf" or "-inf"."""

    model_config = ConfigDict(frozen=True)

    name: str
    status: PointStatus
    equal: bool
    dtype_a: str | None
    dtype_b: str | None
    # Lists, as JSON reads them back (the report shows them so); summary() shows tuples.
    shape_a: list[int] | None
    shape_b: list[int] | None
    elements: int
    differing: int
    fraction: Number
    first_index: list[int] | None
    max_abs_diff: JsonNumber | None
    max_ulp: int | None

    @classmethod
    def of(cls, name: str, status: PointStatus, dtype_a: str | None, dtype_b: str | None,
           shape_a: tuple[int, ...] | None, shape_b: tuple[int, ...] | None,
           elements: int = 0, differing: int = 0, fraction: float = 0.0,
           first_index: tuple[int, ...] | None = None,
           max_abs_diff: JsonNumber | None = None,
           max_ulp: int | None = None) -> PointRecord:
        """The record of one compared point (`equal` follows from `status`)."""
        return cls(name=name, status=status, equal=status == "equal", dtype_a=dtype_a,
                   dtype_b=dtype_b, shape_a=_listed(shape_a), shape_b=_listed(shape_b),
                   elements=elements, differing=differing, fraction=fraction,
                   first_index=_listed(first_index), max_abs_diff=max_abs_diff,
                   max_ulp=max_ulp)

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
            return (f"{self.name}: SHAPE MISMATCH {_tupled(self.shape_a)} vs "
                    f"{_tupled(self.shape_b)}")
        percent = 100.0 * self.fraction
        share = f"{percent:.2f}%" if percent >= 0.01 else f"{percent:.2g}%"
        diff = self.max_abs_diff
        shown = f"{diff:.2g}" if isinstance(diff, int | float) else str(diff)
        return (f"{self.name}: DIFFERS {self.differing}/{self.elements} elements ({share}), "
                f"first at {_tupled(self.first_index)}, max |diff| {shown}, max ULP {self.max_ulp}")


def _listed(values: tuple[int, ...] | None) -> list[int] | None:
    return None if values is None else list(values)


def _tupled(values: list[int] | None) -> tuple[int, ...] | None:
    return None if values is None else tuple(values)
