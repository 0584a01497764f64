"""Latency statistics for tiny samples: the ratio interval, the verdict, the tail-claim floor.

Three to six requests per arm is all the host affords, so nothing here leans on asymptotics:
the interval's k comes from the exact Mann-Whitney null distribution, and a tail percentile is
only claimed once MLPerf LoadGen's early-stopping rule says the sample is large enough.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache

from ref2va_accept.core import (
    DEFAULT_CONFIDENCE,
    DEFAULT_DECISION_RULE,
    DEFAULT_TARGET_RATIO,
    DecisionRule,
    IntervalReason,
    Unit,
    Verdict,
    enum_member,
)
from ref2va_accept.evidence import LatencyInterval, RatioInterval, TailClaim


@lru_cache(maxsize=256)
def _counts(m: int, n: int) -> tuple[int, ...]:
    # Coefficients of the Gaussian binomial [m+n choose m]_q: the number of orderings of m
    # baseline and n candidate values in which exactly u (candidate, baseline) pairs are inverted.
    if m == 0 or n == 0:
        return (1,)
    left = _counts(m - 1, n)  # the largest value is a baseline value: it inverts n pairs
    right = _counts(m, n - 1)  # the largest value is a candidate value: it inverts none
    out = [0] * (m * n + 1)
    for u, count in enumerate(left):
        out[u + n] += count
    for u, count in enumerate(right):
        out[u] += count
    return tuple(out)


def mann_whitney_counts(m: int, n: int) -> list[int]:
    """Exact null distribution of U for sizes m, n: how many arrangements give U = 0..m*n."""
    if m < 0 or n < 0:
        raise ValueError(f"sample sizes must be non-negative, got m={m}, n={n}")
    return list(_counts(m, n))


def _exact(confidence: float) -> Fraction:
    # From the decimal text, so that 0.95 means 19/20 and the table's boundary cases (n = 3 has
    # P(U = 0) = 1/20 exactly) are not decided by binary rounding.
    return Fraction(repr(confidence))


def interval_k(n_baseline: int, n_candidate: int, confidence: float = DEFAULT_CONFIDENCE
               ) -> int:
    """Largest k with P(U <= k-1) <= 1 - confidence; 0 when even k = 1 is too wide a claim."""
    if not 0.5 < confidence < 1:
        raise ValueError(f"confidence must be in (0.5, 1), got {confidence!r}")
    if n_baseline < 1 or n_candidate < 1:
        return 0
    counts = _counts(n_baseline, n_candidate)
    total = sum(counts)
    alpha = 1 - _exact(confidence)
    k, cumulative = 0, 0
    for count in counts:
        cumulative += count
        if Fraction(cumulative, total) > alpha:
            break
        k += 1
    return k


def _interval(lower: float | None, upper: float | None, k: int, base: Sequence[float],
              cand: Sequence[float], confidence: float, ratios: Sequence[float],
              rule: DecisionRule, welch: tuple[float | None, float | None] | None = None
              ) -> RatioInterval:
    """The interval's record: one-sided at `confidence` at each end; the Welch rule's degrees of
    freedom and standard error of the log ratio (`welch`) are set for that rule only, so the
    rank rule's record carries neither."""
    extra = {} if welch is None else {"df": welch[0], "se_log": welch[1]}
    return RatioInterval(rule=rule, k=k, lower=lower, upper=upper, n_baseline=len(base),
                         n_candidate=len(cand), confidence=confidence, one_sided_each_end=True,
                         ratios=tuple(ratios), **extra)


def _check_latencies(arm: str, values: Sequence[float]) -> tuple[float, ...]:
    if len(values) == 0:
        raise ValueError(f"{arm}: no latencies; expected at least one")
    checked = []
    for index, value in enumerate(values, start=1):
        number = float(value)
        if not math.isfinite(number) or number <= 0:
            raise ValueError(f"{arm} sample {index}: latency {value!r} is not a positive finite "
                             "number of seconds")
        checked.append(number)
    return tuple(checked)


def ratio_interval(baseline: Sequence[float], candidate: Sequence[float],
                   confidence: float = DEFAULT_CONFIDENCE) -> RatioInterval:
    """All C_i/B_j sorted; the k-th smallest and k-th largest bound the ratio (scale model)."""
    base = _check_latencies("baseline", baseline)
    cand = _check_latencies("candidate", candidate)
    ratios = tuple(sorted(c / b for c in cand for b in base))
    k = interval_k(len(base), len(cand), confidence)
    if k == 0:
        return _interval(None, None, 0, base, cand, confidence, ratios, DecisionRule.RANK)
    return _interval(ratios[k - 1], ratios[len(ratios) - k], k, base, cand, confidence, ratios,
                     DecisionRule.RANK)


def welch_terms(log_baseline: Sequence[float], log_candidate: Sequence[float]
                ) -> tuple[float, float, float] | None:
    """(mean log ratio, its standard error, Welch-Satterthwaite df) of two samples of log
    values; None when an arm has fewer than two values or neither arm spreads at all."""
    nb, nc = len(log_baseline), len(log_candidate)
    if nb < 2 or nc < 2:
        return None
    vb = statistics.variance(log_baseline) / nb
    vc = statistics.variance(log_candidate) / nc
    se = math.sqrt(vb + vc)
    if not math.isfinite(se) or se == 0:
        return None
    df = (vb + vc) ** 2 / (vb ** 2 / (nb - 1) + vc ** 2 / (nc - 1))
    return statistics.fmean(log_candidate) - statistics.fmean(log_baseline), se, df


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (scipy.special, imported where needed: see _odds)."""
    from scipy.special import stdtrit  # noqa: PLC0415

    return float(stdtrit(df, p))


def welch_log_interval(baseline: Sequence[float], candidate: Sequence[float],
                       confidence: float = DEFAULT_CONFIDENCE) -> RatioInterval:
    """exp(mean log C - mean log B +/- t(confidence, df) * se): one-sided at each end, each
    arm with its own spread (Welch-Satterthwaite df). Bounds None when it cannot be formed."""
    if not 0.5 < confidence < 1:
        raise ValueError(f"confidence must be in (0.5, 1), got {confidence!r}")
    base = _check_latencies("baseline", baseline)
    cand = _check_latencies("candidate", candidate)
    ratios = tuple(sorted(c / b for c in cand for b in base))
    terms = welch_terms([math.log(b) for b in base], [math.log(c) for c in cand])
    if terms is None:
        return _interval(None, None, 0, base, cand, confidence, ratios, DecisionRule.WELCH,
                         welch=(None, None))
    diff, se, df = terms
    half = t_quantile(confidence, df) * se
    return _interval(math.exp(diff - half), math.exp(diff + half), 0, base, cand, confidence,
                     ratios, DecisionRule.WELCH, welch=(df, se))


def interval_for(rule: DecisionRule, baseline: Sequence[float], candidate: Sequence[float],
                 confidence: float) -> RatioInterval:
    if rule == DecisionRule.WELCH:
        return welch_log_interval(baseline, candidate, confidence)
    if rule != DecisionRule.RANK:
        raise ValueError(f"decision rule {rule!r} is not one of {', '.join(DecisionRule)}")
    return ratio_interval(baseline, candidate, confidence)


def p_value(rule: DecisionRule, baseline: Sequence[float], candidate: Sequence[float],
            target: float) -> float | None:
    """One-sided p-value of "the ratio is at or above the target" (small: evidence for
    supported), consistent with the interval: p <= 1 - confidence exactly when upper <= target.
    Holm's family-wise column is computed from these. None when it cannot be formed."""
    base = _check_latencies("baseline", baseline)
    cand = _check_latencies("candidate", candidate)
    if rule == DecisionRule.WELCH:
        terms = welch_terms([math.log(b) for b in base], [math.log(c) for c in cand])
        if terms is None:
            return None
        diff, se, df = terms
        from scipy.special import stdtr  # noqa: PLC0415

        return float(stdtr(df, (diff - math.log(target)) / se))
    # Rank rule: U counts the pairs whose ratio is above the target; under the null (C/target
    # distributed as B) P(U <= u) is the exact Mann-Whitney tail.
    inverted = sum(1 for c in cand for b in base if c / b > target)
    counts = _counts(len(base), len(cand))
    return float(Fraction(sum(counts[:inverted + 1]), sum(counts)))


# --- tails: MLPerf LoadGen's early-stopping rule ------------------------------------------------

def _odds(h: int, t: int, percentile: float, tolerance: float) -> float:
    # P(at most t of h + t queries exceed the percentile's latency) when each exceeds it with
    # probability 1 - (percentile - tolerance): the binomial CDF, as a regularised beta.
    # scipy is imported here, where it is needed: every pytest session imports this module
    # through the plugin's live progress, and scipy costs it seconds for nothing.
    from scipy.special import betainc  # noqa: PLC0415

    return float(betainc(h, t + 1, percentile - tolerance))


def _min_passing(t: int, percentile: float, tolerance: float, confidence: float) -> int:
    # Smallest h with _odds < 1 - confidence; _odds falls as h grows, so search by doubling then
    # bisecting. Strict, as LoadGen's search compares.
    target = 1 - confidence
    high = 1
    while _odds(high, t, percentile, tolerance) >= target:
        high *= 2
    low = high // 2 + 1 if high > 1 else 1
    while low < high:
        middle = (low + high) // 2
        if _odds(middle, t, percentile, tolerance) < target:
            high = middle
        else:
            low = middle + 1
    return low


def _check_tail_args(percentile: float, confidence: float, tolerance: float) -> None:
    if not 0 < percentile < 1:
        raise ValueError(f"percentile must be in (0, 1), got {percentile!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if not 0 <= tolerance < percentile:
        raise ValueError(f"tolerance must be in [0, percentile), got {tolerance!r}")


def early_stopping_min_queries(percentile: float, confidence: float = 0.99,
                               tolerance: float = 0) -> int:
    """Fewest queries for which LoadGen's early stopping yields a percentile estimate at all.

    LoadGen (SingleStream) asks for h_min + 1 queries, h_min being the least h such that
    P(Binomial(h + 1, 1 - percentile + tolerance) <= 1) < 1 - confidence: 64 for p90 and 662 for
    p99 at confidence 0.99, tolerance 0.
    """
    _check_tail_args(percentile, confidence, tolerance)
    return _min_passing(1, percentile, tolerance, confidence) + 1


def _early_stopping_estimate(ordered: Sequence[float], percentile: float, confidence: float,
                             tolerance: float) -> float:
    # LoadGen's estimate: with t the largest count such that n >= h_min(t) + t, the t-th largest
    # latency bounds the true percentile from above at the given confidence.
    n, t = len(ordered), 1
    while n >= _min_passing(t + 1, percentile, tolerance, confidence) + t + 1:
        t += 1
    return ordered[n - t]


def tail_claims(samples: Sequence[float], percentiles: Sequence[float] = (0.90, 0.99),
                confidence: float = 0.99, tolerance: float = 0, *,
                arm: str = "candidate") -> list[TailClaim]:
    """One claim per percentile: its early-stopping estimate, or None and the count it needs."""
    ordered = sorted(float(s) for s in samples)
    claims = []
    for percentile in percentiles:
        required = early_stopping_min_queries(percentile, confidence, tolerance)
        value = (_early_stopping_estimate(ordered, percentile, confidence, tolerance)
                 if len(ordered) >= required else None)
        claims.append(TailClaim(arm=arm, percentile=percentile, value=value,
                                 samples=len(ordered), required=required))
    return claims


# --- the latency verdict -----------------------------------------------------------------------

SINGLE_INSTANCE_NOTE = ("one server instance per arm: the interval speaks of variation inside "
                        "one instance per arm, not of variation between instances")


def unit_note(unit: Unit, single_instance: bool, instances_per_arm: int | None) -> str:
    """What the interval's samples are, as the report says it next to every interval."""
    if unit == Unit.INSTANCE:
        n = "N" if instances_per_arm is None else str(instances_per_arm)
        return (f"unit: server instance ({n} fresh instances per arm; one value per instance, "
                "the median of its measured requests)")
    base = "unit: request (every measured request a sample)"
    return f"{base}; {SINGLE_INSTANCE_NOTE}" if single_instance else base


def latency_verdict(baseline: Sequence[float], candidate: Sequence[float],
                    target: float = DEFAULT_TARGET_RATIO, confidence: float = DEFAULT_CONFIDENCE,
                    *, single_instance: bool = True, unit: Unit = Unit.REQUEST,
                    instances_per_arm: int | None = None,
                    rule: DecisionRule = DEFAULT_DECISION_RULE) -> LatencyInterval:
    """supported: upper <= target; failed: lower > target; inconclusive otherwise."""
    if not (math.isfinite(target) and target > 0):
        raise ValueError(f"target ratio {target!r} is not a positive finite number")
    base = _check_latencies("baseline", baseline)
    cand = _check_latencies("candidate", candidate)
    interval = interval_for(rule, base, cand, confidence)
    reason: IntervalReason
    if interval.upper is None or interval.lower is None:
        few = rule == DecisionRule.RANK or min(len(base), len(cand)) < 2
        verdict = Verdict.INCONCLUSIVE
        reason = IntervalReason.TOO_FEW_SAMPLES if few else IntervalReason.NO_SPREAD
    elif interval.upper <= target:
        verdict, reason = Verdict.SUPPORTED, IntervalReason.UPPER_AT_OR_BELOW_TARGET
    elif interval.lower > target:
        verdict, reason = Verdict.FAILED, IntervalReason.LOWER_ABOVE_TARGET
    else:
        verdict, reason = Verdict.INCONCLUSIVE, IntervalReason.SPANS_TARGET
    tails = (*tail_claims(base, arm="baseline"), *tail_claims(cand, arm="candidate"))
    return LatencyInterval(
        verdict=verdict, reasons=(reason,), target=target, rule=interval.rule,
        p_value=p_value(rule, base, cand, target), confidence=interval.confidence,
        interval=interval, ratio_of_medians=statistics.median(cand) / statistics.median(base),
        ratio_of_means=statistics.fmean(cand) / statistics.fmean(base),
        baseline=base, candidate=cand, tails=tails,
        note=unit_note(unit, single_instance, instances_per_arm),
        unit=enum_member(Unit, unit, "unit"),
    )
