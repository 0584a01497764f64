"""Latency statistics for tiny samples: the ratio interval, the verdict, the tail-claim floor.

Three to six requests per arm is all the host affords, so nothing here leans on asymptotics:
the interval's k comes from the exact Mann-Whitney null distribution, and a tail percentile is
only claimed once MLPerf LoadGen's early-stopping rule says the sample is large enough.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any, Literal

Verdict = Literal["supported", "failed", "inconclusive"]
# The frozen decision rules (protocol.decision_rule). The rank interval is exact only when the
# candidate's values are B0's scaled by a constant; the one-sided Welch interval on log values
# assumes lognormal values per arm and lets each arm spread as it does (docs/protocol.md).
DecisionRule = Literal["ratio-interval-moses/1", "welch-log/1"]
RANK_RULE: DecisionRule = "ratio-interval-moses/1"
WELCH_RULE: DecisionRule = "welch-log/1"
DECISION_RULES: tuple[DecisionRule, ...] = (RANK_RULE, WELCH_RULE)

# Worse verdicts sort first; the property tests use this order.
VERDICT_ORDER: dict[str, int] = {"failed": 0, "inconclusive": 1, "supported": 2}


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


def interval_k(n_baseline: int, n_candidate: int, confidence: float = 0.95) -> int:
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


@dataclass(frozen=True)
class RatioInterval:
    """An interval for the candidate/baseline latency ratio, one-sided at `confidence` at each
    end: the distribution-free rank interval (Lehmann/Moses, `k`), or the Welch interval on log
    values (`df`, `se_log`; k is 0 there)."""

    lower: float | None
    upper: float | None
    k: int
    n_baseline: int
    n_candidate: int
    confidence: float
    ratios: tuple[float, ...]
    rule: DecisionRule = RANK_RULE
    df: float | None = None  # Welch-Satterthwaite degrees of freedom (Welch rule)
    se_log: float | None = None  # standard error of the log ratio (Welch rule)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule, "k": self.k, "lower": self.lower, "upper": self.upper,
            "n_baseline": self.n_baseline, "n_candidate": self.n_candidate,
            "confidence": self.confidence, "one_sided_each_end": True,
            "ratios": list(self.ratios)}
        if self.rule == WELCH_RULE:
            out["df"], out["se_log"] = self.df, self.se_log
        return out


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
                   confidence: float = 0.95) -> RatioInterval:
    """All C_i/B_j sorted; the k-th smallest and k-th largest bound the ratio (scale model)."""
    base = _check_latencies("baseline", baseline)
    cand = _check_latencies("candidate", candidate)
    ratios = tuple(sorted(c / b for c in cand for b in base))
    k = interval_k(len(base), len(cand), confidence)
    if k == 0:
        return RatioInterval(None, None, 0, len(base), len(cand), confidence, ratios)
    return RatioInterval(ratios[k - 1], ratios[len(ratios) - k], k, len(base), len(cand),
                         confidence, ratios)


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
                       confidence: float = 0.95) -> RatioInterval:
    """exp(mean log C - mean log B +/- t(confidence, df) * se): one-sided at each end, each
    arm with its own spread (Welch-Satterthwaite df). Bounds None when it cannot be formed."""
    if not 0.5 < confidence < 1:
        raise ValueError(f"confidence must be in (0.5, 1), got {confidence!r}")
    base = _check_latencies("baseline", baseline)
    cand = _check_latencies("candidate", candidate)
    ratios = tuple(sorted(c / b for c in cand for b in base))
    terms = welch_terms([math.log(b) for b in base], [math.log(c) for c in cand])
    if terms is None:
        return RatioInterval(None, None, 0, len(base), len(cand), confidence, ratios,
                             WELCH_RULE)
    diff, se, df = terms
    half = t_quantile(confidence, df) * se
    return RatioInterval(math.exp(diff - half), math.exp(diff + half), 0, len(base), len(cand),
                         confidence, ratios, WELCH_RULE, df, se)


def interval_for(rule: DecisionRule, baseline: Sequence[float], candidate: Sequence[float],
                 confidence: float) -> RatioInterval:
    if rule == WELCH_RULE:
        return welch_log_interval(baseline, candidate, confidence)
    if rule != RANK_RULE:
        raise ValueError(f"decision rule {rule!r} is not one of {', '.join(DECISION_RULES)}")
    return ratio_interval(baseline, candidate, confidence)


def p_value(rule: DecisionRule, baseline: Sequence[float], candidate: Sequence[float],
            target: float) -> float | None:
    """One-sided p-value of "the ratio is at or above the target" (small: evidence for
    supported), consistent with the interval: p <= 1 - confidence exactly when upper <= target.
    Holm's family-wise column is computed from these. None when it cannot be formed."""
    base = _check_latencies("baseline", baseline)
    cand = _check_latencies("candidate", candidate)
    if rule == WELCH_RULE:
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


@dataclass(frozen=True)
class TailClaim:
    """A percentile the sample may claim; value None (null) below the early-stopping floor."""

    percentile: float
    value: float | None
    samples: int
    required: int
    arm: str = "candidate"

    def to_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "percentile": self.percentile, "value": self.value,
                "samples": self.samples, "required": self.required}


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
        claims.append(TailClaim(percentile, value, len(ordered), required, arm))
    return claims


# --- the latency verdict -----------------------------------------------------------------------

SINGLE_INSTANCE_NOTE = ("one server instance per arm: the interval speaks of variation inside "
                        "one instance per arm, not of variation between instances")
Unit = Literal["instance", "request"]


def unit_note(unit: Unit, single_instance: bool, instances_per_arm: int | None) -> str:
    """What the interval's samples are, as the report says it next to every interval."""
    if unit == "instance":
        n = "N" if instances_per_arm is None else str(instances_per_arm)
        return (f"unit: server instance ({n} fresh instances per arm; one value per instance, "
                "the median of its measured requests)")
    base = "unit: request (every measured request a sample)"
    return f"{base}; {SINGLE_INSTANCE_NOTE}" if single_instance else base


@dataclass(frozen=True)
class LatencyVerdict:
    """The interval verdict for one track and candidate, with every number it rests on."""

    verdict: Verdict
    reasons: tuple[str, ...]
    target: float
    interval: RatioInterval
    ratio_of_medians: float
    ratio_of_means: float
    baseline: tuple[float, ...]
    candidate: tuple[float, ...]
    tails: tuple[TailClaim, ...]
    note: str
    unit: Unit = "request"
    p_value: float | None = None  # of "ratio >= target" under the rule (stats.p_value)

    @property
    def rule(self) -> DecisionRule:
        return self.interval.rule

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reasons": list(self.reasons), "target": self.target,
                "rule": self.rule, "p_value": self.p_value,
                "confidence": self.interval.confidence, "interval": self.interval.to_dict(),
                "ratio_of_medians": self.ratio_of_medians,
                "ratio_of_means": self.ratio_of_means,
                "baseline": list(self.baseline), "candidate": list(self.candidate),
                "tails": [t.to_dict() for t in self.tails], "note": self.note,
                "unit": self.unit}


def latency_verdict(baseline: Sequence[float], candidate: Sequence[float], target: float = 0.5,
                    confidence: float = 0.95, *, single_instance: bool = True,
                    unit: Unit = "request", instances_per_arm: int | None = None,
                    rule: DecisionRule = RANK_RULE) -> LatencyVerdict:
    """supported: upper <= target; failed: lower > target; inconclusive otherwise."""
    if not (math.isfinite(target) and target > 0):
        raise ValueError(f"target ratio {target!r} is not a positive finite number")
    base = _check_latencies("baseline", baseline)
    cand = _check_latencies("candidate", candidate)
    interval = interval_for(rule, base, cand, confidence)
    verdict: Verdict
    if interval.upper is None or interval.lower is None:
        few = rule == RANK_RULE or min(len(base), len(cand)) < 2
        verdict, reasons = "inconclusive", ("too_few_samples" if few else "no_spread",)
    elif interval.upper <= target:
        verdict, reasons = "supported", ("interval_upper_at_or_below_target",)
    elif interval.lower > target:
        verdict, reasons = "failed", ("interval_lower_above_target",)
    else:
        verdict, reasons = "inconclusive", ("interval_spans_target",)
    tails = (*tail_claims(base, arm="baseline"), *tail_claims(cand, arm="candidate"))
    return LatencyVerdict(
        verdict=verdict, reasons=reasons, target=target, interval=interval,
        ratio_of_medians=statistics.median(cand) / statistics.median(base),
        ratio_of_means=statistics.fmean(cand) / statistics.fmean(base),
        baseline=base, candidate=cand, tails=tails,
        note=unit_note(unit, single_instance, instances_per_arm), unit=unit,
        p_value=p_value(rule, base, cand, target),
    )
