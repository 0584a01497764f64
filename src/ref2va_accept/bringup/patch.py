"""The bring-up's measured values as a patch the operator reviews and applies before freezing.

The campaign (and, where the attention backend must change, the launch profiles) is edited as
text, line by line, so its comments stay; the edited campaign must load and read back every value
set, or the edit is left out and said so. The patch is a unified diff (`git apply` or `patch -p1`
in the folder it names).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ref2va_accept.campaign import fill_points, load_campaign
from ref2va_accept.core import Ref2VAError


class PatchError(Ref2VAError):
    """One value could not be set in the text (its key was not found where expected)."""


@dataclass(frozen=True)
class ScalarEdit:
    keys: tuple[str, ...]  # e.g. ("protocol", "expected_start_s", "5s")
    value: Any  # a number or a string, written as YAML
    why: str  # what measured it

    @property
    def dotted(self) -> str:
        return ".".join(self.keys)


@dataclass
class CampaignPatch:
    """What the patch changes and what it could not."""

    files: dict[Path, tuple[str, str]] = field(default_factory=dict)  # path -> (old, new)
    changes: list[str] = field(default_factory=list)  # one line per value set
    skipped: list[str] = field(default_factory=list)  # one line per value not set, and why

    def diff(self, base: Path) -> str:
        out: list[str] = []
        for path, (old, new) in sorted(self.files.items()):
            if old == new:
                continue
            rel = os.path.relpath(path, base).replace(os.sep, "/")
            out += difflib.unified_diff(old.splitlines(keepends=True),
                                        new.splitlines(keepends=True),
                                        f"a/{rel}", f"b/{rel}")
        return "".join(out)


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) and not value.is_integer() else \
            str(int(value))
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def set_scalar(text: str, keys: Sequence[str], value: Any) -> str:
    """`text` with the block-mapping scalar at `keys` set to `value`, its comment kept."""
    lines = text.splitlines(keepends=True)
    start, end, parent = 0, len(lines), -1
    row = parent_row = -1
    for depth, key in enumerate(keys):
        pattern = re.compile(r"^(?P<head>\s*(?P<q>[\"']?)" + re.escape(key)
                             + r"(?P=q)\s*:)(?P<rest>.*?)(?P<nl>\r?\n?)$")
        row = -1
        child = None
        for index in range(start, end):
            line = lines[index]
            if not _content(line):
                continue
            if _indent(line) <= parent:
                end = index
                break
            if child is None:
                child = _indent(line)
            if _indent(line) == child and pattern.match(line):
                row = index
                break
        if row < 0 and depth == len(keys) - 1 and depth > 0:
            # `parent: {key: value, ...}`: a flow mapping on the parent's line
            return _set_in_flow(lines, parent_row, key, value, keys)
        if row < 0:
            raise PatchError(f"{'.'.join(keys[:depth + 1])}: not found as a block mapping key")
        if depth < len(keys) - 1:
            parent_row = row
            parent, start = _indent(lines[row]), row + 1
            end = next((i for i in range(start, len(lines))
                        if _content(lines[i]) and _indent(lines[i]) <= parent), len(lines))
    match = pattern.match(lines[row])
    assert match is not None
    rest = match["rest"]
    comment = ""
    found = re.search(r"\s#", rest)
    if found:
        comment = rest[found.start():]
        old_width = len(match["head"]) + found.start()
    new_value = " " + _yaml_scalar(value)
    if comment:
        pad = max(old_width - len(match["head"]) - len(new_value), 0)
        new_value += " " * pad
    lines[row] = match["head"] + new_value + comment + match["nl"]
    return "".join(lines)


def _set_in_flow(lines: list[str], row: int, key: str, value: Any, keys: Sequence[str]) -> str:
    line = lines[row]
    pattern = re.compile(r"(?P<lead>[{,]\s*(?P<q>[\"']?)" + re.escape(key)
                         + r"(?P=q)\s*:\s*)(?P<value>[^,}]*?)(?P<trail>\s*[,}])")
    if "{" not in line or not pattern.search(line):
        raise PatchError(f"{'.'.join(keys)}: not found as a block or one-line flow mapping key")
    lines[row] = pattern.sub(lambda m: m["lead"] + _yaml_scalar(value) + m["trail"], line,
                             count=1)
    return "".join(lines)


def _get(data: Any, keys: Sequence[str]) -> Any:
    for key in keys:
        data = data[key]
    return data


def build(campaign_path: Path, *, dumps: Sequence[tuple[str, Path, Path | None]],
          edits: Sequence[ScalarEdit],
          profile_edits: Sequence[tuple[Path, tuple[str, ...], str, str]] = ()
          ) -> CampaignPatch:
    """The campaign with its points filled from `dumps` ((track, dump folder, B0's MP4)) and
    `edits` applied, and each profile of `profile_edits` ((path, keys, value, why)) edited.

    Every edit is tried on its own: one that fails is recorded in `skipped` and the others go on.
    """
    patch = CampaignPatch()
    old = campaign_path.read_text(encoding="utf-8")
    text = old
    # Filled on a copy beside the campaign (its relative paths resolve from its folder).
    scratch = campaign_path.with_name(f".{campaign_path.stem}.bringup.yaml")
    try:
        for track, folder, mp4 in dumps:
            scratch.write_text(text, encoding="utf-8")
            try:
                result = fill_points(scratch, folder, tracks=[track], mp4=mp4, force=True,
                                     dry_run=True)
            except Ref2VAError as exc:
                patch.skipped.append(f"tracks.{track}.comparison_points: {exc}")
                continue
            text = result.text or text
            for fill in result.changed:
                patch.changes.append(f"tracks.{track}.comparison_points {fill.name}: "
                                     f"{fill.new_dtype} {fill.new_shape} (B0's dump)")
            for fill in result.unfilled:
                patch.skipped.append(f"tracks.{track}.comparison_points {fill.name}: "
                                     f"{fill.reason}")
        for edit in edits:
            try:
                candidate = set_scalar(text, edit.keys, edit.value)
                if _get(yaml.safe_load(candidate), edit.keys) != edit.value:
                    raise PatchError(f"{edit.dotted}: reads back otherwise")
            except (PatchError, KeyError, TypeError, yaml.YAMLError) as exc:
                patch.skipped.append(f"{edit.dotted}: {exc}")
                continue
            if candidate != text:
                patch.changes.append(f"{edit.dotted}: {_yaml_scalar(edit.value)} ({edit.why})")
            text = candidate
        if text != old:
            scratch.write_text(text, encoding="utf-8")
            try:
                load_campaign(scratch)
            except Ref2VAError as exc:
                patch.skipped.append(f"the patched campaign does not load ({exc}); nothing of "
                                     "it is in the patch")
                text = old
                patch.changes = [c for c in patch.changes if not c.startswith(
                    ("tracks.", "protocol.", "devices.", "baseline."))]
    finally:
        scratch.unlink(missing_ok=True)
    patch.files[campaign_path] = (old, text)
    for path, keys, value, why in profile_edits:
        before = patch.files.get(path, (path.read_text(encoding="utf-8"),) * 2)
        try:
            after = set_scalar(before[1], keys, value)
        except PatchError as exc:
            patch.skipped.append(f"{path.name}: {exc}")
            continue
        patch.files[path] = (before[0], after)
        patch.changes.append(f"{path.name}: {'.'.join(keys)}: {value} ({why})")
    return patch
