"""`ref2va-accept scorers`: the VBench models' files on this machine (`check`, `standins`).

- ``scorers check [--campaign C | --dir VBENCH_CACHE] [--device cpu|npu|auto] [--json]``: for each
  model-based dimension, each file it needs, found or missing, its sha256 against the pin, built
  and run once (quality/check.py). Exit 0 only when every dimension is ready.
- ``scorers standins DIR [--names N,...] [--force]``: seeded stand-in checkpoints in the official
  formats, laid out as VBench's cache (quality/_standins.py), and the campaign lines that pin them.
- ``scorers standins --campaign C [--force]``: the stand-ins a campaign marks, written where it
  reads them and checked against its pins (exit 1 naming each that differs).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ref2va_accept.campaign import load_campaign
from ref2va_accept.cli._scorers_check import (
    FileCheck,
    check_weights,
    default_paths,
    dimension_rows,
    resolve_device,
)
from ref2va_accept.core import EXIT_OK, EXIT_PROBLEM, Ref2VAError
from ref2va_accept.quality import WEIGHT_NAMES, ScorerError

__all__ = ["add_scorer_commands"]


def _names(text: str | None) -> tuple[str, ...]:
    if not text:
        return WEIGHT_NAMES
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in WEIGHT_NAMES]
    if unknown:
        raise Ref2VAError(f"--names: {', '.join(unknown)} not among {', '.join(WEIGHT_NAMES)}")
    return names


def _cmd_check(args: argparse.Namespace) -> int:
    if args.campaign is not None:
        campaign = load_campaign(args.campaign)
        paths = campaign.scorer_weight_paths()
        pins, stand_ins = campaign.scorer_weight_pins(), campaign.scorer_stand_ins()
        source = f"campaign {args.campaign}"
    else:
        paths, pins, stand_ins = default_paths(Path(args.dir)), {}, frozenset()
        source = f"VBench cache {args.dir}"
    try:
        device = resolve_device(args.device)
    except ScorerError as exc:
        raise Ref2VAError(str(exc)) from None
    checks = check_weights(paths, pins, stand_ins, device=device)
    rows = dimension_rows(checks)
    ready = sum(1 for _, ok, _ in rows if ok)
    if args.json:
        print(json.dumps({"source": source, "device": device,
                          "dimensions": {d: {"ready": ok, "weights": [f.name for f in files]}
                                         for d, ok, files in rows},
                          "weights": {n: c.json_dict() for n, c in checks.items()}}, indent=2))
    else:
        print(f"scorers: {ready} of {len(rows)} model-based dimensions ready on {device} "
              f"({source})")
        for dimension, ok, files in rows:
            print(f"  {dimension}: {'ready' if ok else 'NOT READY'}")
            for f in files:
                print(f"    {_line(f)}")
    return EXIT_OK if ready == len(rows) else EXIT_PROBLEM


def _line(check: FileCheck) -> str:
    parts = [check.name, "-" if check.path is None else check.path.name]
    parts.append("found" if check.found else "MISSING")
    if check.sha256:
        pin = ("" if check.pin is None else
               ", pin matches" if check.pin.lower() == check.sha256 else ", PIN DIFFERS")
        parts.append(f"sha256 {check.sha256[:16]}...{pin}")
    if check.stand_in:
        parts.append("STAND-IN (seeded random weights, not VBench's; "
                     + ("declared by the campaign)" if check.stand_in_declared
                        else "recognised by its sha256)"))
    if check.network:
        parts.append(check.network)
    if check.forward:
        parts.append(f"forward {check.forward}")
    if check.problem:
        parts.append(f"problem: {check.problem}")
    return "  ".join(parts)


def _campaign_standins(campaign_path: Path, force: bool) -> int:
    """The stand-ins a campaign marks `stand_in: true`, written where it reads them, each checked
    against its pin: exit 0 when every one matches, 1 naming each that does not."""
    from ref2va_accept.quality import VBENCH_LAYOUT, make_standins  # noqa: PLC0415

    campaign = load_campaign(campaign_path)
    names = sorted(campaign.scorer_stand_ins())
    if not names:
        print(f"{campaign_path}: no scorer weights marked stand_in: true; nothing to write")
        return EXIT_OK
    paths, pins = campaign.scorer_weight_paths(), campaign.scorer_weight_pins()
    problems = []
    for name in names:
        path = paths.get(name)
        if path is None or not path.as_posix().endswith(VBENCH_LAYOUT[name]):
            problems.append(f"{name}: a stand-in is written in VBench's layout under "
                            "scorer_weights_dir, and this campaign reads it elsewhere")
            continue
        folder = Path(path.as_posix().removesuffix(VBENCH_LAYOUT[name]))
        try:
            made = make_standins(folder, [name], force=force)[0]
        except ScorerError as exc:
            problems.append(str(exc))
            continue
        pinned = pins.get(name)
        if pinned is None:
            problems.append(f"{name}: {made.path.name} written but not pinned (sha256 "
                            f"{made.sha256})")
        elif made.sha256 != pinned.lower():
            problems.append(f"{name}: {made.path.name} has sha256 {made.sha256}, the campaign "
                            f"pins {pinned}: another torch or numpy builds other bytes; "
                            "re-pin it, or --force to rebuild a stale file")
        else:
            print(f"{name}: {made.path.name} matches its pin ({made.sha256[:12]}...)")
    for line in problems:
        print(f"ref2va-accept scorers standins: {line}")
    return EXIT_PROBLEM if problems else EXIT_OK


def _cmd_standins(args: argparse.Namespace) -> int:
    from ref2va_accept.quality import ScorerError, make_standins  # noqa: PLC0415

    if args.campaign is not None:
        if args.folder is not None or args.names:
            raise Ref2VAError("scorers standins: --campaign takes the folder and the names from "
                              "the campaign; give a FOLDER or --campaign, not both")
        return _campaign_standins(args.campaign, args.force)
    if args.folder is None:
        raise Ref2VAError("scorers standins: give a FOLDER or --campaign CAMPAIGN")
    names = _names(args.names)
    made, skipped = [], []
    for name in names:
        try:
            made += make_standins(Path(args.folder), [name], force=args.force)
        except ScorerError as exc:
            if args.names:  # asked for by name: not making it is an error
                raise Ref2VAError(str(exc)) from None
            skipped.append(f"# not made: {exc}")
    print(f"# stand-in checkpoints (seeded random weights) in {args.folder}; campaign lines:")
    for line in skipped:
        print(line)
    print("scorer_weights:")
    for s in made:
        print(f"  {s.name}: {{sha256: \"{s.sha256}\", stand_in: true}}")
    return EXIT_OK


def add_scorer_commands(sub: Any) -> None:
    p = sub.add_parser("scorers", help="the VBench models' checkpoint files: check that each "
                       "dimension can score here, or write seeded stand-ins")
    scorers = p.add_subparsers(dest="scorers_command", required=True)
    c = scorers.add_parser("check", help="each model-based dimension: its files found, hashed, "
                           "built and run once")
    where = c.add_mutually_exclusive_group(required=True)
    where.add_argument("--campaign", type=Path, help="the files the campaign names and pins")
    where.add_argument("--dir", help="a VBench cache folder (~/.cache/vbench), in its layout")
    c.add_argument("--device", choices=("cpu", "npu", "auto"), default="cpu",
                   help="where the forward pass runs (npu: through torch_npu)")
    c.add_argument("--json", action="store_true", help="print the checks as JSON")
    c.set_defaults(run=_cmd_check)
    s = scorers.add_parser("standins", help="write seeded stand-in checkpoints in the official "
                           "formats, in VBench's cache layout")
    s.add_argument("folder", nargs="?", help="where to write them (laid out as VBench's cache)")
    s.add_argument("--campaign", type=Path, help="write the stand-ins this campaign marks "
                   "stand_in: true where it reads them, and check each against its pin")
    s.add_argument("--names", help="comma-separated weights names (default: all that can be "
                   "made with the libraries installed here)")
    s.add_argument("--force", action="store_true", help="rewrite files that exist")
    s.set_defaults(run=_cmd_standins)

