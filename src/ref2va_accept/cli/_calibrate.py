"""``ref2va-accept calibrate CAMPAIGN``: the campaign's frozen latency protocol and its simulated
error rates, each with its exact 95% interval.

It prints the protocol, a table per design and instance spread, the cells the rule is frozen from
(each with the 95% upper bound of its false `supported` rate), whether that shows the claim of at
most 5% in every one-attempt cell, what the frozen confidence costs in power against other
confidences on the same simulated runs, the gate on the first latency instance, and the
futility stop's savings.

The command line is here: its arguments, their parsing and their checks. The simulations and
their text tables are the planning stage's (planning/_calibration.py, _calibration_cells.py,
_calibration_text.py), imported from `ref2va_accept.planning`.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ref2va_accept.core import EXIT_OK, Ref2VAError
from ref2va_accept.planning import (
    Noise,
    claim,
    claim_at,
    claim_lines,
    default_cells,
    design_label,
    format_cells,
    format_table,
    futility,
    hosting_lines,
    protocol_lines,
    request_design_before,
    run_cells,
    table,
)
from ref2va_accept.timing import candidate_schedule

TRIALS = 40_000  # per cell: a rate of 4.5% has a 95% upper bound near 4.7%
COMPARE = "0.95,0.955"  # the confidences the frozen one is priced against (0.955: until issue 41)


def add_command(sub: Any) -> None:
    p = sub.add_parser("calibrate", help="simulate the campaign's latency protocol: false "
                       "'supported' at the target with its 95%% upper bound, and power, beside "
                       "the older ABA design")
    p.add_argument("campaign", type=Path)
    p.add_argument("--trials", type=int, default=TRIALS, help="simulated runs per cell")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--within-sd", default="0.01", help="request-to-request sd inside an instance "
                   "(a fraction: 0.01 = 1%%)")
    p.add_argument("--instance-sd", default="0,0.01,0.03,0.05",
                   help="comma-separated instance-to-instance sds, one row each")
    p.add_argument("--ratios", default="0.45,0.40",
                   help="comma-separated true ratios at which to report power")
    p.add_argument("--drift", default="0", help="linear drift per started instance (fraction)")
    p.add_argument("--candidate", help="whose instance order to simulate (the order seed draws "
                   "one per candidate; it matters under drift); default: the first candidate")
    p.add_argument("--exact", action="store_true",
                   help="judge every trial with replication.decide itself (slower)")
    p.add_argument("--futility-trials", type=int, default=200,
                   help="runs per true ratio for the futility stop's savings (0: leave out)")
    p.add_argument("--no-cells", action="store_true",
                   help="leave out the cells table (unequal spreads, heavy tails, drift, "
                   "several candidates on one B0, reruns), the claim and its price")
    p.add_argument("--compare-confidence", default=COMPARE, metavar="C,...",
                   help="confidences to price the frozen one against: the worst cell, whether "
                   "the claim is shown, and power, on the same simulated runs ('' leaves it "
                   f"out; default {COMPARE})")
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    sys.stdout.write("\n".join(run_command(args)) + "\n")
    return EXIT_OK


def _numbers(flag: str, text: str, *, positive: bool = False) -> list[float]:
    values = []
    for item in text.split(","):
        try:
            value = float(item)
        except ValueError:
            raise Ref2VAError(f"{flag} expects comma-separated numbers, got {item.strip()!r} "
                              f"in {text!r}") from None
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            kind = "positive" if positive else "non-negative"
            raise Ref2VAError(f"{flag}: {item.strip()!r} is not a {kind} finite number")
        values.append(value)
    return values


def _one(flag: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise Ref2VAError(f"{flag} expects a number, got {text!r}") from None
    if not math.isfinite(value):
        raise Ref2VAError(f"{flag}: {text!r} is not a finite number")
    return value


def _confidences(text: str, frozen: float) -> list[float]:
    if not text.strip():
        return []
    values = _numbers("--compare-confidence", text, positive=True)
    for value in values:
        if not 0.5 < value < 1:
            raise Ref2VAError(f"--compare-confidence: {value:g} is not between 0.5 and 1 "
                              "(a one-sided confidence at each end)")
    return [v for v in dict.fromkeys(values) if v != frozen]


def run_command(args: argparse.Namespace) -> list[str]:
    """`ref2va-accept calibrate`: the campaign's protocol and its simulated error rates."""
    from ref2va_accept.campaign import load_campaign  # noqa: PLC0415
    from ref2va_accept.planning import plan_campaign  # noqa: PLC0415

    if args.trials < 1:
        raise Ref2VAError(f"--trials must be at least 1, got {args.trials}")
    within = _one("--within-sd", args.within_sd)
    if within < 0:
        raise Ref2VAError(f"--within-sd: {args.within_sd!r} is negative")
    sds = _numbers("--instance-sd", args.instance_sd)
    ratios = _numbers("--ratios", args.ratios, positive=True)
    drift = _one("--drift", args.drift)
    campaign = load_campaign(args.campaign)
    plans = plan_campaign(campaign)
    # The protocol block is campaign-wide: every track carries the same latency settings.
    settings = next(iter(plans.values())).latency
    compare = _confidences(args.compare_confidence, settings.confidence)
    ids = [c.id for c in campaign.model.candidates]
    candidate = args.candidate or (ids[0] if ids else "candidate")
    if args.candidate is not None and args.candidate not in ids:
        raise Ref2VAError(f"--candidate {args.candidate!r} is not a candidate of "
                          f"{args.campaign}; its candidates are {', '.join(ids) or 'none'}")
    before = request_design_before(settings)
    span = max(len(candidate_schedule(d, candidate)) for d in (settings, before)) - 1
    if 1 + drift * span <= 0:
        raise Ref2VAError(f"--drift {drift:g} makes the {span + 1}th instance's latency "
                          "non-positive")
    noise = Noise(within_sd=within, drift_per_instance=drift)
    rows = table([(f"campaign: {design_label(settings)}", settings),
                  (f"before #12: {design_label(before)}", before)],
                 candidate, noise, sds, ratios, args.trials, args.seed, exact=args.exact)
    cell_lines: list[str] = []
    if not args.no_cells:
        cells = default_cells(within)
        results = run_cells(settings, cells, ratios, args.trials, args.seed,
                            exact=args.exact)
        others = [claim_at(settings, c, cells, ratios, args.trials, args.seed,
                           exact=args.exact) for c in compare]
        reruns = [r for r in results if r.cell.reruns]
        cell_lines = [
            "", f"cells (the rule as frozen, {args.trials} trials each, within-instance sd "
            f"{within:.1%}, each arm's instance sd as shown, order drawn per run unless "
            "frozen; 95% upper: the exact Clopper-Pearson bound of the rate):",
            *format_cells(results, ratios, settings.target_ratio),
            *claim_lines(claim(settings, cells, results), others, ratios), "",
            "with K candidates the per-candidate rate is shown; 'any of K' is the family's, "
            "and Holm's column (the report's and the ledger's) holds the family to "
            f"{1 - settings.confidence:.1%}",
            *(f"a rerun after an inconclusive result is a second chance at a false supported "
              f"({r.at_target.supported:.1%} over two attempts, not a one-attempt cell): the "
              "verdict, the report and the ledger name every attempt and what the earlier ones "
              "gave" for r in reruns)]
        cell_lines += ["", *hosting_lines(settings, within, ratios, args.trials, args.seed,
                                          args.exact)]
    if args.futility_trials > 0:
        noise_3 = dataclasses.replace(noise, instance_sd=0.03)
        stops = [futility(settings, noise_3, r, args.futility_trials,
                          np.random.default_rng((args.seed, 91, int(r * 100))))
                 for r in (settings.target_ratio * 0.9, settings.target_ratio, 1.0)]
        cell_lines += [
            "", f"futility stop ({args.futility_trials} runs per ratio, 3% instance sd, "
            "decisions by replication.supported_reachable): instances started per run",
            *(f"  true ratio {f.true_ratio:g}: {f.started:.2f} of {f.full} "
              f"({1 - f.started / f.full:.0%} saved); supported runs it stopped: "
              f"{f.lost_supported}" for f in stops)]
    return [f"campaign: {args.campaign} (one protocol for its {len(plans)} tracks)",
            *protocol_lines(settings, candidate),
            f"simulation: {args.trials} trials per cell, seed {args.seed}; lognormal noise, "
            f"within-instance sd {within:.1%}, drift {drift:g} per instance; decisions by "
            + ("replication.decide" if args.exact else
               "a vectorised replica of replication.decide (--exact: decide itself)"),
            "", *format_table(rows, ratios, settings.target_ratio), "",
            f"95% upper: the upper end of each rate's exact (Clopper-Pearson) two-sided 95% "
            f"interval at {args.trials} trials; 'before #12' is {design_label(before)}, "
            "as before issue 12",
            *(["under drift the rates depend on the instances' order: --candidate ID simulates "
               "another candidate's"] if drift else []),
            *(["B0's instances are shared by a track's candidates: each candidate is judged on "
               "N B0 and N own values as simulated here (the pair design); on a track with K "
               "candidates its pairs sit in blocks of K+1 instances, which only drift can tell "
               "apart (--drift simulates pairs)"]
              if settings.baseline_instances == "shared" else []),
            *cell_lines]
