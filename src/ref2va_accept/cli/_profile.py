"""`ref2va-accept profile FOLDER [--baseline FOLDER]`: read a folder of profiles made by hand (a
Chrome trace per rank, or torch_npu's ``*_ascend_pt`` folders on the 910C, analysed here first
where torch_npu imports) and print what the report's Profiles section shows: per rank the step's
split, the top operators with shapes, communication, host-device copies and memory with
definitions, which ranks profiled which steps, and, with ``--baseline``, the folder beside B0's.

Exit codes: 0 every expected rank read; 1 the profile is open (a rank missing, not analysed or
unreadable: each named); 2 a folder that does not exist or holds no profile at all.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from pathlib import Path
from typing import Any

from ref2va_accept.arms import with_comparison
from ref2va_accept.core import EXIT_OK, EXIT_PROBLEM, Ref2VAError
from ref2va_accept.evidence import Profile
from ref2va_accept.profiles import profile_lines, read_profiles
from ref2va_accept.report import profile_html

__all__ = ["add_command"]

BY_HAND = "by hand"


class ProfileInputError(Ref2VAError):
    """A folder that cannot be read as profiles at all (exit 2, through main)."""


def add_command(sub: Any) -> None:
    p = sub.add_parser("profile", help="read a folder of profiles (Chrome traces, or torch_npu's "
                       "*_ascend_pt folders): operators with shapes, communication, copies, "
                       "memory and rank coverage; with --baseline, beside B0's")
    p.add_argument("folder", type=Path, help="the arm's profiles (searched recursively)")
    p.add_argument("--baseline", type=Path, metavar="FOLDER",
                   help="B0's profiles of the same track, to set the folder beside")
    p.add_argument("--ranks", metavar="N|R,R,...",
                   help="the ranks expected: a count (4 = ranks 0-3) or a list; default: the "
                   "ranks the profiles' own metadata names, else those found (then a missing "
                   "rank cannot be seen)")
    p.add_argument("--track", default=BY_HAND,
                   help="the track, for the record (default: %(default)s)")
    p.add_argument("--arm", help="the arm's name (default: the folder's name)")
    p.add_argument("--top", type=int, default=10, help="operators per rank in the text")
    p.add_argument("--no-analyse", action="store_true",
                   help="do not run torch_npu's offline analysis on raw folders")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the records as JSON")
    p.add_argument("--html", type=Path, metavar="FILE",
                   help="also write the report's Profiles section as a page")
    p.set_defaults(run=_run)


def _ranks(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ProfileInputError(f"--ranks {text!r}: a count or comma-separated ranks") from None
    if len(values) == 1 and "," not in text:
        return list(range(values[0]))
    return values


def _read(folder: Path, arm: str, track: str, ranks: list[int] | None,
          analyse: bool) -> tuple[Profile, list[str]]:
    if not folder.is_dir():
        raise ProfileInputError(f"{folder}: not a folder")
    read = read_profiles(folder, folder.parent, ranks, analyse=analyse)
    if not read.coverage:
        raise ProfileInputError(f"{folder}: no profile in it (no trace_rank<N>.json, no "
                                "*_ascend_pt folder)")
    expected = ranks if ranks is not None else sorted(c.rank for c in read.coverage)
    said = [] if ranks is not None or any(c.status == "missing" for c in read.coverage) else [
        f"{arm}: the ranks expected were taken from what was found ({expected}): pass --ranks "
        "to see a missing rank"]
    return read.profile(track=track, arm=arm, expected=expected, instance=BY_HAND), said


def _page(entries: list[Profile]) -> str:
    title = " / ".join(f"{e.track} {e.arm}" for e in entries)
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>Profiles: {html.escape(title)}</title></head><body>"
            "<h1>Profiles</h1><p>Read by <code>ref2va-accept profile</code>; evidence, not a "
            "verdict. File links are relative to the folder read's parent.</p>"
            + "".join(profile_html(e, "h2") for e in entries) + "</body></html>\n")


def _run(args: argparse.Namespace) -> int:
    ranks = _ranks(args.ranks)
    analyse = not args.no_analyse
    entries: list[Profile] = []
    said: list[str] = []
    if args.baseline is not None:
        b0, notes = _read(args.baseline, "b0", args.track, ranks, analyse)
        entries.append(b0)
        said += notes
    arm, notes = _read(args.folder, args.arm or args.folder.name, args.track, ranks, analyse)
    said += notes
    entries.append(with_comparison(arm, entries))
    lines = [line for entry in entries for line in profile_lines(entry, args.top)]
    sys.stdout.write("".join(f"{line}\n" for line in lines + [f"note: {s}" for s in said]))
    if args.json is not None:
        args.json.write_text(json.dumps({"profiles": [e.json_dict() for e in entries]},
                                        indent=2) + "\n", encoding="utf-8")
    if args.html is not None:
        args.html.write_text(_page(entries), encoding="utf-8")
    return EXIT_OK if all(e.status == "summarized" for e in entries) else EXIT_PROBLEM

