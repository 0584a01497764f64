"""Calibration of the latency protocol, the conditions simulated: each design per instance spread,
the cells the rule is frozen from, the claim of at most 5% false `supported` they show or not,
and the futility stop's savings.

The cells: spreads equal and unequal, heavy tails, drift under a drawn and a frozen order,
several candidates on one B0 (per candidate, any of them, and after Holm's step-down), a rerun
after an inconclusive result. Each condition is simulated and judged by planning/_calibration.py;
planning/_calibration_text.py writes the tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ref2va_accept.core import ArmRole, DecisionRule, Unit
from ref2va_accept.planning._calibration import (
    DRIFT,
    INCONCLUSIVE,
    OUTCOMES,
    SUPPORTED,
    UNSTEADY,
    Noise,
    Outcomes,
    Rates,
    _decide_fast,
    _instances,
    decide_exact,
    draw,
    p_values,
    simulate,
)
from ref2va_accept.timing import LatencySettings, arm_values, supported_reachable

CLAIM = 0.05  # false supported at the target, per candidate and attempt: at most this


# --- the designs: one table row per design and instance spread --------------------------------

def request_design_before(settings: LatencySettings) -> LatencySettings:
    """The request-level design as it was before the instance design (issue 12): ABA, one
    warm-up and three measured requests per instance, every request a sample."""
    return dataclasses.replace(settings, replication=Unit.REQUEST, ordering="ABA",
                               instances_per_arm=None, warmups=1, max_warmups=1,
                               steady_fraction=None, repeats=3, decision_rule=DecisionRule.RANK,
                               confidence=0.95)


@dataclass(frozen=True)
class Row:
    design: str
    instance_sd: float
    at_target: Rates
    power: tuple[Rates, ...]  # one per chosen true ratio


def table(designs: Sequence[tuple[str, LatencySettings]], candidate: str, noise: Noise,
          instance_sds: Sequence[float], ratios: Sequence[float], trials: int, seed: int,
          *, exact: bool = False) -> list[Row]:
    rows = []
    for d, (label, settings) in enumerate(designs):
        for j, sd in enumerate(instance_sds):
            cell = dataclasses.replace(noise, instance_sd=sd)
            at = [settings.target_ratio, *ratios]
            rates = [simulate(settings, candidate, cell, r, trials, (seed, d, j), exact=exact)
                     for r in at]
            rows.append(Row(label, sd, rates[0], tuple(rates[1:])))
    return rows


# --- the cells: unequal spreads, heavy tails, drift, several candidates, reruns ---------------

@dataclass(frozen=True)
class Cell:
    """One simulated condition of the cells table."""

    group: str  # equal spread, unequal spread, heavy tails, drift, shared B0, rerun
    noise: Noise
    candidates: int = 1  # candidates sharing B0's instances, all at the same true ratio
    reruns: int = 0  # attempts after an inconclusive one (a fresh run each)

    @property
    def label(self) -> str:
        n = self.noise
        text = f"B0 {n.instance_sd:.1%} / cand {n.candidate_sd:.1%}"
        if n.tail_df is not None:
            text += f", t{n.tail_df:g} tails"
        if n.drift_per_instance:
            text += (f", drift {n.drift_per_instance:.1%}/instance "
                     + ("(order drawn per run)" if n.drawn_order else "(frozen order)"))
        if self.candidates > 1:
            text += f", {self.candidates} candidates"
        if self.reruns:
            text += f", rerun {self.reruns}x after inconclusive"
        return text


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    at_target: Rates  # one candidate's outcomes at the target (its per-candidate rate)
    power: tuple[Rates, ...]  # one candidate's, per chosen true ratio
    any_supported: float | None = None  # several candidates: at least one supported
    holm_any: float | None = None  # ... after Holm's step-down at 1 - confidence


def default_cells(within_sd: float) -> list[Cell]:
    """The table the protocol is frozen from (docs/protocol.md): spreads equal and unequal
    (the candidate from steady to twice B0's), heavy tails, drift under a drawn and a frozen
    order, several candidates on one B0, and a rerun after an inconclusive result."""
    def n(b0: float, cand: float | None = None, **kw: object) -> Noise:
        return Noise(within_sd=within_sd, instance_sd=b0, candidate_instance_sd=cand,
                     drawn_order=True, **kw)  # type: ignore[arg-type]

    return [
        *(Cell("equal spread", n(sd)) for sd in (0.0, 0.01, 0.03, 0.05)),
        *(Cell("unequal spread", n(0.05, c)) for c in (0.0, 0.01, 0.025, 0.075, 0.10)),
        Cell("unequal spread", n(0.03, 0.0)), Cell("unequal spread", n(0.03, 0.06)),
        Cell("unequal spread", n(0.0, 0.05)),
        Cell("heavy tails", n(0.05, 0.0, tail_df=3)), Cell("heavy tails", n(0.03, tail_df=3)),
        Cell("heavy tails", n(0.05, tail_df=3)), Cell("heavy tails", n(0.03, tail_df=5)),
        Cell("drift", n(0.03, drift_per_instance=0.005)),
        Cell("drift", n(0.03, drift_per_instance=0.01)),
        Cell("drift", dataclasses.replace(n(0.03, drift_per_instance=0.01), drawn_order=False)),
        Cell("shared B0", n(0.03), candidates=3), Cell("shared B0", n(0.03), candidates=12),
        Cell("shared B0", n(0.05, 0.0), candidates=3),
        Cell("rerun", n(0.03), reruns=1),
    ]


def holm(p: NDArray[np.float64], alpha: float) -> NDArray[np.bool_]:
    """Holm's step-down per row of p-values (trials x candidates): which are rejected (here:
    supported). NaN is never rejected."""
    k = p.shape[1]
    filled = np.where(np.isnan(p), np.inf, p)
    order = np.argsort(filled, axis=1)
    ranked = np.take_along_axis(filled, order, axis=1)
    passes = ranked <= alpha / (k - np.arange(k))[None, :]
    # step-down: reject the first m sorted hypotheses, m = leading run of passes
    leading = np.cumprod(passes, axis=1).astype(bool)
    rejected = np.zeros_like(leading)
    np.put_along_axis(rejected, order, leading, axis=1)
    return rejected


def _cell_outcomes(settings: LatencySettings, cell: Cell, ratio: float, trials: int,
                   rng: np.random.Generator, exact: bool
                   ) -> tuple[Outcomes, NDArray[np.bool_] | None, NDArray[np.bool_] | None]:
    """Candidate 0's outcome per trial (reruns applied), and with several candidates whether
    any was supported, raw and after Holm."""
    ids = tuple(f"c{i + 1}" for i in range(cell.candidates))
    decide = decide_exact if exact else _decide_fast
    d = draw(settings, ids if len(ids) > 1 else ids[0], cell.noise, ratio, trials, rng)
    first = decide(d, 0)
    for _ in range(cell.reruns):
        again = decide(draw(settings, ids[0], cell.noise, ratio, trials, rng), 0)
        retried = np.isin(first, (INCONCLUSIVE, UNSTEADY, DRIFT))
        first = np.where(retried, again, first).astype(np.int8)
    if len(ids) == 1:
        return first, None, None
    outcomes = np.stack([decide(d, i) for i in range(len(ids))], axis=1)
    supported = outcomes == SUPPORTED
    p = np.stack([p_values(d, i) for i in range(len(ids))], axis=1)
    evaluable = ~np.isin(outcomes, (UNSTEADY, DRIFT))
    return first, supported.any(axis=1), (holm(p, 1 - settings.confidence)
                                          & evaluable & supported).any(axis=1)


def _rates(outcomes: Outcomes) -> Rates:
    return Rates(len(outcomes), tuple(int(c) for c in np.bincount(outcomes,
                                                                  minlength=len(OUTCOMES))))


def run_cells(settings: LatencySettings, cells: Sequence[Cell], ratios: Sequence[float],
              trials: int, seed: int, *, exact: bool = False,
              power_in: Collection[int] | None = None) -> list[CellResult]:
    """Each cell at the target and at `ratios` (only for the cells indexed in `power_in`, when
    given). A cell's draws depend on its index and `seed` alone (common random numbers: the
    same cell under another confidence or ratio meets the same noise)."""
    results = []
    for c, cell in enumerate(cells):
        at = _cell_outcomes(settings, cell, settings.target_ratio, trials,
                            np.random.default_rng((seed, 77, c)), exact)
        power = [_rates(_cell_outcomes(settings, cell, r, trials,
                                       np.random.default_rng((seed, 77, c)), exact)[0])
                 for r in ratios if power_in is None or c in power_in]
        results.append(CellResult(
            cell, _rates(at[0]), tuple(power),
            None if at[1] is None else float(at[1].mean()),
            None if at[2] is None else float(at[2].mean())))
    return results


# --- the claim: every one-attempt cell at most 5%, shown by its exact upper bound -------------

@dataclass(frozen=True)
class Claim:
    """Whether the cells show false supported at the target at most `CLAIM` (one attempt)."""

    confidence: float
    trials: int
    worst: CellResult  # the one-attempt cell with the most false supported at the target
    above: tuple[CellResult, ...]  # one-attempt cells whose 95% upper bound exceeds CLAIM
    power: tuple[Rates, ...]  # the power cell's (POWER_CELL), per ratio; () without it

    @property
    def shown(self) -> bool:
        return not self.above


def power_cell(cells: Sequence[Cell]) -> int | None:
    """The cell power is quoted in (B0 and candidate both at 3% instance sd, no tails, no
    drift, one candidate): the 910C campaign's expected host."""
    for i, cell in enumerate(cells):
        n = cell.noise
        if (cell.candidates, cell.reruns, n.tail_df, n.drift_per_instance) == (1, 0, None, 0.0) \
                and n.instance_sd == n.candidate_sd == 0.03:
            return i
    return None


def claim(settings: LatencySettings, cells: Sequence[Cell], results: Sequence[CellResult]
          ) -> Claim:
    """The claim on `results` (of `run_cells(settings, cells, ...)`): reruns are two attempts,
    not one, and are left out."""
    single = [r for r in results if not r.cell.reruns]
    if not single:
        raise ValueError("no one-attempt cell to show the claim on")
    at = power_cell(cells)
    return Claim(settings.confidence, single[0].at_target.trials,
                 max(single, key=lambda r: r.at_target.counts[SUPPORTED]),
                 tuple(r for r in single if r.at_target.supported_bounds[1] > CLAIM),
                 () if at is None else results[at].power)


def claim_at(settings: LatencySettings, confidence: float, cells: Sequence[Cell],
             ratios: Sequence[float], trials: int, seed: int, *, exact: bool = False) -> Claim:
    """The claim with the frozen protocol at another confidence, on the same simulated runs as
    `run_cells(settings, cells, ...)` (power only in the power cell; reruns left out)."""
    s = dataclasses.replace(settings, confidence=confidence)
    kept = [c for c in cells if not c.reruns]
    at = power_cell(kept)
    # Reruns sit last in the cells (default_cells): the others keep their index, hence draws.
    if [c for c in cells if not c.reruns] != list(cells[:len(kept)]):
        raise ValueError("rerun cells must come last, so that the others keep their draws")
    return claim(s, kept, run_cells(s, kept, ratios, trials, seed, exact=exact,
                                    power_in=() if at is None else (at,)))


# --- the futility stop: what it saves, and that it loses no supported --------------------------

@dataclass(frozen=True)
class Futility:
    true_ratio: float
    trials: int
    started: float  # mean instances started per run, B0's and the candidate's
    full: int  # instances a run without the stop starts
    lost_supported: int  # runs the full protocol finds supported that the stop ended early


def futility(settings: LatencySettings, noise: Noise, true_ratio: float, trials: int,
             rng: np.random.Generator) -> Futility:
    """One candidate's runs with the futility stop (run_schedule's rule: after each
    instance, replication.supported_reachable on the values so far and the instances to come),
    against the same runs judged whole."""
    d = draw(settings, "c1", noise, true_ratio, trials, rng)
    whole = decide_exact(d)
    started = lost = 0
    for t in range(trials):
        instances = _instances(d, t)
        count = len(instances)
        for i in range(count):
            seen = instances[:i + 1]
            b0, cand = arm_values(seen, settings)
            rest = [x.arm for x in instances[i + 1:]]
            per = settings.repeats if settings.replication == Unit.REQUEST else 1
            if b0 and cand and not supported_reachable(
                    settings, b0, cand, per * rest.count(ArmRole.B0),
                    per * (len(rest) - rest.count(ArmRole.B0))):
                count = i + 1
                lost += int(whole[t] == SUPPORTED)
                break
        started += count
    return Futility(true_ratio, trials, started / trials, len(d.arms), lost)
