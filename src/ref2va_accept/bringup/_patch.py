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

# Above the `measured` block the patch inserts.
MEASURED_COMMENT = ("What the host's bring-up measured: each price -> the bring-up run "
                    "(`ref2va-accept plan` labels them measured)")


class PatchError(Ref2VAError):
    """One value could not be set in the text (its key was not found where expected)."""


@dataclass(frozen=True)
class ScalarEdit:
    keys: tuple[str, ...]  # e.g. ("protocol", "expected_start_s", "5s")
    value: Any  # a number or a string (or a mapping, written on one line), as YAML
    why: str  # what measured it
    # the price it sets, as `measured` records it (campaign.MEASURED_FIELDS, with its duration
    # class): once set, the patch records it there with the bring-up's run id
    measured_as: str | None = None
    comment: str = ""  # a comment line above the key, when it is inserted

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
    dumped = yaml.safe_dump(value, default_flow_style=True, width=10**9)  # one line
    return dumped.strip().removesuffix("...").strip()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def set_scalar(text: str, keys: Sequence[str], value: Any) -> str:
    """`text` with the block-mapping scalar at `keys` set to `value`, its comment kept."""
    lines = text.splitlines(keepends=True)
    parent_row = _row_of(lines, keys[:-1]) if len(keys) > 1 else -1
    if parent_row is None:
        missing = next(keys[:depth] for depth in range(1, len(keys))
                       if _row_of(lines, keys[:depth]) is None)
        raise PatchError(f"{'.'.join(missing)}: not found as a block mapping key")
    row = _row_of(lines, keys)
    if row is None and len(keys) > 1:
        # `parent: {key: value, ...}`: a flow mapping on the parent's line
        return _set_in_flow(lines, parent_row, keys[-1], value, keys)
    if row is None:
        raise PatchError(f"{'.'.join(keys)}: not found as a block mapping key")
    pattern = re.compile(r"^(?P<head>\s*(?P<q>[\"']?)" + re.escape(keys[-1])
                         + r"(?P=q)\s*:)(?P<rest>.*?)(?P<nl>\r?\n?)$")
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


def _key(key: str) -> str:
    """A mapping key as the campaign files write it: quoted when YAML would read it otherwise
    (a duration class such as 5s stays a string either way; quoted like the files do)."""
    return f'"{key}"' if key[:1].isdigit() else key


def _block_end(lines: list[str], row: int) -> int:
    """The index after the last content line of the block under `row` (-1: the whole file)."""
    indent = _indent(lines[row]) if row >= 0 else -1
    last = row
    for index in range(row + 1, len(lines)):
        if not _content(lines[index]):
            continue
        if _indent(lines[index]) <= indent:
            break
        last = index
    return last + 1


def set_value(text: str, keys: Sequence[str], value: Any, comment: str = "") -> str:
    """`text` with the value at `keys` set: the scalar replaced where the key is there
    (`set_scalar`), else the missing keys inserted at the end of the deepest mapping that
    exists, as block lines (a one-line flow mapping gets the one key it lacks), `comment` above
    the first inserted key."""
    try:
        return set_scalar(text, keys, value)
    except PatchError:
        pass
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    row, depth = -1, 0
    for depth in range(len(keys), 0, -1):
        found = _row_of(lines, keys[:depth])
        if found is not None:
            row = found
            break
    else:
        depth = 0
    head = lines[row] if row >= 0 else ""
    rest = keys[depth:]
    if row >= 0 and re.search(r":\s*\{.*\}\s*(#.*)?$", head.rstrip("\r\n")):
        if len(rest) != 1:
            # Deeper than one key: the mapping is written out as block lines first.
            lines[row:row + 1] = _as_block(head, keys[depth - 1])
            return set_value("".join(lines), keys, value, comment)
        close = head.rindex("}")
        inner = head[head.index("{") + 1:close].strip()
        lines[row] = (head[:close].rstrip() + (", " if inner else "")
                      + f"{_key(rest[0])}: {_yaml_scalar(value)}" + head[close:])
        return "".join(lines)
    if row >= 0 and not re.search(r":\s*(#.*)?$", head.rstrip("\r\n")):
        raise PatchError(f"{'.'.join(keys[:depth])}: holds a value, not a mapping")
    end = _block_end(lines, row)
    children = [line for line in lines[row + 1:end] if _content(line)]
    indent = _indent(children[0]) if children else (_indent(head) + 2 if row >= 0 else 0)
    new = [f"{' ' * indent}# {comment}\n"] if comment else []
    if row < 0 and lines and lines[-1].strip():
        new.insert(0, "\n")
    for n, key in enumerate(rest):
        pad = " " * (indent + 2 * n)
        new.append(f"{pad}{_key(key)}:" + (f" {_yaml_scalar(value)}\n" if n == len(rest) - 1
                                          else "\n"))
    lines[end:end] = new
    return "".join(lines)


def _as_block(line: str, key: str) -> list[str]:
    """A `key: {a: 1, b: 2}  # comment` line as block lines (`key:  # comment`, then one line
    per entry, indented two more)."""
    match = re.match(r"^(?P<head>\s*[\"']?" + re.escape(key) + r"[\"']?\s*:)\s*(?P<flow>\{.*\})"
                     r"(?P<comment>\s*#.*)?$", line.rstrip("\r\n"))
    if match is None:
        raise PatchError(f"{key}: not a one-line flow mapping")
    data = yaml.safe_load(match["flow"])
    indent = " " * (_indent(line) + 2)
    body = yaml.safe_dump(data, default_flow_style=False, sort_keys=False, width=10**9)
    return [match["head"] + (match["comment"] or "") + "\n",
            *(indent + row + "\n" for row in body.splitlines())]


def _row_of(lines: list[str], keys: Sequence[str]) -> int | None:
    """The line of the block-mapping key at `keys`, or None."""
    start, end, parent = 0, len(lines), -1
    row = -1
    for key in keys:
        pattern = re.compile(r"^\s*([\"']?)" + re.escape(key) + r"\1\s*:")
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
        if row < 0:
            return None
        parent, start = _indent(lines[row]), row + 1
        end = next((i for i in range(start, len(lines))
                    if _content(lines[i]) and _indent(lines[i]) <= parent), len(lines))
    return row


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
          profile_edits: Sequence[tuple[Path, tuple[str, ...], str, str]] = (),
          run_id: str | None = None) -> CampaignPatch:
    """The campaign with its points filled from `dumps` ((track, dump folder, B0's MP4)) and
    `edits` applied, and each profile of `profile_edits` ((path, keys, value, why)) edited.

    Every edit is tried on its own: one that fails is recorded in `skipped` and the others go on.
    Each price set (an edit's `measured_as`) is recorded under `measured` with `run_id`, so that
    `plan` says it was measured and by which bring-up.
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
        measured: list[ScalarEdit] = []
        fresh = "measured" not in (yaml.safe_load(text) or {})
        for edit in edits:
            try:
                candidate = set_value(text, edit.keys, edit.value, edit.comment)
                if _get(yaml.safe_load(candidate), edit.keys) != edit.value:
                    raise PatchError(f"{edit.dotted}: reads back otherwise")
            except (PatchError, KeyError, TypeError, yaml.YAMLError) as exc:
                patch.skipped.append(f"{edit.dotted}: {exc}")
                continue
            if candidate != text:
                patch.changes.append(f"{edit.dotted}: {_yaml_scalar(edit.value)} ({edit.why})")
            text = candidate
            if edit.measured_as is not None and run_id is not None:
                measured.append(ScalarEdit(
                    ("measured", edit.measured_as), run_id, "the bring-up that measured it",
                    comment=MEASURED_COMMENT if fresh and not measured else ""))
        for edit in measured:
            try:
                text = set_value(text, edit.keys, edit.value, edit.comment)
                patch.changes.append(f"{edit.dotted}: {edit.value} ({edit.why})")
            except PatchError as exc:
                patch.skipped.append(f"{edit.dotted}: {exc}")
        if text != old:
            scratch.write_text(text, encoding="utf-8")
            try:
                load_campaign(scratch)
            except Ref2VAError as exc:
                patch.skipped.append(f"the patched campaign does not load ({exc}); nothing of "
                                     "it is in the patch")
                text = old
                patch.changes = [c for c in patch.changes if not c.startswith(
                    ("tracks.", "protocol.", "devices.", "baseline.", "scoring.", "measured."))]
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
