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
`supported`; the rates of each outcome are kept.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from . import replication
from .errors import Ref2VAError
from .plan import LatencySettings
from .stats import interval_k

OUTCOMES = ("supported", "failed", "inconclusive", "warmup_not_steady", "drift")
SUPPORTED, FAILED, INCONCLUSIVE, UNSTEADY, DRIFT = range(len(OUTCOMES))
CHUNK = 20_000  # trials drawn and judged at once: bounds memory whatever --trials says

Outcomes = NDArray[np.int8]


@dataclass(frozen=True)
class Noise:
    """The simulated host: spreads are sds of the log latency (about relative sds)."""

    within_sd: float = 0.01  # request to request, inside one instance
    instance_sd: float = 0.0  # instance to instance (one draw per started server)
    drift_per_instance: float = 0.0  # linear: the i-th started instance is (1 + drift * i) slower
    first_request_factor: float = 1.0  # an instance's first request (a warm-up transient)


@dataclass(frozen=True)
class Draws:
    """Simulated latencies in seconds of many trials of one design.

    `warmups` holds max_warmups draws per instance (the rule decides how many are used);
    index order: trial, instance in start order, request.
    """

    settings: LatencySettings
    arms: tuple[str, ...]
    warmups: NDArray[np.float64]
    measured: NDArray[np.float64]


def draw(settings: LatencySettings, candidate: str, noise: Noise, true_ratio: float,
         trials: int, rng: np.random.Generator) -> Draws:
    arms = tuple(replication.sequence(settings, candidate))
    count, warm = len(arms), settings.max_warmups
    is_candidate = np.array([a != replication.BASELINE for a in arms])
    scale = (np.where(is_candidate, true_ratio, 1.0)
             * (1 + noise.drift_per_instance * np.arange(count)))
    instance = scale * np.exp(rng.normal(0.0, noise.instance_sd, (trials, count)))
    requests = np.exp(rng.normal(0.0, noise.within_sd, (trials, count, warm + settings.repeats)))
    requests[:, :, 0] *= noise.first_request_factor
    latency = instance[:, :, None] * requests
    return Draws(settings, arms, latency[:, :, :warm], latency[:, :, warm:])


def _outcome(decision: replication.Decision) -> int:
    if decision.reason is not None:
        return OUTCOMES.index(decision.reason)
    assert decision.verdict is not None  # decide gives a verdict whenever it gives no reason
    return OUTCOMES.index(decision.verdict.verdict)


def decide_exact(draws: Draws) -> Outcomes:
    """Each trial judged by the protocol's own functions, instance by instance."""
    s = draws.settings
    out = np.empty(draws.measured.shape[0], np.int8)
    for t in range(len(out)):
        instances = []
        for i, arm in enumerate(draws.arms):
            row = draws.warmups[t, i]
            warm: list[float] = []
            while not replication.warmup_done(warm, s):
                warm.append(float(row[len(warm)]))
            instances.append(replication.InstanceTimes(
                arm, tuple(warm), tuple(float(x) for x in draws.measured[t, i]),
                replication.is_steady(warm, s.steady_fraction)))
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


def _decide_fast(draws: Draws) -> Outcomes:
    """`replication.decide` over all trials at once (same order: steadiness, drift, interval)."""
    s, arms = draws.settings, draws.arms
    trials = draws.measured.shape[0]
    b0 = [i for i, a in enumerate(arms) if a == replication.BASELINE]
    cand = [i for i, a in enumerate(arms) if a != replication.BASELINE]
    values = np.median(draws.measured, axis=2)
    if s.replication == "instance":
        base, other = values[:, b0], values[:, cand]
    else:
        base, other = (draws.measured[:, b0].reshape(trials, -1),
                       draws.measured[:, cand].reshape(trials, -1))
    ratios = np.sort((other[:, :, None] / base[:, None, :]).reshape(trials, -1), axis=1)
    k = interval_k(base.shape[1], other.shape[1], s.confidence)
    out = np.full(trials, INCONCLUSIVE, np.int8)
    if k > 0:
        out[ratios[:, ratios.shape[1] - k] <= s.target_ratio] = SUPPORTED
        out[ratios[:, k - 1] > s.target_ratio] = FAILED
    if len(b0) >= 2 and (s.replication == "instance" or s.ordering == "ABA"):
        moved = np.abs(values[:, b0[-1]] / values[:, b0[0]] - 1)
        out[moved > s.drift_tolerance] = DRIFT
    out[~_steady(draws.warmups, s).all(axis=1)] = UNSTEADY
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
        return self.rate("supported")


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
    return dataclasses.replace(settings, replication="request", ordering="ABA",
                               instances_per_arm=None, warmups=1, max_warmups=1,
                               steady_fraction=None, repeats=3)


@dataclass(frozen=True)
class Row:
    design: str
    instance_sd: float
    at_target: Rates
    power: tuple[Rates, ...]  # one per chosen true ratio


def design_label(s: LatencySettings) -> str:
    warm = f"W={s.warmups}" + (f"..{s.max_warmups}" if s.max_warmups != s.warmups else "")
    if s.replication == "instance":
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


def protocol_lines(s: LatencySettings, candidate: str) -> list[str]:
    order = " ".join("B" if a == replication.BASELINE else "C"
                     for a in replication.sequence(s, candidate))
    if s.replication == "instance":
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
    return [f"protocol: {unit}",
            f"  warm-ups {s.warmups}..{s.max_warmups} per instance, {rule}; "
            f"M={s.repeats} measured per instance",
            f"  decision: ratio interval, one-sided {s.confidence:g} at each end (k={k} at "
            f"{len(arms[0])}+{len(arms[1])} values), target {s.target_ratio:g}; "
            f"B0 drift tolerance {_pct(s.drift_tolerance)}"]


def format_table(rows: Sequence[Row], ratios: Sequence[float], target: float) -> list[str]:
    head = ["design", "instance sd", f"false supported @{target:g}",
            *(f"power @{r:g}" for r in ratios), f"@{target:g}: unsteady / drift"]
    body = [[r.design, _pct(r.instance_sd), _pct(r.at_target.supported),
             *(_pct(p.supported) for p in r.power),
             f"{_pct(r.at_target.rate('warmup_not_steady'))} / "
             f"{_pct(r.at_target.rate('drift'))}"] for r in rows]
    widths = [max(len(line[c]) for line in [head, *body]) for c in range(len(head))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
            for line in [head, *body]]


# --- the command line (`ref2va-accept calibrate`) ----------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("campaign", type=Path)
    p.add_argument("--trials", type=int, default=4000, help="simulated runs per cell")
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


def run_command(args: argparse.Namespace) -> list[str]:
    """`ref2va-accept calibrate`: the campaign's protocol and its simulated error rates."""
    from .campaign import load_campaign  # noqa: PLC0415
    from .plan import plan_campaign  # noqa: PLC0415

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
    ids = [c.id for c in campaign.model.candidates]
    candidate = args.candidate or (ids[0] if ids else "candidate")
    if args.candidate is not None and args.candidate not in ids:
        raise Ref2VAError(f"--candidate {args.candidate!r} is not a candidate of "
                          f"{args.campaign}; its candidates are {', '.join(ids) or 'none'}")
    before = request_design_before(settings)
    span = max(len(replication.sequence(d, candidate)) for d in (settings, before)) - 1
    if 1 + drift * span <= 0:
        raise Ref2VAError(f"--drift {drift:g} makes the {span + 1}th instance's latency "
                          "non-positive")
    noise = Noise(within_sd=within, drift_per_instance=drift)
    rows = table([(f"campaign: {design_label(settings)}", settings),
                  (f"before #12: {design_label(before)}", before)],
                 candidate, noise, sds, ratios, args.trials, args.seed, exact=args.exact)
    error = 1.96 * math.sqrt(0.05 * 0.95 / args.trials)
    return [f"campaign: {args.campaign} (one protocol for its {len(plans)} tracks)",
            *protocol_lines(settings, candidate),
            f"simulation: {args.trials} trials per cell, seed {args.seed}; lognormal noise, "
            f"within-instance sd {_pct(within)}, drift {drift:g} per instance; decisions by "
            + ("replication.decide" if args.exact else
               "a vectorised replica of replication.decide (--exact: decide itself)"),
            "", *format_table(rows, ratios, settings.target_ratio), "",
            f"Monte-Carlo error: about +/-{error:.1%} (95%) on a rate near 5% at "
            f"{args.trials} trials; 'before #12' is {design_label(before)}, as before issue 12",
            *(["under drift the rates depend on the instances' order: --candidate ID simulates "
               "another candidate's"] if drift else []),
            *(["B0's instances are shared by a track's candidates: each candidate is judged on "
               "N B0 and N own values as simulated here (the pair design); on a track with K "
               "candidates its pairs sit in blocks of K+1 instances, which only drift can tell "
               "apart (--drift simulates pairs)"]
              if settings.baseline_instances == "shared" else [])]
