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
from pathlib import Path

from ref2va_accept.campaign._loaded import LoadedCampaign
from ref2va_accept.core import ArmRole, Check, CheckStatus, Reason, file_sha256, is_placeholder
from ref2va_accept.evidence import AnyCheck, InputProblem, new_check

INPUT_FIELDS = ("prompt", "reference_image", "reference_audio")


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
                problems.append(InputProblem(track=track_id, field=name,
                                             path=posixpath.normpath(pinned.path),
                                             expected_sha256=pinned.sha256, found_sha256=found,
                                             unreadable=why))
    return problems


def problem_lines(problems: Sequence[InputProblem]) -> list[str]:
    """One line per distinct problem; tracks sharing an input (and its problem) share a line."""
    grouped: dict[tuple[str, str, str, str | None, str | None], list[InputProblem]] = {}
    for problem in problems:
        same = (problem.field, problem.path, problem.expected_sha256, problem.found_sha256,
                problem.unreadable)
        grouped.setdefault(same, []).append(problem)
    return [same[0].line([p.track for p in same]) for same in grouped.values()]


def input_checks(problems: Sequence[InputProblem]) -> list[AnyCheck]:
    """Per track that a problem touches, one failing `inputs` check on B0
    (`protocol_deviation`) naming its problems: the run stops before any engine."""
    return [new_check(track_id, ArmRole.B0, Check.INPUTS, CheckStatus.FAIL,
                      Reason.PROTOCOL_DEVIATION,
                      "; ".join(p.line() for p in problems if p.track == track_id),
                      {"inputs": [p.json_dict() for p in problems if p.track == track_id]})
            for track_id in dict.fromkeys(p.track for p in problems)]
