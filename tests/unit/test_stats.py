"""The ratio interval, the latency verdict, the tail floor and `ref2va-accept verdict`."""

from __future__ import annotations

import itertools
import json
import logging
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ref2va_accept.core import DecisionRule, Verdict
from ref2va_accept.timing import _stats as stats
from ref2va_accept.timing import (
    early_stopping_min_queries,
    interval_k,
    latency_verdict,
    mann_whitney_counts,
    ratio_interval,
    tail_claims,
)

ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger(__name__)


def _brute_counts(m: int, n: int) -> list[int]:
    # Every way to choose which of m + n ranks the baseline holds; U counts the (candidate,
    # baseline) pairs in which the candidate ranks higher.
    counts = [0] * (m * n + 1)
    for baseline_ranks in itertools.combinations(range(m + n), m):
        chosen = set(baseline_ranks)
        u = sum(1 for c in range(m + n) if c not in chosen for b in baseline_ranks if c > b)
        counts[u] += 1
    return counts


@pytest.mark.parametrize(("m", "n"), [(m, n) for m in range(1, 7) for n in range(1, 7)])
def test_counts_match_enumeration(m: int, n: int) -> None:
    assert mann_whitney_counts(m, n) == _brute_counts(m, n)
    assert sum(mann_whitney_counts(m, n)) == math.comb(m + n, m)


@pytest.mark.parametrize(("n", "k"), [(3, 1), (4, 2), (5, 5), (6, 8)])
def test_k_reproduces_the_protocol_table(n: int, k: int) -> None:
    assert interval_k(n, n, 0.95) == k


@pytest.mark.parametrize(("m", "n"), [(m, n) for m in range(1, 8) for n in range(1, 8)])
def test_k_is_the_largest_within_alpha(m: int, n: int) -> None:
    counts, total = _brute_counts(m, n), math.comb(m + n, m)
    k = interval_k(m, n, 0.95)
    assert Fraction(sum(counts[:k]), total) <= Fraction(1, 20)
    assert Fraction(sum(counts[:k + 1]), total) > Fraction(1, 20)


def test_no_interval_for_too_few_samples() -> None:
    assert interval_k(2, 2) == 0
    result = latency_verdict([300.0, 301.0], [100.0, 101.0])
    assert (result.interval.lower, result.interval.upper) == (None, None)
    assert result.verdict == "inconclusive" and result.reasons == ("too_few_samples",)


@pytest.mark.parametrize("seed", range(5))
def test_interval_bounds_are_kth_order_statistics_of_all_ratios(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(3, 7)), int(rng.integers(3, 7))
    base, cand = list(rng.uniform(100, 400, m)), list(rng.uniform(50, 300, n))
    everything = sorted(c / b for c in cand for b in base)
    k = interval_k(m, n)
    result = ratio_interval(base, cand)
    assert result.ratios == tuple(everything)
    assert result.lower == everything[k - 1] and result.upper == everything[-k]


BASE = [300.0, 298.0, 305.0]


@pytest.mark.parametrize(("candidate", "verdict"), [
    ([140.0, 149.0, 139.0], "supported"),      # max(C) = 149 = 0.5 * min(B): inclusive
    ([140.0, 145.0, 139.0], "supported"),
    ([140.0, 151.0, 139.0], "inconclusive"),   # 151 > 149
    ([140.0, 151.0, 150.0], "inconclusive"),
    ([160.0, 170.0, 165.0], "failed"),         # min(C)/max(B) = 160/305 > 0.5
])
def test_hand_worked_n3(candidate: list[float], verdict: str) -> None:
    result = latency_verdict(BASE, candidate)
    assert result.verdict == verdict
    assert (result.verdict == "supported") == (max(candidate) <= 0.5 * min(BASE))
    assert result.interval.upper == max(candidate) / min(BASE)
    assert result.interval.lower == min(candidate) / max(BASE)


def test_verdict_reports_raw_numbers_and_note() -> None:
    result = latency_verdict(BASE, [140.0, 145.0, 139.0])
    payload = json.loads(json.dumps(result.json_dict()))
    assert payload["baseline"] == BASE and payload["candidate"] == [140.0, 145.0, 139.0]
    assert payload["ratio_of_medians"] == pytest.approx(140 / 300)
    assert payload["ratio_of_means"] == pytest.approx(424 / 903)
    assert "inside one instance per arm" in payload["note"]
    several = latency_verdict(BASE, [140.0, 145.0, 139.0], single_instance=False)
    assert several.note == "unit: request (every measured request a sample)"
    instance = latency_verdict(BASE, [140.0, 145.0, 139.0], unit="instance", instances_per_arm=3)
    assert instance.unit == "instance" and "3 fresh instances per arm" in instance.note
    assert instance.json_dict()["unit"] == "instance"


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_rejects_non_positive_or_non_finite_latency(bad: float) -> None:
    with pytest.raises(ValueError, match=r"candidate sample 2: latency"):
        latency_verdict(BASE, [140.0, bad, 139.0])


arms = st.lists(st.floats(1.0, 1000.0), min_size=3, max_size=6)


def _near_target(result_bounds: tuple[float | None, float | None], target: float) -> bool:
    # Scaling is exact in real arithmetic; in floats a bound sitting on the target can move by
    # an ulp either way, so exact ties are left out of the property.
    return any(b is not None and abs(b / target - 1) < 1e-9 for b in result_bounds)


@settings(max_examples=200, deadline=None)
@given(arms, arms, st.floats(1e-3, 1e3))
def test_scaling_both_arms_keeps_the_verdict(base: list[float], cand: list[float],
                                             factor: float) -> None:
    before = latency_verdict(base, cand)
    if _near_target((before.interval.lower, before.interval.upper), 0.5):
        return
    after = latency_verdict([b * factor for b in base], [c * factor for c in cand])
    assert after.verdict == before.verdict


@settings(max_examples=200, deadline=None)
@given(arms, arms, st.data())
def test_faster_candidate_never_gets_a_worse_verdict(base: list[float], cand: list[float],
                                                     data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(cand) - 1))
    factor = data.draw(st.floats(0.01, 1.0))
    faster = list(cand)
    faster[index] *= factor
    worse_first = (Verdict.FAILED, Verdict.INCONCLUSIVE, Verdict.SUPPORTED)
    assert (worse_first.index(latency_verdict(base, faster).verdict)
            >= worse_first.index(latency_verdict(base, cand).verdict))


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_candidate_exactly_at_target_is_rarely_supported(n: int) -> None:
    trials, cv = 20_000, 0.03
    rng = np.random.default_rng(20_240 + n)
    base = 300.0 * rng.lognormal(0.0, cv, (trials, n))
    cand = 150.0 * rng.lognormal(0.0, cv, (trials, n))
    ratios = np.sort((cand[:, :, None] / base[:, None, :]).reshape(trials, -1), axis=1)
    k = interval_k(n, n)
    rate = float(np.mean(ratios[:, -k] <= 0.5))
    counts = mann_whitney_counts(n, n)
    exact = sum(counts[:k]) / sum(counts)  # the size the rule is built to have
    log.info("n=%d: supported at true ratio 0.5 in %.4f of %d trials (exact size %.4f)",
             n, rate, trials, exact)
    assert exact <= 0.05
    # Four standard errors above the exact size: a seed cannot make this pass or fail by luck.
    assert rate <= exact + 4 * math.sqrt(exact * (1 - exact) / trials)
    assert rate <= 0.055


def test_early_stopping_floor_matches_loadgen() -> None:
    assert early_stopping_min_queries(0.90, 0.99, 0) == 64
    assert early_stopping_min_queries(0.99, 0.99, 0) == 662


def test_tails_are_null_below_the_floor() -> None:
    claims = tail_claims([float(i) for i in range(1, 64)])
    assert [(c.percentile, c.value, c.samples, c.required) for c in claims] == [
        (0.90, None, 63, 64), (0.99, None, 63, 662)]
    p90 = tail_claims([float(i) for i in range(1, 65)], (0.90,))[0]
    assert p90.value == 64.0  # at the floor, LoadGen's estimate is the largest latency
    assert all(t.value is None for t in latency_verdict(BASE, [140.0, 145.0, 139.0]).tails)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ref2va_accept.cli", "verdict", *args],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)


RANK_AT_095 = ("--rule", "ratio-interval-moses/1", "--confidence", "0.95")


def test_cli_prints_interval_and_verdict() -> None:
    result = _cli("--baseline", "301.2,298.0,305.5", "--candidate", "140,151,139", *RANK_AT_095)
    assert result.returncode == 0, result.stderr
    assert "k=1 lower=0.4550 upper=0.5067" in result.stdout
    assert "verdict: inconclusive (interval_spans_target)" in result.stdout
    assert "tail candidate p90: null (3 samples; early stopping needs 64)" in result.stdout


def test_cli_json_parses() -> None:
    result = _cli("--baseline", "300,298,305", "--candidate", "140,149,139", "--json",
                  *RANK_AT_095)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["verdict"] == "supported"
    assert payload["interval"]["k"] == 1 and payload["interval"]["upper"] == 0.5
    assert {(t["arm"], t["value"], t["required"]) for t in payload["tails"]} == {
        ("baseline", None, 64), ("baseline", None, 662),
        ("candidate", None, 64), ("candidate", None, 662)}


def test_cli_defaults_to_the_shipped_campaigns_rule() -> None:
    # Welch on log values at 0.96 (fixtures/campaigns/*.yaml; test_calibration holds them equal).
    result = _cli("--baseline", "301.2,298.0,305.5", "--candidate", "140,151,139")
    assert result.returncode == 0, result.stderr
    assert "Welch interval on log values: lower=" in result.stdout
    assert "(one-sided 0.96 at each end, df " in result.stdout
    assert "k=" not in result.stdout


@pytest.mark.parametrize("values", ["301.2,abc,305", "301.2,-4,305", "nan,1,2", ""])
def test_cli_malformed_numbers_exit_2_with_one_line(values: str) -> None:
    result = _cli("--baseline", values, "--candidate", "140,151,139")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# --- the Welch rule on log values ---------------------------------------------------------------

def test_welch_interval_is_scipys_welch_test_on_log_values() -> None:
    from scipy import stats as sps

    base, cand = [301.2, 298.0, 305.5], [140.0, 151.0, 147.5]
    interval = stats.welch_log_interval(base, cand, 0.955)
    lb, lc = np.log(base), np.log(cand)
    res = sps.ttest_ind(lc, lb, equal_var=False, alternative="less")
    ci = res.confidence_interval(0.955)
    assert interval.rule == DecisionRule.WELCH and interval.k == 0
    assert math.log(interval.upper) == pytest.approx(ci.high, rel=1e-9)
    assert interval.df == pytest.approx(res.df, rel=1e-9)
    # p of "ratio >= target" is scipy's one-sided p for the shifted null
    shifted = sps.ttest_ind(lc - math.log(0.5), lb, equal_var=False, alternative="less")
    assert stats.p_value(DecisionRule.WELCH, base, cand, 0.5) == pytest.approx(shifted.pvalue)


@pytest.mark.parametrize("rule", tuple(DecisionRule))
@given(base=st.lists(st.floats(1.0, 100.0), min_size=2, max_size=6),
       cand=st.lists(st.floats(0.2, 100.0), min_size=2, max_size=6),
       target=st.floats(0.1, 0.9))
@settings(max_examples=150, deadline=None)
def test_the_p_value_says_supported_exactly_when_the_interval_does(
        rule: DecisionRule, base: list[float], cand: list[float], target: float) -> None:
    verdict = stats.latency_verdict(base, cand, target, 0.955, rule=rule)
    if verdict.p_value is None or verdict.interval.upper is None:
        assert verdict.verdict == "inconclusive"
        return
    upper = verdict.interval.upper
    if abs(upper / target - 1) < 1e-9:  # on the boundary, rounding may decide either way
        return
    assert (verdict.p_value <= 1 - 0.955 + 1e-12) == (upper <= target), (verdict.p_value, upper)


def test_welch_needs_two_values_per_arm_and_some_spread() -> None:
    few = stats.latency_verdict([300.0], [140.0, 141.0], rule=DecisionRule.WELCH)
    assert (few.verdict, few.reasons) == ("inconclusive", ("too_few_samples",))
    flat = stats.latency_verdict([300.0, 300.0], [140.0, 140.0], rule=DecisionRule.WELCH)
    assert (flat.verdict, flat.reasons) == ("inconclusive", ("no_spread",))
    assert flat.p_value is None


def test_welch_decides_both_ways() -> None:
    fast = stats.latency_verdict([300.0, 310.0, 295.0], [120.0, 124.0, 118.0],
                                 rule=DecisionRule.WELCH, confidence=0.955)
    assert fast.verdict == "supported" and fast.json_dict()["rule"] == "welch-log/1"
    slow = stats.latency_verdict([300.0, 310.0, 295.0], [200.0, 210.0, 190.0],
                                 rule=DecisionRule.WELCH, confidence=0.955)
    assert slow.verdict == "failed"
    near = stats.latency_verdict([300.0, 330.0, 280.0], [150.0, 140.0, 160.0],
                                 rule=DecisionRule.WELCH, confidence=0.955)
    assert near.verdict == "inconclusive"
