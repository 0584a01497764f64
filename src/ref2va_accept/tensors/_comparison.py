"""What a bit-exact comparison finds: the per-dump result (its points are the evidence's
`PointRecord`s), the pipeline order of points, and the explanation of differing elements.

A point is equal only with equal dtype, equal shape and equal bytes. When bytes differ,
:class:`DiffStats` explains how: how many elements, where the first one is, how far apart in
value and in ULP. It is fed chunk by chunk, so that a point is never held whole.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import TypeAlias

import numpy as np
from pydantic import ConfigDict

from ref2va_accept.evidence import PointRecord, PointStatus, Record
from ref2va_accept.tensors._dtypes import DTYPES, max_ulp, values_of

__all__ = [
    "DiffStats",
    "DumpComparison",
    "Status",
    "in_order",
    "mismatch",
    "pipeline_order",
]

# The statuses a point can have: the evidence's closed set, which the records use too.
Status: TypeAlias = PointStatus


class DumpComparison(Record):
    """The points of two dumps compared, in the order compared, and the first that differs
    (compare-tensors --json writes it; the gates record the points in their own data); `of`
    builds it."""

    model_config = ConfigDict(frozen=True)

    equal: bool  # every point is
    first_divergence: str | None  # the first point, in that order, that is not equal
    points: tuple[PointRecord, ...]  # in the order compared

    @classmethod
    def of(cls, points: Iterable[PointRecord]) -> DumpComparison:
        compared = tuple(points)
        return cls(equal=all(p.equal for p in compared),
                   first_divergence=next((p.name for p in compared if not p.equal), None),
                   points=compared)


# Stages, in the order the pipeline runs them (docs/quality.md, the 910C comparison points).
_STAGES = ((0, "cond."), (2, "dit."), (3, "latent."), (4, "decoded."), (5, "mp4."))
# Within a stage, the documented order: conditioning is text, then the reference image, then the
# reference audio; every later stage gives its video output before its audio output.
_MODALITIES = {"": 0, "text": 1, "image": 2, "video": 3, "audio": 4}


def _modality(rest: str) -> int:
    return _MODALITIES.get(rest.removeprefix("."), len(_MODALITIES))


# A DiT step's point: dit.stepNNN (the reference engine), dit.stepNNN.video/.audio (vLLM-Omni).
DIT_STEP_POINT = re.compile(r"^dit\.step(\d{3})(?:\.(?:video|audio))?$")


def dit_step(name: str) -> int | None:
    """The denoising step of a DiT step's point, None for any other point."""
    match = DIT_STEP_POINT.match(name)
    return int(match.group(1)) if match else None


def pipeline_order(name: str) -> tuple[int, int, int, str]:
    """Sort key in the documented pipeline order, for folders and files that carry no frozen one.

    cond.text < cond.image < cond.audio < dit.stepNNN (numeric; ``.video`` before ``.audio``) <
    other dit.* < latent.video < latent.audio < decoded.video < decoded.audio < mp4.video <
    mp4.audio < anything else; names the table does not know sort by name after the known ones
    of their stage. A campaign's frozen ``comparison_points`` order takes precedence wherever it
    is known (:attr:`ref2va_accept.planning._track_plan.LosslessContract.order`).
    """
    step = re.fullmatch(r"dit\.step(\d+)(.*)", name)
    if step:
        return (1, int(step.group(1)), _modality(step.group(2)), step.group(2))
    for rank, prefix in _STAGES:
        if name.startswith(prefix):
            rest = name[len(prefix):]
            return (rank, 0, _modality(rest), rest)
    return (6, 0, 0, name)


def in_order(names: Iterable[str], order: Sequence[str] | None = None) -> list[str]:
    """``names`` in a frozen order (a campaign track's comparison points) where it lists them,
    then the rest in :func:`pipeline_order`; without ``order``, all in pipeline order."""
    rank = {name: i for i, name in enumerate(order or ())}
    return sorted(set(names), key=lambda n: (0, rank[n], (0, 0, 0, "")) if n in rank
                  else (1, 0, pipeline_order(n)))


def mismatch(point: str, dtype_a: str, dtype_b: str, shape_a: tuple[int, ...],
             shape_b: tuple[int, ...]) -> PointRecord | None:
    """The point's record when dtypes or shapes already differ; None when bytes must decide."""
    status: Status | None = None
    if dtype_a != dtype_b:
        status = "dtype_mismatch"
    elif shape_a != shape_b:
        status = "shape_mismatch"
    if status is None:
        return None
    return PointRecord.of(point, status, dtype_a, dtype_b, shape_a, shape_b)


class DiffStats:
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
        ulp = max_ulp(self.dtype, sub_a, sub_b)
        self.max_ulp = ulp if self.max_ulp is None else max(self.max_ulp, ulp)
        if DTYPES[self.dtype].family == "float":
            with np.errstate(over="ignore", invalid="ignore"):
                gaps = np.subtract(values_of(self.dtype, sub_a), values_of(self.dtype, sub_b),
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

    def result(self, point: str, shape: tuple[int, ...],
               first: int | tuple[int, ...] | None) -> PointRecord:
        """The point's record once every chunk is in; ``first`` flat or already unravelled."""
        elements = math.prod(shape)
        if self.differing == 0:
            return PointRecord.of(point, "equal", self.dtype, self.dtype, shape, shape, elements)
        if isinstance(first, int):
            first = tuple(int(i) for i in np.unravel_index(first, shape))
        return PointRecord.of(
            point, "differs", self.dtype, self.dtype, shape, shape, elements, self.differing,
            self.differing / elements, first, self.max_abs_diff, self.max_ulp,
        )
