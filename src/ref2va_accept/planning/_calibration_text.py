"""Calibration of the latency protocol, its text: the protocol in words, the table per design and
instance spread, the cells table, the claim and what the confidence costs, the gate on the
first latency instance; `ref2va-accept calibrate` prints them.

Rates are shown to one decimal (`_pct`), bounds to two (`_bound`: compared with the claim's 5%).
The simulations are planning/_calibration.py's and planning/_calibration_cells.py's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ref2va_accept.core import ArmRole, DecisionRule, Unit
from ref2va_accept.planning._calibration import Noise
from ref2va_accept.planning._calibration_cells import (
    CLAIM,
    Cell,
    CellResult,
    Claim,
    Row,
    run_cells,
)
from ref2va_accept.timing import (
    InstanceTimes,
    LatencySettings,
    arm_values,
    candidate_schedule,
    interval_k,
)


def _pct(value: float) -> str:
    return f"{value:.1%}"


def _bound(value: float) -> str:
    """A bound is compared with the claim's 5%: two decimals, so 4.96% never reads as 5.0%."""
    return f"{value:.2%}"


def design_label(s: LatencySettings) -> str:
    warm = f"W={s.warmups}" + (f"..{s.max_warmups}" if s.max_warmups != s.warmups else "")
    if s.replication == Unit.INSTANCE:
        return f"instance N={s.instances_per_arm} {warm} M={s.repeats}"
    return f"request {s.ordering} {warm} M={s.repeats}"


def protocol_lines(s: LatencySettings, candidate: str) -> list[str]:
    order = " ".join("B" if a == ArmRole.B0 else "C"
                     for a in candidate_schedule(s, candidate))
    if s.replication == Unit.INSTANCE:
        unit = (f"replication instance: N={s.instances_per_arm} fresh instances per arm, "
                f"{s.ordering} (order seed {s.order_seed}; for {candidate}: {order})")
    else:
        unit = f"replication request: ordering {s.ordering} ({order}), every request a sample"
    rule = ("a fixed count" if s.steady_fraction is None else
            f"until the last two agree within {_pct(s.steady_fraction)}")
    arms = arm_values(
        [InstanceTimes(a, (), (1.0,) * s.repeats)
         for a in candidate_schedule(s, candidate)], s)
    k = interval_k(len(arms[0]), len(arms[1]), s.confidence)
    if s.decision_rule == DecisionRule.WELCH:
        decision = (f"Welch interval on log values ({s.decision_rule}), one-sided "
                    f"{s.confidence:g} at each end, at {len(arms[0])}+{len(arms[1])} values")
    else:
        decision = (f"ratio interval ({s.decision_rule}), one-sided {s.confidence:g} at each "
                    f"end (k={k} at {len(arms[0])}+{len(arms[1])} values)")
    return [f"protocol: {unit}",
            f"  warm-ups {s.warmups}..{s.max_warmups} per instance, {rule}; "
            f"M={s.repeats} measured per instance",
            f"  decision: {decision}, target {s.target_ratio:g}; "
            f"B0 drift tolerance {_pct(s.drift_tolerance)}"]


def format_table(rows: Sequence[Row], ratios: Sequence[float], target: float) -> list[str]:
    head = ["design", "instance sd", f"false supported @{target:g}", "95% upper",
            *(f"power @{r:g}" for r in ratios), f"@{target:g}: unsteady / drift"]
    body = [[r.design, _pct(r.instance_sd), _pct(r.at_target.supported),
             _bound(r.at_target.supported_bounds[1]),
             *(_pct(p.supported) for p in r.power),
             f"{_pct(r.at_target.rate('warmup_not_steady'))} / "
             f"{_pct(r.at_target.rate('drift'))}"] for r in rows]
    widths = [max(len(line[c]) for line in [head, *body]) for c in range(len(head))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
            for line in [head, *body]]


# --- the cells, the claim and what the confidence costs ----------------------------------------

def format_cells(results: Sequence[CellResult], ratios: Sequence[float], target: float
                 ) -> list[str]:
    head = ["cell", "condition", f"false supported @{target:g}", "95% upper",
            *(f"power @{r:g}" for r in ratios), "stopped unsteady / drift",
            "any of K supported (Holm)"]
    body = []
    for r in results:
        family = ("-" if r.any_supported is None else
                  f"{_pct(r.any_supported)} ({_pct(r.holm_any or 0.0)})")
        body.append([r.cell.group, r.cell.label, _pct(r.at_target.supported),
                     _bound(r.at_target.supported_bounds[1]),
                     *(_pct(p.supported) for p in r.power),
                     f"{_pct(r.at_target.rate('warmup_not_steady'))} / "
                     f"{_pct(r.at_target.rate('drift'))}", family])
    widths = [max(len(line[c]) for line in [head, *body]) for c in range(len(head))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
            for line in [head, *body]]


def claim_lines(claim_now: Claim, others: Sequence[Claim], ratios: Sequence[float]
                ) -> list[str]:
    w = claim_now.worst
    lines = [
        f"worst false supported at the target, one attempt: {_bound(w.at_target.supported)}, "
        f"95% upper bound {_bound(w.at_target.supported_bounds[1])} ({w.cell.group}: "
        f"{w.cell.label})",
        f"claim, false supported at the target at most {CLAIM:.0%} in every one-attempt cell: "
        + ("shown: every cell's 95% upper bound (exact, Clopper-Pearson, two-sided; "
           f"{claim_now.trials} trials each) is at most {_bound(CLAIM)}" if claim_now.shown else
           f"NOT shown at {claim_now.trials} trials: the 95% upper bound of "
           f"{len(claim_now.above)} cell(s) is above {_bound(CLAIM)} ("
           + "; ".join(f"{r.cell.label}: {_bound(r.at_target.supported_bounds[1])}"
                       for r in claim_now.above) + ")")]
    if not others:
        return lines
    lines += ["", "what the confidence costs (the same simulated runs at each confidence; power "
              "where B0 and the candidate spread 3% between instances):"]
    for c in [claim_now, *others]:
        worst = c.worst.at_target
        power = ", ".join(f"@{r:g} {_pct(p.supported)}" for r, p in
                          zip(ratios, c.power, strict=True)) if c.power else "not simulated"
        lines.append(
            f"  confidence {c.confidence:g}{' (frozen)' if c is claim_now else ''}: worst "
            f"{_bound(worst.supported)} (95% upper {_bound(worst.supported_bounds[1])}, "
            f"{c.worst.cell.label}), claim {'shown' if c.shown else 'not shown'}; power {power}")
    return lines


# --- the gate on the first latency instance ----------------------------------------------------

def hosting_lines(settings: LatencySettings, within_sd: float, ratios: Sequence[float],
                  trials: int, seed: int, exact: bool) -> list[str]:
    """What the gate on a candidate's first latency instance rests on, shown: false supported
    at the target and power at the chosen ratios if its requests before the warm-ups left that
    instance faster than the warm-up rule makes it (B0 and candidate 3% instance sd)."""
    base = Noise(within_sd=within_sd, instance_sd=0.03, drawn_order=True)
    cells = [Cell("gate first", dataclasses.replace(base, first_instance_factor=f))
             for f in (1.0, 0.99, 0.98, 0.95)]
    results = run_cells(settings, cells, ratios, trials, seed, exact=exact)
    lines = ["gate on the first latency instance (its requests before that instance's warm-ups; "
             "B0 and candidate 3% instance sd): false supported at the target, and power, if "
             "they left that instance faster than the warm-up rule does"]
    for factor, result in zip((1.0, 0.99, 0.98, 0.95), results, strict=True):
        what = "as assumed (no effect)" if factor == 1.0 else f"{1 - factor:.0%} faster"
        power = ", ".join(f"{r:g}: {_pct(p.supported)}" for r, p in
                          zip(ratios, result.power, strict=True))
        lines.append(f"  first instance {what}: {_pct(result.at_target.supported)} "
                     f"(power {power})")
    return lines
