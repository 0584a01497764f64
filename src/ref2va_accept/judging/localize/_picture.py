"""Where two tensors differ, at a glance: a coarse grid of the share of differing elements.

The tensor is read as rows x columns: every axis but the last flattened into rows (tokens, or
frames x positions) and the last axis as columns (features, or channels). Rows and columns are
binned into at most :data:`ROW_BINS` x :data:`COL_BINS` cells; each cell holds the share of its
elements whose bits differ, so a reviewer sees whether a difference is everywhere, in a few
features, or in one corner. Both files are read chunk by chunk (the tensors package's reader):
nothing is held whole in memory.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import numpy as np

from ref2va_accept.evidence import DiffPicture
from ref2va_accept.tensors import DTYPES, open_unbuffered, read_into, single_tensor

ROW_BINS = 32
COL_BINS = 48
CHUNK_ELEMENTS = 1 << 20


def _edges(length: int, bins: int) -> np.ndarray:
    return np.linspace(0, length, min(bins, max(length, 1)) + 1).round().astype(np.int64)


def diff_map(a: Path, b: Path) -> DiffPicture | None:
    """The grid of two single-tensor files of the same dtype and shape (None otherwise), as the
    localization check's `picture` records it: each share rounded to 6 decimals."""
    info_a, info_b = single_tensor(a), single_tensor(b)
    if (info_a.dtype, info_a.shape) != (info_b.dtype, info_b.shape):
        return None
    shape = tuple(info_a.shape)
    cols = shape[-1] if shape else 1
    rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
    row_edges, col_edges = _edges(rows, ROW_BINS), _edges(cols, COL_BINS)
    counts = np.zeros((len(row_edges) - 1, len(col_edges) - 1), dtype=np.int64)
    bits = DTYPES[info_a.dtype].bits
    itemsize = bits.itemsize
    total = rows * cols
    with open_unbuffered(a) as handle_a, open_unbuffered(b) as handle_b:
        done = 0
        while done < total:
            step = min(CHUNK_ELEMENTS, total - done)
            view_a, view_b = bytearray(step * itemsize), bytearray(step * itemsize)
            read_into(handle_a, info_a.offset + done * itemsize, view_a, a.name)
            read_into(handle_b, info_b.offset + done * itemsize, view_b, b.name)
            if view_a != view_b:
                where = np.flatnonzero(np.frombuffer(view_a, bits) != np.frombuffer(view_b, bits))
                flat = where + done
                r = np.searchsorted(row_edges, flat // cols, side="right") - 1
                c = np.searchsorted(col_edges, flat % cols, side="right") - 1
                np.add.at(counts, (r, c), 1)
            done += step
    sizes = np.outer(np.diff(row_edges), np.diff(col_edges)).clip(min=1)
    share = counts / sizes
    return DiffPicture(shape=list(shape), rows=rows, cols=cols,
                       row_edges=[int(e) for e in row_edges],
                       col_edges=[int(e) for e in col_edges],
                       share=[[round(float(v), 6) for v in row] for row in share],
                       differing=int(counts.sum()))


def _colour(share: float) -> str:
    if share <= 0:
        return "#f4f4f4"
    # any difference is visible (at least a light red); all elements differing is dark red
    strength = 0.25 + 0.75 * min(1.0, share)
    g = round(235 * (1 - strength))
    return f"rgb(200,{g},{g})"


def svg(picture: DiffPicture, *, rows_label: str = "rows", cols_label: str = "columns",
        cell: int = 8) -> str:
    """An inline SVG of the grid, with its axes and a legend in the title of each cell."""
    nrows, ncols = len(picture.share), len(picture.share[0]) if picture.share else 0
    left, top = 40, 14
    # wide enough for the caption below the grid, however few columns it has
    width, height = max(left + ncols * cell + 8, 460), top + nrows * cell + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="diffmap" width="{width}" '
             f'height="{height}" role="img" aria-label="where the outputs differ">']
    for i, row in enumerate(picture.share):
        for j, value in enumerate(row):
            r0, r1 = picture.row_edges[i], picture.row_edges[i + 1]
            c0, c1 = picture.col_edges[j], picture.col_edges[j + 1]
            parts.append(
                f'<rect x="{left + j * cell}" y="{top + i * cell}" width="{cell}" '
                f'height="{cell}" fill="{_colour(value)}"><title>{rows_label} {r0}-{r1 - 1}, '
                f'{cols_label} {c0}-{c1 - 1}: {100 * value:.3g}% differ</title></rect>')
    parts.append(f'<text x="{left}" y="10" font-size="10">{html.escape(cols_label)} 0 .. '
                 f'{picture.cols - 1} &#8594;</text>')
    parts.append(f'<text x="2" y="{top + 10}" font-size="10">{html.escape(rows_label)}</text>')
    parts.append(f'<text x="2" y="{top + nrows * cell}" font-size="10">{picture.rows - 1}</text>')
    parts.append(f'<text x="{left}" y="{top + nrows * cell + 14}" font-size="10">'
                 f'{picture.differing} of {picture.rows * picture.cols} elements differ; darker: '
                 'a larger share of the cell</text>')
    parts.append("</svg>")
    return "".join(parts)
