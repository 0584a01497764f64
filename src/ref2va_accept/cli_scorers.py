"""`ref2va-accept scorers ...`: the VBench models' files on this machine.

- ``scorers check [--campaign C | --dir VBENCH_CACHE] [--device cpu|npu|auto] [--json]``: for each
  model-based dimension, each file it needs, found or missing, its sha256 against the pin, built
  and run once (quality/check.py). Exit 0 only when every dimension is ready.
- ``scorers standins DIR [--names N,...] [--force]``: seeded stand-in checkpoints in the official
  formats, laid out as VBench's cache (quality/standins.py), and the campaign lines that pin them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .campaign import load_campaign
from .errors import EXIT_OK, EXIT_PROBLEM, Ref2VAError
from .weight_names import WEIGHT_NAMES

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
    # The quality package loads OpenCV and scipy: only for this command, not every command.
    from .quality.check import (  # noqa: PLC0415
        check_weights,
        default_paths,
        dimension_rows,
        resolve_device,
    )
    from .quality.registry import ScorerError  # noqa: PLC0415

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
                          "weights": {n: c.to_dict() for n, c in checks.items()}}, indent=2))
    else:
        print(f"scorers: {ready} of {len(rows)} model-based dimensions ready on {device} "
              f"({source})")
        for dimension, ok, files in rows:
            print(f"  {dimension}: {'ready' if ok else 'NOT READY'}")
            for f in files:
                print(f"    {_line(f)}")
    return EXIT_OK if ready == len(rows) else EXIT_PROBLEM


def _line(check: Any) -> str:
    parts = [check.name, "-" if check.path is None else check.path.name]
    parts.append("found" if check.found else "MISSING")
    if check.sha256:
        pin = ("" if check.pin is None else
               ", pin matches" if check.pin.lower() == check.sha256 else ", PIN DIFFERS")
        parts.append(f"sha256 {check.sha256[:16]}...{pin}")
    if check.stand_in:
        parts.append("stand-in")
    if check.library:
        parts.append(check.library)
    if check.forward:
        parts.append(f"forward {check.forward}")
    if check.problem:
        parts.append(f"problem: {check.problem}")
    return "  ".join(parts)


def _cmd_standins(args: argparse.Namespace) -> int:
    from .quality.registry import ScorerError  # noqa: PLC0415
    from .quality.standins import make_standins  # noqa: PLC0415

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
    s.add_argument("folder", help="where to write them (laid out as VBench's cache)")
    s.add_argument("--names", help="comma-separated weights names (default: all that can be "
                   "made; dreamsim cannot)")
    s.add_argument("--force", action="store_true", help="rewrite files that exist")
    s.set_defaults(run=_cmd_standins)

