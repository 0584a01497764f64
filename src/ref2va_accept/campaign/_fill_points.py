"""Fill a lossless track's comparison-point shapes and dtypes from B0's first dump, for freezing.

On the host, the internal points' shapes are only known once B0 has written them. ``ref2va-accept
fill-points CAMPAIGN DUMP_DIR`` reads each ``<point>.safetensors`` header in DUMP_DIR (no torch:
:func:`ref2va_accept.tensors.read_header`) and, for each ``source: diagnostics`` point of the
chosen lossless tracks, writes the shape it found and corrects the dtype; ``mp4.audio``'s
``[channels, samples]`` comes from decoding an MP4 that B0 returned, when one is given.

The campaign file is edited as text, one point line at a time, so that comments and layout stay:
each point is a one-line flow mapping (``- {name: X, source: diagnostics, dtype: D, shape:
...}``). The result must load with the campaign loader before it replaces the file. A frozen
campaign (its lock exists) is refused unless forced, since refilling it is a drift.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ref2va_accept.campaign._fields import quality_class
from ref2va_accept.campaign._loaded import load_campaign
from ref2va_accept.campaign._lock import lock_path
from ref2va_accept.campaign._tracks import ComparisonPoint
from ref2va_accept.core import (
    CampaignError,
    FreezeError,
    MediaError,
    TensorFileError,
    WriteFailed,
    atomic_write,
)
from ref2va_accept.tensors import point_file, read_header

log = logging.getLogger(__name__)

_TRACK_HEADER = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):\s*(#.*)?$")
_POINT_LINE = re.compile(r"^\s*-\s*\{.*\}\s*(#.*)?$")
_NAME = re.compile(r"\bname:\s*(?P<value>[A-Za-z0-9_.-]+)")
_DTYPE = re.compile(r"\bdtype:\s*(?P<value>[A-Za-z0-9_]+)")
_SHAPE = re.compile(r"\bshape:\s*(?P<value>\"(?:[^\"\\]|\\.)*\"|'[^']*'|\[[^\]]*\])")


@dataclass(frozen=True)
class PointFill:
    """One point of one track: what the campaign held and what B0 wrote (None: not filled)."""

    track: str
    name: str
    old_dtype: str
    old_shape: list[int] | str
    new_dtype: str | None
    new_shape: list[int] | None
    reason: str | None = None  # why it was not filled

    @property
    def changed(self) -> bool:
        return self.new_shape is not None and (
            self.new_shape != self.old_shape or self.new_dtype != self.old_dtype)

    def summary(self) -> str:
        where = f"{self.track}: {self.name}"
        if self.new_shape is None:
            return f"{where}: NOT FILLED: {self.reason}"
        if not self.changed:
            return f"{where}: unchanged ({self.old_dtype} {self.old_shape})"
        dtype = (f"dtype {self.old_dtype} -> {self.new_dtype}"
                 if self.new_dtype != self.old_dtype else f"dtype {self.new_dtype}")
        return f"{where}: {dtype}, shape {_shown(self.old_shape)} -> {self.new_shape}"


@dataclass(frozen=True)
class FillResult:
    fills: tuple[PointFill, ...]
    written: bool  # False for a dry run, or when nothing changed
    # The campaign's text with the fills applied (what a write would write; the bring-up's
    # patch is made from it).
    text: str = ""

    @property
    def unfilled(self) -> tuple[PointFill, ...]:
        return tuple(f for f in self.fills if f.new_shape is None)

    @property
    def changed(self) -> tuple[PointFill, ...]:
        return tuple(f for f in self.fills if f.changed)


def _shown(shape: list[int] | str) -> str:
    return str(shape) if isinstance(shape, list) else "<placeholder>"


def _dumped(dump_dir: Path, name: str) -> tuple[str, list[int]] | str:
    """(dtype, shape) of one dumped point, or why it cannot be read."""
    path = point_file(dump_dir, name)
    if not path.is_file():
        return f"no {path.name} in the dump folder"
    try:
        tensors = list(read_header(path).values())
    except TensorFileError as exc:
        return f"unreadable: {exc}"
    if len(tensors) != 1:
        return f"{path.name}: one tensor expected, found {len(tensors)}"
    return tensors[0].dtype, list(tensors[0].shape)


def _mp4_audio(mp4: Path | None) -> tuple[str, list[int]] | str:
    if mp4 is None:
        return "no --mp4 given (mp4.audio's shape is decoded from B0's MP4)"
    from ref2va_accept.media import probe  # noqa: PLC0415 - PyAV only when an MP4 is given

    try:
        found = probe(mp4)
    except MediaError as exc:
        return f"{mp4.name}: {exc}"
    if found.audio is None:
        return f"{mp4.name}: no audio stream"
    return "F32", [found.audio.channels, found.audio.samples_decoded]


def _lossless_tracks(tracks: dict[str, list[ComparisonPoint]], chosen: Sequence[str] | None,
                     display: str) -> list[str]:
    lossless = [t for t, points in tracks.items()
                if quality_class(t) == "lossless" and points]
    if not chosen:
        return lossless
    for track in chosen:
        if track not in lossless:
            raise CampaignError(f"{display}: --track {track!r}: expected a lossless track with "
                                f"comparison points ({', '.join(lossless) or 'none'})")
    return list(dict.fromkeys(chosen))


def _track_block(lines: list[str], track: str, display: str) -> tuple[int, int]:
    """Line span [start, end) of ``tracks.<track>`` in the file's text."""
    in_tracks = False
    start: int | None = None
    indent = 0
    for index, line in enumerate(lines):
        header = _TRACK_HEADER.match(line)
        stripped = line.strip()
        if start is not None:
            if stripped and not stripped.startswith("#") and \
                    len(line) - len(line.lstrip(" ")) <= indent:
                return start, index
            continue
        if header and header["indent"] == "":
            in_tracks = header["key"] == "tracks"
        elif in_tracks and header and header["key"] == track:
            start, indent = index, len(header["indent"])
    if start is None:
        raise CampaignError(f"{display}: tracks.{track}: not found in the file's text")
    return start, len(lines)


def _replace_value(pattern: re.Pattern[str], line: str, value: str) -> str:
    match = pattern.search(line)
    assert match is not None  # the caller checked that the line has the key
    return line[: match.start("value")] + value + line[match.end("value"):]


def _edit_line(line: str, dtype: str, shape: list[int]) -> str:
    line = _replace_value(_DTYPE, line, dtype)
    return _replace_value(_SHAPE, line, "[" + ", ".join(str(size) for size in shape) + "]")


def fill_points(campaign: str | os.PathLike[str], dump_dir: str | os.PathLike[str], *,
                tracks: Sequence[str] | None = None, mp4: str | os.PathLike[str] | None = None,
                force: bool = False, dry_run: bool = False) -> FillResult:
    """Fill the chosen lossless tracks' points from a dump; write unless ``dry_run``."""
    path = Path(campaign)
    display = os.fspath(campaign)
    folder = Path(dump_dir)
    if not folder.is_dir():
        raise TensorFileError(f"{folder.name or folder}: expected B0's dump folder, "
                              "found no such folder")
    lock = lock_path(path)
    if lock.exists() and not force:
        raise FreezeError(f"{display}: frozen ({lock.name} exists); filling its points now "
                          "would drift the frozen protocol. Pass --force to fill anyway "
                          "(and freeze again)")
    loaded = load_campaign(path)
    by_track: dict[str, list[ComparisonPoint]] = {
        str(t): list(track.comparison_points) for t, track in loaded.model.tracks.items()}
    chosen = _lossless_tracks(by_track, tracks, display)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    fills: list[PointFill] = []
    for track in chosen:
        start, end = _track_block(lines, track, display)
        rows = {}
        for index in range(start, end):
            if _POINT_LINE.match(lines[index]) and (name := _NAME.search(lines[index])):
                rows[name["value"]] = index
        for point in by_track[track]:
            found = (_mp4_audio(Path(mp4) if mp4 else None) if point.name == "mp4.audio"
                     else _dumped(folder, point.name) if point.source == "diagnostics"
                     else None)
            if found is None:  # mp4.video: fixed by the track's own frame count and size
                continue
            if isinstance(found, str) and point.name == "mp4.audio" and mp4 is None \
                    and isinstance(point.shape, list):
                continue  # already filled, and nothing given to refill it from
            if isinstance(found, str):
                fills.append(PointFill(track, point.name, point.dtype, point.shape, None, None,
                                       found))
                continue
            row = rows.get(point.name)
            if row is None or not _SHAPE.search(lines[row]) or not _DTYPE.search(lines[row]):
                fills.append(PointFill(
                    track, point.name, point.dtype, point.shape, None, None,
                    "its line is not a one-line flow mapping with dtype and shape; edit it by "
                    "hand"))
                continue
            dtype, shape = found
            lines[row] = _edit_line(lines[row], dtype, shape)
            fills.append(PointFill(track, point.name, point.dtype, point.shape, dtype, shape))
    result_text = "".join(lines)
    changed = any(f.changed for f in fills)
    if changed:
        _check_loads(path, result_text, fills)
    if changed and not dry_run:
        _replace(path, result_text)
    for fill in fills:
        log.info("fill-points: %s", fill.summary())
    return FillResult(tuple(fills), changed and not dry_run, result_text)


def _check_loads(path: Path, text: str, fills: list[PointFill]) -> None:
    """The edited text must load, and hold exactly what was filled; checked before any write."""
    # Beside the campaign: its relative paths (inputs, profiles) resolve from its folder.
    probe_path = path.with_name(f".{path.stem}.fill-points.yaml")
    try:
        probe_path.write_text(text, encoding="utf-8")
        loaded = load_campaign(probe_path)
    finally:
        probe_path.unlink(missing_ok=True)
    for fill in fills:
        if fill.new_shape is None:
            continue
        tracks = {str(t): track for t, track in loaded.model.tracks.items()}
        point = next(p for p in tracks[fill.track].comparison_points if p.name == fill.name)
        if point.shape != fill.new_shape or point.dtype != fill.new_dtype:
            raise CampaignError(f"{path}: tracks.{fill.track}.comparison_points: {fill.name} "
                                f"reads back as {point.dtype} {point.shape}, expected "
                                f"{fill.new_dtype} {fill.new_shape}; the file was not changed")


def _replace(path: Path, text: str) -> None:
    # A failed write leaves the campaign as it was and no partial copy beside it.
    try:
        atomic_write(path, text, suffix=".partial")
    except WriteFailed as exc:
        raise CampaignError(str(exc)) from exc.error


def report_lines(result: FillResult, *, dry_run: bool) -> list[str]:
    """The diff summary the command prints: every point, then what happened to the file."""
    lines = [fill.summary() for fill in result.fills]
    verb = "would change" if dry_run else "changed"
    lines.append(f"{len(result.changed)} point(s) {verb}, {len(result.unfilled)} not filled; "
                 + ("file written" if result.written else "file not written"))
    if result.unfilled:
        lines.append("not filled: " + ", ".join(f"{f.track}:{f.name}" for f in result.unfilled))
    return lines
