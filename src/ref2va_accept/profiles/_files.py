"""Reading a profile's files strictly: each file hashed as published, CSV tables checked against
the columns their writer produces, and every failure one line naming the file and the place.

A missing required column, a row cut short (a truncated file), a number that is not one: each is
a :class:`ProfileReadError` naming the file, the line and the column. A column this reader does
not know (a newer torch_npu adds some) is ignored and named once, never guessed at.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ref2va_accept.core import Ref2VAError, file_sha256
from ref2va_accept.evidence import ProfileFile

__all__ = ["ProfileReadError", "Table", "published", "read_json", "read_table"]


class ProfileReadError(Ref2VAError):
    """A profile file that cannot be read as its writer writes it (one line: file and place)."""


def published(path: Path, relative_to: Path) -> ProfileFile:
    """The file as the evidence names it: relative to ``relative_to``, its size and sha256."""
    try:
        name = path.relative_to(relative_to).as_posix()
    except ValueError:
        name = path.name
    return ProfileFile(file=name, bytes=path.stat().st_size, sha256=file_sha256(path))


@dataclass
class Table:
    """A CSV file's rows as read (values stripped of the tab torch_npu appends to timestamps)."""

    path: Path
    columns: list[str]
    rows: list[dict[str, str]]
    ignored: list[str] = field(default_factory=list)

    def number(self, row: Mapping[str, str], column: str, line: int) -> float:
        """A cell as a number (µs, MB, counts); an empty or non-numeric cell is an error."""
        text = row.get(column, "").strip()
        try:
            return float(text)
        except ValueError:
            raise ProfileReadError(f"{self.path.name}: line {line}, column {column!r}: "
                                   f"{text!r} is not a number") from None

    def optional_number(self, row: Mapping[str, str], column: str, line: int) -> float | None:
        """A cell as a number, None where the column is absent or the cell empty or 'N/A'."""
        text = row.get(column, "").strip()
        if text in ("", "N/A", "NA", "-"):
            return None
        return self.number(row, column, line)


def _text(path: Path) -> str:
    """The file's text (a BOM dropped); missing or unreadable is a ProfileReadError."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ProfileReadError(f"{path.name}: missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileReadError(f"{path.name}: unreadable ({exc})") from None


def read_table(path: Path, required: Sequence[str], known: Sequence[str] = ()) -> Table:
    """``path`` as a CSV table with at least the ``required`` columns; columns neither required
    nor ``known`` are kept out of the rows and named in ``Table.ignored``."""
    lines = list(csv.reader(_text(path).splitlines()))
    if not lines or not any(cell.strip() for cell in lines[0]):
        raise ProfileReadError(f"{path.name}: empty (no header)")
    header = [cell.strip() for cell in lines[0]]
    if "" in header:
        raise ProfileReadError(f"{path.name}: the header has an empty column name: cut short "
                               "or malformed")
    missing = [c for c in required if c not in header]
    if missing:
        raise ProfileReadError(
            f"{path.name}: column(s) {', '.join(repr(c) for c in missing)} missing (header has "
            f"{', '.join(repr(c) for c in header)}); not the layout this reader knows")
    wanted = set(required) | set(known)
    rows = []
    for number, cells in enumerate(lines[1:], start=2):
        if not cells or not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise ProfileReadError(
                f"{path.name}: line {number} has {len(cells)} field(s), the header "
                f"{len(header)}: the file is cut short or malformed")
        rows.append({h: c.strip() for h, c in zip(header, cells, strict=True) if h in wanted})
    if not rows:
        raise ProfileReadError(f"{path.name}: a header and no rows (torch_npu writes no file for "
                               "an empty table): cut short?")
    return Table(path, header, rows, [h for h in header if h not in wanted])


def read_json(path: Path) -> Any:
    """A JSON file; a missing, unreadable or cut-short one is a ProfileReadError."""
    text = _text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileReadError(f"{path.name}: not valid JSON at line {exc.lineno} column "
                               f"{exc.colno} ({exc.msg}); cut short?") from None
