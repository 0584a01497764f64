"""Every track's inputs against their pins, on every run, before any engine starts.

Freezing and `verify` compare the campaign's files with its lock; a run on a campaign that is not
frozen (the CI reference campaign in a fresh checkout, a host campaign being filled) would
otherwise send whatever bytes lie at the pinned path: a missing file surfaced as a
FileNotFoundError once an engine was already up, and a file whose bytes are not its pin ran
silently. Each problem names the track, the field, the path (relative to the campaign, as
pinned) and both full hashes.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ref2va_accept.campaign._loaded import LoadedCampaign
from ref2va_accept.core import ArmRole, Check, CheckStatus, Reason, file_sha256, is_placeholder
from ref2va_accept.evidence import CheckResult

INPUT_FIELDS = ("prompt", "reference_image", "reference_audio")


@dataclass(frozen=True)
class InputProblem:
    """One track's input whose file is absent, unreadable or not the pinned bytes."""

    track: str
    field: str
    path: str  # relative to the campaign, as pinned
    expected: str
    found: str | None  # the file's sha256; None when it could not be read
    unreadable: str | None = None  # why it could not be read

    def line(self, tracks: Sequence[str] = ()) -> str:
        """One line: the track (or `tracks`, sharing the same problem), the field, the path, and
        both full hashes (or why the file could not be read)."""
        tracks = tuple(tracks) or (self.track,)
        named = f"track{'s' if len(tracks) > 1 else ''} {', '.join(tracks)}"
        where = f"{named}: inputs.{self.field}: {self.path}"
        if self.found is None:
            return f"{where}: {self.unreadable}; pinned sha256 {self.expected}"
        return f"{where}: pinned sha256 {self.expected}, found {self.found}"

    @property
    def _same(self) -> tuple[str, str, str, str | None, str | None]:
        return (self.field, self.path, self.expected, self.found, self.unreadable)

    def to_dict(self) -> dict[str, Any]:
        return {"track": self.track, "field": self.field, "path": self.path,
                "expected_sha256": self.expected, "found_sha256": self.found,
                "unreadable": self.unreadable}


def _read(path: Path) -> tuple[str | None, str | None]:
    """(sha256, None), or (None, why it could not be read)."""
    try:
        return file_sha256(path), None
    except FileNotFoundError:
        return None, "missing"
    except IsADirectoryError:
        return None, "a folder, not a file"
    except OSError as exc:
        return None, f"cannot read ({exc.strerror or exc})"


def input_problems(campaign: LoadedCampaign) -> list[InputProblem]:
    """Every input of every track that is not its pin, in the campaign's track order.

    Each file is read once, however many tracks share it. A placeholder path or sha256 is left
    to the checks of unfilled fields (no engine starts while an input is unfilled).
    """
    hashes: dict[Path, tuple[str | None, str | None]] = {}
    problems: list[InputProblem] = []
    for track_id, track in campaign.model.tracks.items():
        for name in INPUT_FIELDS:
            pinned = getattr(track.inputs, name)
            if pinned is None or is_placeholder(pinned.path) or is_placeholder(pinned.sha256):
                continue
            path = campaign.resolve(pinned.path)
            if path not in hashes:
                hashes[path] = _read(path)
            found, why = hashes[path]
            if found != pinned.sha256:
                problems.append(InputProblem(track_id, name, posixpath.normpath(pinned.path),
                                             pinned.sha256, found, why))
    return problems


def problem_lines(problems: Sequence[InputProblem]) -> list[str]:
    """One line per distinct problem; tracks sharing an input (and its problem) share a line."""
    grouped: dict[tuple[str, str, str, str | None, str | None], list[InputProblem]] = {}
    for problem in problems:
        grouped.setdefault(problem._same, []).append(problem)
    return [same[0].line([p.track for p in same]) for same in grouped.values()]


def input_checks(problems: Sequence[InputProblem]) -> list[CheckResult]:
    """Per track that a problem touches, one failing `inputs` check on B0
    (`protocol_deviation`) naming its problems: the run stops before any engine."""
    return [CheckResult(track_id, ArmRole.B0, Check.INPUTS, CheckStatus.FAIL,
                        Reason.PROTOCOL_DEVIATION,
                        "; ".join(p.line() for p in problems if p.track == track_id),
                        {"inputs": [p.to_dict() for p in problems if p.track == track_id]})
            for track_id in dict.fromkeys(p.track for p in problems)]
