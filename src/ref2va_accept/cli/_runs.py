"""`ref2va-accept`'s commands about a campaign's runs: plan (the budget before a
run), ledger (every attempt), merge (runs side by side, or a run's lanes), lanes (the split
`./ref2va campaign` runs) and review (the blind review sheet and its ratings). cli/_main.py
registers them with the others; errors and exit codes are cli/_main.py's."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from ref2va_accept.campaign import load_campaign
from ref2va_accept.cli._plan import run_plan
from ref2va_accept.core import EXIT_OK, CampaignError
from ref2va_accept.history import (
    LEDGER_ENV,
    LedgerError,
    MergeRefused,
    ReviewError,
    entry_json,
    ingest,
    ledger_path,
    merge,
    read_ledger,
    table_lines,
    write_review,
)
from ref2va_accept.planning import campaign_lanes

__all__ = ["add_run_commands"]

def _ledger_of(args: argparse.Namespace) -> Path:
    if args.file is not None:
        return Path(args.file)
    if os.environ.get(LEDGER_ENV):
        return Path(os.environ[LEDGER_ENV])
    return ledger_path(args.campaign)


def _cmd_plan(args: argparse.Namespace) -> int:
    args.ledger = _ledger_of(args)
    return run_plan(args)


def _cmd_ledger(args: argparse.Namespace) -> int:
    path = _ledger_of(args)
    if not Path(args.campaign).is_file():
        raise LedgerError(f"{args.campaign}: no such campaign file")
    record = read_ledger(path)
    if args.json:
        print(json.dumps({"file": str(path),
                          "entries": [entry_json(e) for e in record.entries],
                          "torn_tail": record.torn_tail}, indent=2))
        return EXIT_OK
    if not record.entries:
        print(f"{path.name}: no entries yet (a run of the campaign appends them at its end)")
        return EXIT_OK
    print("\n".join(table_lines(record.entries)))
    if record.torn_tail:
        print(f"{path.name}: its last line was cut short (a run killed while appending)")
    return EXIT_OK


def _cmd_merge(args: argparse.Namespace) -> int:
    output = args.output or Path(args.runs[0]).resolve().parent / (
        "merge-" + "+".join(Path(r).resolve().name for r in args.runs))
    report = merge(args.runs, output, allow_campaigns=args.allow_different_campaigns,
                   allow_hosts=args.allow_different_hosts, lanes=args.lanes)
    how = "as lanes of one campaign run" if args.lanes else "side by side"
    print(f"merged {len(args.runs)} runs {how}: {report} (and merge.json beside it)")
    return EXIT_OK


def _cmd_review(args: argparse.Namespace) -> int:
    if args.ingest is None:
        page = write_review(args.run_folder, args.output)
        print(f"review sheet: {page} (ratings.json beside it to fill by hand; key.json says "
              "which side is B0: keep it from the reviewer)")
        return EXIT_OK
    entry = ingest(args.run_folder, args.ingest, args.output)
    print(f"ingested {len(entry.ratings)} ratings by {entry.reviewer} into "
          f"{args.run_folder.name}/evidence.json (human_evaluation; no verdict reads it)"
          + (f"; not rated: {', '.join(entry.unrated_pairs)}" if entry.unrated_pairs else ""))
    for row in entry.summary:
        preferred = row.preferred
        print(f"  {row.track:<13} {row.candidate:<22} rated {row.rated}/{row.pairs}: "
              f"preferred B0 {preferred['b0']}, candidate {preferred['candidate']}, same "
              f"{preferred['same']}; visible differences {row.visible_differences or '-'}; "
              f"audio differences {row.audio_differences or '-'}")
    return EXIT_OK


def _cmd_lanes(args: argparse.Namespace) -> int:
    if args.count < 1:
        raise CampaignError(f"--count must be at least 1, not {args.count}")
    campaign = load_campaign(args.campaign)
    for lane in campaign_lanes(campaign, args.count):
        # One line per lane: its tracks (commas), a tab, its pytest -m expression.
        print(f"{','.join(lane.tracks)}\t{lane.marks}")
    return EXIT_OK


def add_run_commands(sub: Any) -> None:
    """The record's subcommands, on cli/_main.py's subparsers."""
    p = sub.add_parser("plan", help="a run's wall and logical-device hours against the "
                       "campaign's budget, before it starts (exit 1 when it would be refused)")
    p.add_argument("campaign", type=Path)
    p.add_argument("--track", dest="tracks", action="append", default=[], metavar="TRACK",
                   help="only these tracks (repeatable; default: every track)")
    p.add_argument("--file", type=Path, default=None,
                   help="the ledger to read what was spent from (as for `ledger`)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_cmd_plan)

    p = sub.add_parser("ledger", help="the campaign's record: every candidate attempt of every "
                       "run, supported, failed, inconclusive and abandoned alike")
    p.add_argument("campaign", type=Path)
    p.add_argument("--file", type=Path, default=None,
                   help="a ledger elsewhere than beside the campaign (pytest's --ledger; "
                        f"default ${LEDGER_ENV}, else <campaign>.ledger.jsonl)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_cmd_ledger)

    p = sub.add_parser("merge", help="several runs' verdicts side by side in one report, each "
                       "against its own B0 (never a ratio combined across runs)")
    p.add_argument("runs", type=Path, nargs="+", metavar="RUN",
                   help="a run folder (evidence/<run-id>) or its evidence.json")
    p.add_argument("--output", type=Path, default=None, metavar="DIR",
                   help="folder for report.html and merge.json (default: merge-<run ids> "
                        "beside the first run)")
    p.add_argument("--allow-different-campaigns", action="store_true",
                   help="merge runs of different frozen campaigns (the report says so)")
    p.add_argument("--allow-different-hosts", action="store_true",
                   help="merge runs whose host identity differs (the report says so)")
    p.add_argument("--lanes", action="store_true",
                   help="the runs are lanes of one campaign run (`./ref2va campaign`): each "
                        "judged other tracks, so each track has one column; refused when two "
                        "runs judged the same track")
    p.set_defaults(run=_cmd_merge, problems=(MergeRefused,))

    p = sub.add_parser("review", help="a blind side-by-side review sheet of a run's outputs "
                       "(B0 and candidate, same seed), or --ingest the ratings given back")
    p.add_argument("run_folder", type=Path, metavar="RUN",
                   help="a run folder (evidence/<run-id>)")
    p.add_argument("--output", type=Path, default=None, metavar="DIR",
                   help="the sheet's folder (default: RUN/review; refused when it exists)")
    p.add_argument("--ingest", type=Path, default=None, metavar="RATINGS",
                   help="ratings for the sheet in --output (default RUN/review): into the run's "
                        "evidence as human evaluation")
    p.set_defaults(run=_cmd_review, problems=(ReviewError,))

    p = sub.add_parser("lanes", help="the campaign's tracks split into lanes that `./ref2va "
                       "campaign` runs as concurrent sessions (the tracks that share B0's "
                       "instances together): a line per lane, its tracks and its pytest -m "
                       "expression (one lane when the instances hold devices)")
    p.add_argument("campaign", type=Path)
    p.add_argument("--count", type=int, default=2, help="at most this many lanes (default 2)")
    p.set_defaults(run=_cmd_lanes)
