"""Calibration of the latency protocol, the simulation of one design: the noise model, the
simulated latencies, the protocol's decision on them (exact and vectorised), outcome rates.

Latencies are simulated under a multiplicative lognormal model (docs/protocol.md, calibration):

    latency = base * (true ratio if candidate else 1) * instance factor * request factor
              * (1 + drift per instance * position of the instance in the start order)

one instance factor per instance (sd: the spread between instances), one request factor per
request, warm-ups included (sd: the noise within an instance), so the steady-state rule runs
on warm-ups for real; an optional first-request factor models a warm-up transient. Each trial
is judged by the protocol's own decision: `replication.candidate_schedule` orders the instances, and
`replication.warmup_done`, `replication.is_steady` and `replication.decide` judge them (`exact`).
The default is a vectorised replica of that decision (`_decide_fast`), thousands of trials at a
time; tests/unit/test_calibration.py checks trial by trial that both give the same outcome, and
`--exact` runs `replication.decide` on every trial (some 30 times slower).

A trial whose decision is not evaluable (warm-up never steady, B0 drift) counts as not
`supported`; the rates of each outcome are kept. Each simulated rate comes with its exact
(Clopper-Pearson) 95% interval: a claim such as "at most 5%" is shown when the upper end is at or
below 5%, not merely left unrefuted by a rate near it.

The conditions simulated (the design tables, the cells, the claim, the futility stop) are in
planning/_calibration_cells.py, their text tables in planning/_calibration_text.py;
`ref2va-accept calibrate` (cli/_calibrate.py) runs them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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
from ref2va_accept.timing import (
    Decision,
    InstanceTimes,
    LatencySettings,
    candidate_schedule,
    decide,
    interval_k,
    is_steady,
    latency_schedule,
    mann_whitney_counts,
    warmup_done,
)

# A trial's outcome: the interval's verdict, or the reason its run is not evaluable.
OUTCOMES: tuple[str, ...] = (*Verdict, *LatencyDecisionReason)
SUPPORTED, FAILED, INCONCLUSIVE, UNSTEADY, DRIFT = (OUTCOMES.index(o) for o in (
    Verdict.SUPPORTED, Verdict.FAILED, Verdict.INCONCLUSIVE,
    LatencyDecisionReason.WARMUP_NOT_STEADY, LatencyDecisionReason.DRIFT))
CHUNK = 20_000  # trials drawn and judged at once: bounds memory whatever --trials says
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
    `true_ratio` (replication.latency_schedule orders them)."""
    candidates = (candidate,) if isinstance(candidate, str) else tuple(candidate)
    arms = tuple(latency_schedule(settings, "calibration", candidates)
                 if len(candidates) > 1 else candidate_schedule(settings, candidates[0]))
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


def _outcome(decision: Decision) -> int:
    if decision.reason is not None:
        return OUTCOMES.index(decision.reason)
    assert decision.verdict is not None  # decide gives a verdict whenever it gives no reason
    return OUTCOMES.index(decision.verdict.verdict)


def _instances(draws: Draws, t: int) -> list[InstanceTimes]:
    s = draws.settings
    instances = []
    for i, arm in enumerate(draws.arms):
        row = draws.warmups[t, i]
        warm: list[float] = []
        while not warmup_done(warm, s):
            warm.append(float(row[len(warm)]))
        instances.append(InstanceTimes(
            arm, tuple(warm), tuple(float(x) for x in draws.measured[t, i]),
            is_steady(warm, s.steady_fraction)))
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
        out[t] = _outcome(decide(instances, s))
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

