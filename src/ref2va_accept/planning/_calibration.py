"""Calibration of the latency protocol: its error rates, by simulation of the frozen design.

Latencies are simulated under a multiplicative lognormal model (docs/protocol.md, calibration):

    latency = base * (true ratio if candidate else 1) * instance factor * request factor
              * (1 + drift per instance * position of the instance in the start order)

one instance factor per instance (sd: the spread between instances), one request factor per
request, warm-ups included (sd: the noise within an instance), so the steady-state rule runs
on warm-ups for real; an optional first-request factor models a warm-up transient. Each trial
is judged by the protocol's own decision: `replication.sequence` orders the instances, and
`replication.warmup_done`, `replication.is_steady` and `replication.decide` judge them (`exact`).
The default is a vectorised replica of that decision (`_decide_fast`), thousands of trials at a
time; tests/unit/test_calibration.py checks trial by trial that both give the same outcome, and
`--exact` runs `replication.decide` on every trial (some 30 times slower).

A trial whose decision is not evaluable (warm-up never steady, B0 drift) counts as not
`supported`; the rates of each outcome are kept. Each simulated rate comes with its exact
(Clopper-Pearson) 95% interval: a claim such as "at most 5%" is shown when the upper end is at or
below 5%, not merely left unrefuted by a rate near it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ref2va_accept.core import (
    ArmRole,
    DecisionRule,
    LatencyDecisionReason,
    Unit,
    Verdict,
)
from ref2va_accept.timing import LatencySettings, interval_k, mann_whitney_counts
from ref2va_accept.timing import _replication as replication

# A trial's outcome: the interval's verdict, or the reason its run is not evaluable.
OUTCOMES: tuple[str, ...] = (*Verdict, *LatencyDecisionReason)
SUPPORTED, FAILED, INCONCLUSIVE, UNSTEADY, DRIFT = (OUTCOMES.index(o) for o in (
    Verdict.SUPPORTED, Verdict.FAILED, Verdict.INCONCLUSIVE,
    LatencyDecisionReason.WARMUP_NOT_STEADY, LatencyDecisionReason.DRIFT))
CHUNK = 20_000  # trials drawn and judged at once: bounds memory whatever --trials says
CLAIM = 0.05  # false supported at the target, per candidate and attempt: at most this
BOUND_LEVEL = 0.95  # the exact interval each simulated rate is shown with

Outcomes = NDArray[np.int8]


@dataclass(frozen=True)
class Noise:
    """The simulated host: spreads are sds of the log latency (about relative sds).

    Each arm may spread differently between instances (`candidate_instance_sd`; None: as B0),
    and instance effects may be heavy-tailed (`tail_df`: Student's t with that many degrees of
    freedom, scaled to the same sd; None: normal in the log, i.e. lognormal latencies).
    """

    within_sd: float = 0.01  # request to request, inside one instance
    instance_sd: float = 0.0  # B0's instance to instance (one draw per started server)
    drift_per_instance: float = 0.0  # linear: the i-th started instance is (1 + drift * i) slower
    first_request_factor: float = 1.0  # an instance's first request (a warm-up transient)
    candidate_instance_sd: float | None = None  # the candidates' own spread; None: instance_sd
    tail_df: float | None = None  # heavy tails: t-distributed instance effects (df > 2)
    drawn_order: bool = False  # the order within each block drawn anew per run (per trial)
    # Each candidate's first instance (the one that hosts its quality gate, whose requests come
    # before its warm-ups) this many times its latency: 1.0 is the protocol's assumption that
    # the warm-up rule absorbs them; below 1 the instance is left faster (a broken assumption).
    first_instance_factor: float = 1.0

    @property
    def candidate_sd(self) -> float:
        return self.instance_sd if self.candidate_instance_sd is None else \
            self.candidate_instance_sd


@dataclass(frozen=True)
class Draws:
    """Simulated latencies in seconds of many trials of one design.

    `warmups` holds max_warmups draws per instance (the rule decides how many are used);
    index order: trial, instance (in the frozen schedule's order), request. `candidates` are
    the candidates sharing B0's instances (one, in the pair design).
    """

    settings: LatencySettings
    arms: tuple[str, ...]
    warmups: NDArray[np.float64]
    measured: NDArray[np.float64]
    candidates: tuple[str, ...] = ()


def clopper_pearson(hits: int, trials: int, level: float = BOUND_LEVEL) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided `level` interval of a binomial rate, `hits` of
    `trials`: each end holds at one-sided 1 - (1 - level) / 2 (97.5% for 95%)."""
    from scipy.stats import beta  # noqa: PLC0415

    if trials < 1 or not 0 <= hits <= trials:
        raise ValueError(f"{hits} hits of {trials} trials is not a binomial count")
    tail = (1 - level) / 2
    lower = 0.0 if hits == 0 else float(beta.ppf(tail, hits, trials - hits + 1))
    upper = 1.0 if hits == trials else float(beta.ppf(1 - tail, hits + 1, trials - hits))
    return lower, upper


def _effects(rng: np.random.Generator, sd: float, tail_df: float | None,
             shape: tuple[int, ...]) -> NDArray[np.float64]:
    if tail_df is None:
        return rng.normal(0.0, sd, shape)
    if tail_df <= 2:
        raise ValueError(f"tail_df must be above 2 (a finite sd), got {tail_df}")
    return sd * rng.standard_t(tail_df, shape) / math.sqrt(tail_df / (tail_df - 2))


def _positions(settings: LatencySettings, arms: Sequence[str], k: int, trials: int,
               drawn: bool, rng: np.random.Generator) -> NDArray[np.float64]:
    """Each instance's start position per trial: the frozen schedule's, or, with the order
    drawn per run, a fresh shuffle inside each block of B0 and the K candidates."""
    count = len(arms)
    fixed = np.broadcast_to(np.arange(count, dtype=np.float64), (trials, count))
    if not drawn or settings.replication != Unit.INSTANCE:
        return fixed
    block = k + 1
    keys = rng.random((trials, count // block, block))
    shuffled = np.argsort(np.argsort(keys, axis=2), axis=2)  # a random rank inside the block
    starts = (np.arange(count // block) * block)[None, :, None]
    return (starts + shuffled).reshape(trials, count).astype(np.float64)


def draw(settings: LatencySettings, candidate: str | Sequence[str], noise: Noise,
         true_ratio: float, trials: int, rng: np.random.Generator) -> Draws:
    """`candidate`: one id (the pair design) or several sharing B0's instances, all at
    `true_ratio` (replication.schedule orders them)."""
    candidates = (candidate,) if isinstance(candidate, str) else tuple(candidate)
    arms = tuple(replication.schedule(settings, "calibration", candidates)
                 if len(candidates) > 1 else replication.sequence(settings, candidates[0]))
    count, warm = len(arms), settings.max_warmups
    is_candidate = np.array([a != ArmRole.B0 for a in arms])
    positions = _positions(settings, arms, len(candidates), trials, noise.drawn_order, rng)
    scale = np.where(is_candidate, true_ratio, 1.0) * (1 + noise.drift_per_instance * positions)
    if noise.first_instance_factor != 1.0:
        # Blocks keep their order (only the order inside a block is drawn), so a candidate's
        # first instance in time is its first in the schedule.
        first = np.zeros(count)
        for c in candidates:
            first[arms.index(c)] = 1.0
        scale = scale * np.where(first > 0, noise.first_instance_factor, 1.0)
    sds = np.where(is_candidate, noise.candidate_sd, noise.instance_sd)
    instance = scale * np.exp(_effects(rng, 1.0, noise.tail_df, (trials, count)) * sds)
    requests = np.exp(rng.normal(0.0, noise.within_sd, (trials, count, warm + settings.repeats)))
    requests[:, :, 0] *= noise.first_request_factor
    latency = instance[:, :, None] * requests
    return Draws(settings, arms, latency[:, :, :warm], latency[:, :, warm:], candidates)


def _outcome(decision: replication.Decision) -> int:
    if decision.reason is not None:
        return OUTCOMES.index(decision.reason)
    assert decision.verdict is not None  # decide gives a verdict whenever it gives no reason
    return OUTCOMES.index(decision.verdict.verdict)


def _instances(draws: Draws, t: int) -> list[replication.InstanceTimes]:
    s = draws.settings
    instances = []
    for i, arm in enumerate(draws.arms):
        row = draws.warmups[t, i]
        warm: list[float] = []
        while not replication.warmup_done(warm, s):
            warm.append(float(row[len(warm)]))
        instances.append(replication.InstanceTimes(
            arm, tuple(warm), tuple(float(x) for x in draws.measured[t, i]),
            replication.is_steady(warm, s.steady_fraction)))
    return instances


def decide_exact(draws: Draws, candidate: int = 0) -> Outcomes:
    """Each trial judged by the protocol's own functions, instance by instance, for one of the
    candidates (by index) on B0's instances and its own."""
    s = draws.settings
    name = draws.candidates[candidate] if draws.candidates else None
    out = np.empty(draws.measured.shape[0], np.int8)
    for t in range(len(out)):
        instances = [i for i in _instances(draws, t)
                     if name is None or i.arm in (ArmRole.B0, name)]
        out[t] = _outcome(replication.decide(instances, s))
    return out


def _steady(warmups: NDArray[np.float64], s: LatencySettings) -> NDArray[np.bool_]:
    # Warm up to `warmups`, then on until the last two agree or `max_warmups` is reached.
    shape = warmups.shape[:2]
    if s.steady_fraction is None:
        return np.ones(shape, np.bool_)
    agree = np.abs(warmups[..., 1:] / warmups[..., :-1] - 1) <= s.steady_fraction
    steady, stopped = np.zeros(shape, np.bool_), np.zeros(shape, np.bool_)
    for n in range(s.warmups, s.max_warmups + 1):
        here = agree[..., n - 2] if n >= 2 else np.zeros(shape, np.bool_)
        now = ~stopped & (here | (n == s.max_warmups))
        steady[now] = here[now]
        stopped |= now
    return steady


def _arm_samples(draws: Draws, candidate: int) -> tuple[list[int], list[int],
                                                         NDArray[np.float64],
                                                         NDArray[np.float64]]:
    s, arms = draws.settings, draws.arms
    trials = draws.measured.shape[0]
    name = draws.candidates[candidate] if draws.candidates else None
    b0 = [i for i, a in enumerate(arms) if a == ArmRole.B0]
    cand = [i for i, a in enumerate(arms)
            if a != ArmRole.B0 and (name is None or a == name)]
    if s.replication == Unit.INSTANCE:
        values = np.median(draws.measured, axis=2)
        return b0, cand, values[:, b0], values[:, cand]
    return (b0, cand, draws.measured[:, b0].reshape(trials, -1),
            draws.measured[:, cand].reshape(trials, -1))


def _welch(base: NDArray[np.float64], other: NDArray[np.float64], confidence: float,
           target: float) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                   NDArray[np.float64]]:
    """(lower, upper, p-value of ratio >= target) of stats.welch_log_interval, per trial; NaN
    where it cannot be formed (no spread)."""
    from scipy.special import stdtr, stdtrit  # noqa: PLC0415

    lb, lc = np.log(base), np.log(other)
    nb, nc = lb.shape[1], lc.shape[1]
    if nb < 2 or nc < 2:
        nan = np.full(lb.shape[0], np.nan)
        return nan, nan, nan
    vb, vc = lb.var(axis=1, ddof=1) / nb, lc.var(axis=1, ddof=1) / nc
    se = np.sqrt(vb + vc)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (vb + vc) ** 2 / (vb ** 2 / (nb - 1) + vc ** 2 / (nc - 1))
        diff = lc.mean(axis=1) - lb.mean(axis=1)
        half = stdtrit(df, confidence) * se
        p = stdtr(df, (diff - math.log(target)) / se)
    bad = ~(se > 0) | ~np.isfinite(se)
    lower, upper = np.exp(diff - half), np.exp(diff + half)
    for a in (lower, upper, p):
        a[bad] = np.nan
    return lower, upper, p


def _rank_p(base: NDArray[np.float64], other: NDArray[np.float64], target: float
            ) -> NDArray[np.float64]:
    counts = np.array(mann_whitney_counts(base.shape[1], other.shape[1]), np.float64)
    tail = np.cumsum(counts) / counts.sum()
    inverted = ((other[:, :, None] / base[:, None, :]) > target).sum(axis=(1, 2))
    result: NDArray[np.float64] = tail[inverted]
    return result


def p_values(draws: Draws, candidate: int = 0) -> NDArray[np.float64]:
    """stats.p_value per trial for one candidate (Holm's column is computed from these)."""
    s = draws.settings
    _, _, base, other = _arm_samples(draws, candidate)
    if s.decision_rule == DecisionRule.WELCH:
        return _welch(base, other, s.confidence, s.target_ratio)[2]
    return _rank_p(base, other, s.target_ratio)


def _decide_fast(draws: Draws, candidate: int = 0) -> Outcomes:
    """`replication.decide` over all trials at once: the interval's verdict, unless a reason
    makes the run not evaluable, the first in the order `replication.not_evaluable` takes them
    (LatencyDecisionReason's)."""
    s = draws.settings
    b0, cand, base, other = _arm_samples(draws, candidate)
    trials = base.shape[0]
    out = np.full(trials, INCONCLUSIVE, np.int8)
    if s.decision_rule == DecisionRule.WELCH:
        lower, upper, _ = _welch(base, other, s.confidence, s.target_ratio)
        with np.errstate(invalid="ignore"):
            out[upper <= s.target_ratio] = SUPPORTED
            out[lower > s.target_ratio] = FAILED
    else:
        ratios = np.sort((other[:, :, None] / base[:, None, :]).reshape(trials, -1), axis=1)
        k = interval_k(base.shape[1], other.shape[1], s.confidence)
        if k > 0:
            out[ratios[:, ratios.shape[1] - k] <= s.target_ratio] = SUPPORTED
            out[ratios[:, k - 1] > s.target_ratio] = FAILED
    holds = {LatencyDecisionReason.WARMUP_NOT_STEADY:
             ~_steady(draws.warmups[:, b0 + cand], s).all(axis=1),
             LatencyDecisionReason.DRIFT: np.zeros(trials, np.bool_)}
    if len(b0) >= 2 and (s.replication == Unit.INSTANCE or s.ordering == "ABA"):
        values = np.median(draws.measured, axis=2)
        moved = np.abs(values[:, b0[-1]] / values[:, b0[0]] - 1)
        holds[LatencyDecisionReason.DRIFT] = moved > s.drift_tolerance
    for reason in reversed(LatencyDecisionReason):  # the first reason that holds is written last
        out[holds[reason]] = OUTCOMES.index(reason)
    return out


@dataclass(frozen=True)
class Rates:
    """How often each outcome came up in `trials` simulated runs."""

    trials: int
    counts: tuple[int, ...]  # per OUTCOMES

    def rate(self, outcome: str) -> float:
        return self.counts[OUTCOMES.index(outcome)] / self.trials

    @property
    def supported(self) -> float:
        return self.rate(Verdict.SUPPORTED)

    @property
    def supported_bounds(self) -> tuple[float, float]:
        """The exact 95% interval of the `supported` rate (`clopper_pearson`)."""
        return clopper_pearson(self.counts[SUPPORTED], self.trials)


def simulate(settings: LatencySettings, candidate: str, noise: Noise, true_ratio: float,
             trials: int, seed: int | Sequence[int], *, exact: bool = False) -> Rates:
    """The outcome rates of the design at one true ratio. The same seed gives the same noise
    draws at every ratio (common random numbers: rates at different ratios compare closely)."""
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    rng = np.random.default_rng(seed)
    counts = np.zeros(len(OUTCOMES), np.int64)
    for start in range(0, trials, CHUNK):
        draws = draw(settings, candidate, noise, true_ratio, min(CHUNK, trials - start), rng)
        outcomes = decide_exact(draws) if exact else _decide_fast(draws)
        counts += np.bincount(outcomes, minlength=len(OUTCOMES))
    return Rates(trials, tuple(int(c) for c in counts))


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


def design_label(s: LatencySettings) -> str:
    warm = f"W={s.warmups}" + (f"..{s.max_warmups}" if s.max_warmups != s.warmups else "")
    if s.replication == Unit.INSTANCE:
        return f"instance N={s.instances_per_arm} {warm} M={s.repeats}"
    return f"request {s.ordering} {warm} M={s.repeats}"


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


def _pct(value: float) -> str:
    return f"{value:.1%}"


def _bound(value: float) -> str:
    """A bound is compared with the claim's 5%: two decimals, so 4.96% never reads as 5.0%."""
    return f"{value:.2%}"


def protocol_lines(s: LatencySettings, candidate: str) -> list[str]:
    order = " ".join("B" if a == ArmRole.B0 else "C"
                     for a in replication.sequence(s, candidate))
    if s.replication == Unit.INSTANCE:
        unit = (f"replication instance: N={s.instances_per_arm} fresh instances per arm, "
                f"{s.ordering} (order seed {s.order_seed}; for {candidate}: {order})")
    else:
        unit = f"replication request: ordering {s.ordering} ({order}), every request a sample"
    rule = ("a fixed count" if s.steady_fraction is None else
            f"until the last two agree within {_pct(s.steady_fraction)}")
    arms = replication.arm_values(
        [replication.InstanceTimes(a, (), (1.0,) * s.repeats)
         for a in replication.sequence(s, candidate)], s)
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
        text = f"B0 {_pct(n.instance_sd)} / cand {_pct(n.candidate_sd)}"
        if n.tail_df is not None:
            text += f", t{n.tail_df:g} tails"
        if n.drift_per_instance:
            text += (f", drift {_pct(n.drift_per_instance)}/instance "
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


# --- the futility stop: what it saves, and that it loses no supported --------------------------

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


@dataclass(frozen=True)
class Futility:
    true_ratio: float
    trials: int
    started: float  # mean instances started per run, B0's and the candidate's
    full: int  # instances a run without the stop starts
    lost_supported: int  # runs the full protocol finds supported that the stop ended early


def futility(settings: LatencySettings, noise: Noise, true_ratio: float, trials: int,
             rng: np.random.Generator) -> Futility:
    """One candidate's runs with the futility stop (latency.run_schedule's rule: after each
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
            b0, cand = replication.arm_values(seen, settings)
            rest = [x.arm for x in instances[i + 1:]]
            per = settings.repeats if settings.replication == Unit.REQUEST else 1
            if b0 and cand and not replication.supported_reachable(
                    settings, b0, cand, per * rest.count(ArmRole.B0),
                    per * (len(rest) - rest.count(ArmRole.B0))):
                count = i + 1
                lost += int(whole[t] == SUPPORTED)
                break
        started += count
    return Futility(true_ratio, trials, started / trials, len(d.arms), lost)
