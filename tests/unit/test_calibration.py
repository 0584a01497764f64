"""`ref2va-accept calibrate`: the frozen latency protocol's error rates, by simulation.

The claims (issues 12 and 41): the instance design of the shipped campaigns says `supported` at
a true ratio of exactly the target in at most 5% of runs, in every one-attempt cell of the
calibration (spreads equal and unequal, heavy tails, drift, several candidates on one B0); the
request-level ABA design used before does not; the instance design has power.

Each rate is judged by its exact (Clopper-Pearson) two-sided 95% interval at the trials and seed
the test names, nothing looser: "at most p" is asserted as the interval's upper end <= p (shown,
not merely unrefuted), "above p" as its lower end > p. The simulations are seeded, so a test
gives the same counts on every run; the bound says what those counts show about the rate. The
5% claim over every cell is shown at 40,000 trials per cell, as `calibrate` shows it
(docs/protocol.md, calibration).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

from ref2va_accept.campaign import load_campaign
from ref2va_accept.cli import main
from ref2va_accept.core import (
    CALIBRATED_CONFIDENCE,
    CALIBRATED_DECISION_RULE,
    ArmRole,
    DecisionRule,
    LatencyDecisionReason,
)
from ref2va_accept.planning import _calibration as cal
from ref2va_accept.planning import _calibration_cells as cal_cells
from ref2va_accept.planning import _calibration_text as cal_text
from ref2va_accept.planning import plan_campaign
from ref2va_accept.timing import (
    LatencySettings,
    candidate_schedule,
    latency_schedule,
    latency_verdict,
)

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN_910C = ROOT / "fixtures" / "campaigns" / "910c.yaml"
CLAIM_TRIALS = 40_000  # per cell, as `calibrate` runs by default (and docs/protocol.md shows)


def _settings(name: str = "910c") -> LatencySettings:
    plans = plan_campaign(load_campaign(ROOT / "fixtures" / "campaigns" / f"{name}.yaml"))
    return next(iter(plans.values())).latency


def _upper(rates: cal.Rates) -> float:
    """The upper end of the exact two-sided 95% interval of the `supported` rate."""
    return rates.supported_bounds[1]


def _lower(rates: cal.Rates) -> float:
    """The lower end of the exact two-sided 95% interval of the `supported` rate."""
    return rates.supported_bounds[0]


@pytest.mark.fast
@pytest.mark.parametrize(("hits", "trials"), [(0, 50), (3, 50), (50, 50), (2000, 40_000),
                                              (1804, 40_000), (37, 1500)])
def test_the_bound_is_the_exact_clopper_pearson_interval(hits: int, trials: int) -> None:
    interval = binomtest(hits, trials).proportion_ci(0.95, method="exact")
    lower, upper = cal.clopper_pearson(hits, trials)
    assert (lower, upper) == pytest.approx((interval.low, interval.high), rel=1e-9, abs=1e-12)
    assert lower <= hits / trials <= upper


@pytest.mark.fast
def test_a_rate_of_5_percent_at_40000_trials_is_not_shown_at_most_5_percent() -> None:
    # The issue's figure: the old worst cell, 5.0% at 40,000 trials, has its upper end at 5.22%.
    assert cal.clopper_pearson(2000, 40_000)[1] == pytest.approx(0.05218, abs=1e-5)
    with pytest.raises(ValueError, match="not a binomial count"):
        cal.clopper_pearson(5, 4)


def test_the_shipped_campaign_is_the_design_the_claims_are_about() -> None:
    s = _settings()
    assert (s.replication, s.instances_per_arm, s.warmups, s.max_warmups, s.repeats,
            s.ordering, s.target_ratio) == ("instance", 3, 2, 3, 1, "interleaved", 0.5)
    before = cal_cells.request_design_before(s)
    assert (before.replication, before.ordering, before.warmups, before.max_warmups,
            before.steady_fraction, before.repeats, before.instances_per_arm) == (
        "request", "ABA", 1, 1, None, 3, None)
    assert candidate_schedule(before, "c") == ["b0", "c", "b0"]


@pytest.mark.parametrize("instance_sd", [0.0, 0.01, 0.03, 0.05])
def test_instance_design_says_supported_at_the_target_at_most_5_percent(instance_sd: float
                                                                       ) -> None:
    # The protocol's own decision (replication.decide) on every trial, 1,500 seeded trials:
    # the rate's 95% upper bound is at most 5% (3.2-3.8% observed, bounds 4.2-4.9%) ...
    rates = cal.simulate(_settings(), "cache-dit", cal.Noise(instance_sd=instance_sd), 0.5,
                         1500, (12, int(instance_sd * 100)), exact=True)
    assert _upper(rates) <= 0.05, (rates, _upper(rates))
    # ... and above 2%, not 0: the test would see a design that is too strict.
    assert _lower(rates) > 0.02, rates


def test_the_request_design_before_issue_12_exceeds_5_percent() -> None:
    before = cal_cells.request_design_before(_settings())
    rates = cal.simulate(before, "cache-dit", cal.Noise(instance_sd=0.03), 0.5, 1000, 3,
                         exact=True)
    assert _lower(rates) > 0.15, rates  # the issue measured 26%: far above 5%
    # Without spread between instances its rate is the rank rule's exact level, 4/84 = 4.8%:
    # 1,000 trials cannot tell that from 5%, and the test says no more than that.
    calm = cal.simulate(before, "cache-dit", cal.Noise(instance_sd=0.0), 0.5, 1000, 3,
                        exact=True)
    assert calm.supported_bounds[0] <= 4 / 84 <= calm.supported_bounds[1], calm


def test_instance_design_has_power_at_a_true_ratio_of_0_45() -> None:
    # replication.decide itself at the frozen 0.96: at least 85% (lower 95% bound) with 3%
    # instance sd at 800 seeded trials (88.9% observed), all but certain with 1%.
    rates = cal.simulate(_settings(), "cache-dit", cal.Noise(instance_sd=0.03), 0.45, 800, 4,
                         exact=True)
    assert _lower(rates) > 0.85, (rates, _lower(rates))
    steady = cal.simulate(_settings(), "cache-dit", cal.Noise(instance_sd=0.01), 0.45, 300, 4,
                          exact=True)
    assert _lower(steady) > 0.97, steady


def test_the_draws_follow_the_documented_noise_model() -> None:
    s = dataclasses.replace(_settings(), repeats=2)
    noise = cal.Noise(within_sd=0.02, instance_sd=0.04, drift_per_instance=0.01,
                      first_request_factor=1.5)
    d = cal.draw(s, "cache-dit", noise, 0.45, 40_000, np.random.default_rng(7))
    logs = np.log(d.measured)
    # within: two requests of one instance differ by within_sd * sqrt(2) in the log
    assert np.std(logs[:, :, 1] - logs[:, :, 0]) / np.sqrt(2) == pytest.approx(0.02, rel=0.03)
    # between: one request's log spreads by sqrt(instance_sd^2 + within_sd^2)
    assert np.std(logs[:, 0, 0]) == pytest.approx(np.hypot(0.04, 0.02), rel=0.03)
    medians = np.exp(np.median(logs[:, :, 0], axis=0))
    arms = candidate_schedule(s, "cache-dit")
    for i, arm in enumerate(arms):
        expected = (0.45 if arm != "b0" else 1.0) * (1 + 0.01 * i)
        assert medians[i] == pytest.approx(expected, rel=0.01), (i, arm)
    # the first request of an instance (its first warm-up) carries the transient
    first = np.median(d.warmups[:, :, 0] / d.warmups[:, :, 1])
    assert first == pytest.approx(1.5, rel=0.01)


def test_a_first_instance_factor_moves_only_each_candidates_first_instance() -> None:
    s = _settings()
    noise = cal.Noise(within_sd=0.0, instance_sd=0.0, first_instance_factor=0.9,
                      drawn_order=True)
    ids = ("c1", "c2")
    d = cal.draw(s, ids, noise, 0.5, 50, np.random.default_rng(3))
    for c in ids:
        where = [i for i, a in enumerate(d.arms) if a == c]
        assert np.allclose(d.measured[:, where[0], :], 0.45)  # its gate's instance
        assert np.allclose(d.measured[:, where[1:], :], 0.5)
    assert np.allclose(d.measured[:, [i for i, a in enumerate(d.arms) if a == "b0"], :], 1.0)


def test_a_faster_first_instance_raises_false_supported_and_calibrate_shows_it() -> None:
    s = _settings()
    lines = cal_text.hosting_lines(s, 0.01, (0.45,), 20_000, 5, False)
    rates = [float(line.split(": ")[1].split("%")[0]) for line in lines[1:]]
    assert len(rates) == 4 and rates[0] <= 5.0  # as assumed: within the claim
    assert rates[0] < rates[2] < rates[3]  # 2% and 5% faster: more false supported
    assert "first instance 5% faster" in lines[-1]


def test_the_steady_state_rule_runs_on_the_simulated_warmups() -> None:
    s = _settings()  # 2..3 warm-ups, the last two within 5%
    calm = cal.simulate(s, "c", cal.Noise(within_sd=0.01), 0.5, 2000, 5)
    assert calm.rate("warmup_not_steady") == 0
    noisy = cal.simulate(s, "c", cal.Noise(within_sd=0.08), 0.5, 2000, 5)
    assert noisy.rate("warmup_not_steady") > 0.5
    # A first-request transient alone is absorbed by the third warm-up.
    transient = cal.simulate(s, "c", cal.Noise(first_request_factor=1.5), 0.5, 2000, 5)
    assert transient.rate("warmup_not_steady") < 0.01


def test_both_decisions_take_the_not_evaluable_reasons_in_the_one_order() -> None:
    # replication.not_evaluable and the vectorised decision both read LatencyDecisionReason's
    # order: a run whose warm-up never became steady and whose B0 also drifted is
    # warmup_not_steady in each; drift alone is drift; neither leaves the interval to decide.
    s = _settings()  # instance design, 2..3 warm-ups within 5%, drift tolerance 10%
    arms = tuple(candidate_schedule(s, "c"))
    b0 = [i for i, a in enumerate(arms) if a == ArmRole.B0]
    warmups = np.ones((3, len(arms), s.max_warmups))
    warmups[0, b0[0]] = (1.0, 2.0, 1.0)  # trial 0 only: two in a row never agree
    measured = np.ones((3, len(arms), s.repeats))
    measured[:2, b0[-1]] = 1.5  # trials 0 and 1: B0's last instance 50% slower
    draws = cal.Draws(s, arms, warmups, measured, ("c",))
    expected = [cal.UNSTEADY, cal.DRIFT]
    assert cal.decide_exact(draws)[:2].tolist() == cal._decide_fast(draws)[:2].tolist() == expected
    assert [cal.OUTCOMES[o] for o in expected] == list(LatencyDecisionReason)
    assert cal.decide_exact(draws)[2] == cal._decide_fast(draws)[2] not in expected


def _designs() -> list[LatencySettings]:
    s = _settings()
    return [s, _settings("reference"), cal_cells.request_design_before(s),
            dataclasses.replace(cal_cells.request_design_before(s), ordering="ABBA", warmups=2,
                                max_warmups=4, steady_fraction=0.05),
            dataclasses.replace(cal_cells.request_design_before(s), ordering="AB"),
            dataclasses.replace(s, instances_per_arm=4, steady_fraction=None, max_warmups=2,
                                repeats=2)]


@pytest.mark.parametrize("index", range(len(_designs())))
def test_the_fast_decision_is_replication_decide_trial_by_trial(index: int) -> None:
    # Noise chosen so that every outcome occurs: unsteady warm-ups, drift, and all verdicts.
    settings = _designs()[index]
    within = max(0.03, (settings.steady_fraction or 0) / 2)
    noise = cal.Noise(within_sd=within, instance_sd=0.05, drift_per_instance=0.01,
                      first_request_factor=1.1)
    seen: set[int] = set()
    for ratio in (0.4, 0.5, 0.6):
        d = cal.draw(settings, "cache-dit", noise, ratio, 250,
                     np.random.default_rng([index, int(ratio * 10)]))
        exact, fast = cal.decide_exact(d), cal._decide_fast(d)
        assert np.array_equal(exact, fast), np.flatnonzero(exact != fast)[:5]
        seen |= set(exact.tolist())
    expected = {cal.SUPPORTED, cal.FAILED, cal.INCONCLUSIVE}
    if settings.steady_fraction is not None:
        expected.add(cal.UNSTEADY)
    if settings.replication == "instance" or settings.ordering == "ABA":
        expected.add(cal.DRIFT)
    assert seen >= expected, seen


def test_calibrate_prints_the_protocol_and_the_table_for_the_910c_campaign() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ref2va_accept.cli", "calibrate", str(CAMPAIGN_910C),
         "--trials", "400", "--ratios", "0.45,0.4,0.3", "--futility-trials", "20"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "N=3 fresh instances per arm" in out
    assert "warm-ups 2..3 per instance, until the last two agree within 5.0%" in out
    assert "M=1 measured per instance" in out
    assert ("decision: Welch interval on log values (welch-log/1), one-sided 0.96 at each end, "
            "at 3+3 values, target 0.5") in out
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("design"))
    assert "false supported @0.5  95% upper" in lines[head]
    assert "power @0.45" in lines[head] and "power @0.3" in lines[head]
    rows = lines[head + 1:head + 9]
    assert [r.split()[0] for r in rows] == ["campaign:"] * 4 + ["before"] * 4
    for row, sd in zip(rows, ["0.0%", "1.0%", "3.0%", "5.0%"] * 2, strict=True):
        assert f"  {sd}  " in row, row
    assert "request ABA W=1 M=3" in rows[4]
    # The cells table: every condition the rule was frozen from, one row each.
    cells = lines.index(next(line for line in lines if line.startswith("cell ")))
    groups = [line.split("  ")[0] for line in lines[cells + 1:cells + 1 + 23]]
    assert set(groups) == {"equal spread", "unequal spread", "heavy tails", "drift",
                           "shared B0", "rerun"}
    assert "B0 5.0% / cand 0.0%" in out and "12 candidates" in out and "t3 tails" in out
    assert "worst false supported at the target, one attempt:" in out
    # 400 trials cannot show a rate near 4.5% at most 5%, and the command says so.
    assert ("claim, false supported at the target at most 5% in every one-attempt cell: NOT "
            "shown at 400 trials: the 95% upper bound of") in out
    costs = lines.index(next(line for line in lines if line.startswith("what the confidence")))
    assert [line.split(":")[0] for line in lines[costs + 1:costs + 4]] == [
        "  confidence 0.96 (frozen)", "  confidence 0.95", "  confidence 0.955"]
    assert all("power @0.45 " in line and "@0.3 " in line for line in lines[costs + 1:costs + 4])
    assert "gate on the first latency instance" in out and "first instance 5% faster" in out


@pytest.mark.parametrize(("args", "says"), [
    (["--instance-sd", "0,x"], "--instance-sd expects comma-separated numbers"),
    (["--instance-sd", "-0.01"], "is not a non-negative finite number"),
    (["--ratios", "0"], "--ratios: '0' is not a positive finite number"),
    (["--within-sd", "nan"], "--within-sd: 'nan' is not a finite number"),
    (["--trials", "0"], "--trials must be at least 1"),
    (["--drift", "-0.5"], "non-positive"),
    (["--candidate", "nobody"], "'nobody' is not a candidate of"),
    (["--compare-confidence", "0.4"], "--compare-confidence: 0.4 is not between 0.5 and 1"),
])
def test_bad_arguments_exit_2_with_one_clear_line(args: list[str], says: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", str(CAMPAIGN_910C), "--trials", "10", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ref2va-accept calibrate: ") and says in err[0]


@pytest.mark.parametrize("name", ["910c", "reference"])
def test_the_shipped_campaigns_freeze_the_calibrated_rule_and_verdict_defaults_to_it(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    s = _settings(name)
    assert (s.decision_rule, s.confidence) == (CALIBRATED_DECISION_RULE, CALIBRATED_CONFIDENCE)
    assert (CALIBRATED_DECISION_RULE, CALIBRATED_CONFIDENCE) == (DecisionRule.WELCH, 0.96)
    # `verdict` without --rule or --confidence judges as these campaigns do ...
    assert main(["verdict", "--baseline", "301.2,298.0,305.5", "--candidate", "140,151,139",
                 "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert (default["interval"]["rule"], default["interval"]["confidence"]) == (
        s.decision_rule, s.confidence)
    # ... and gives what the campaign's own rule gives on the same values.
    assert default == latency_verdict([301.2, 298.0, 305.5], [140.0, 151.0, 139.0],
                                      s.target_ratio, s.confidence, single_instance=True,
                                      rule=s.decision_rule).json_dict()


def test_a_missing_campaign_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", str(tmp_path / "none.yaml")]) == 2
    assert "none.yaml" in capsys.readouterr().err


# --- the frozen rule across unequal spreads, heavy tails, drift and several candidates --------

def _cell_rates(settings: LatencySettings, cell: cal_cells.Cell, ratio: float, trials: int,
                seed: int) -> cal_cells.CellResult:
    return cal_cells.run_cells(settings, [cell], [ratio], trials, seed)[0]


def _one_attempt_cells() -> list[cal_cells.Cell]:
    return [c for c in cal_cells.default_cells(0.01) if not c.reruns]


@pytest.mark.parametrize("name", ["910c", "reference"])
def test_every_one_attempt_cell_shows_at_most_5_percent_at_40000_trials(name: str) -> None:
    # The claim itself, as `calibrate CAMPAIGN` shows it (seed 0, 40,000 trials per cell, the
    # same draws): in every one-attempt cell (spreads equal and unequal, the candidate steady to
    # twice B0's, heavy tails, drift, several candidates on one B0) the exact 95% upper bound
    # of false `supported` at the target is at most 5%.
    settings, cells = _settings(name), _one_attempt_cells()
    results = cal_cells.run_cells(settings, cells, [], CLAIM_TRIALS, 0)
    shown = cal_cells.claim(settings, cells, results)
    uppers = {r.cell.label: round(_upper(r.at_target), 4) for r in results}
    assert shown.shown and max(uppers.values()) <= 0.05, uppers
    # The worst cell is a steady arm beside a spreading one (Welch's df is then too high), at
    # 4.3-4.6%: the claim holds with the room the confidence bought, not by a rule too strict.
    assert shown.worst.cell.group == "unequal spread" and "0.0%" in shown.worst.cell.label
    assert 0.04 < shown.worst.at_target.supported < 0.047, shown.worst.at_target


def test_at_0_955_the_worst_cell_is_not_shown_at_most_5_percent_and_0_96_costs_power() -> None:
    # Why the campaigns freeze 0.96: at 0.955 the steady-candidate cell's rate is about 5%, so
    # at 40,000 seeded trials its 95% upper bound is above 5% (the claim not shown) ...
    cells = _one_attempt_cells()
    steady = cells.index(next(c for c in cells if c.label == "B0 0.0% / cand 5.0%"))
    old = cal_cells.claim_at(_settings(), 0.955, cells[:steady + 1], [], CLAIM_TRIALS, 0)
    assert not old.shown and cells[steady] in [r.cell for r in old.above], old.above
    assert _upper(old.worst.at_target) > 0.05, old.worst.at_target
    # ... and what 0.96 costs: on the same 8,000 seeded runs at a true ratio of 0.45 with both
    # arms at 3% instance sd, power falls by 1-4 points (90.6% to 88.2% here; 90.2% to 88.0%
    # at calibrate's 40,000), and 0.96's power is 87-90% (its 95% interval).
    cell = cal_cells.Cell("equal spread", cal.Noise(instance_sd=0.03, drawn_order=True))
    power = {c: _cell_rates(dataclasses.replace(_settings(), confidence=c), cell, 0.45, 8000,
                            9).power[0] for c in (0.955, 0.96)}
    assert 0.01 < power[0.955].supported - power[0.96].supported < 0.04, power
    assert 0.87 < _lower(power[0.96]) and _upper(power[0.96]) < 0.90, power[0.96]


def test_a_cell_whose_bound_exceeds_5_percent_leaves_the_claim_not_shown() -> None:
    # Planted: one cell with 2,100 of 40,000 (5.25%), beside one at 4.5%: the claim names it.
    s = _settings()
    cells = _one_attempt_cells()[:2]

    def result(cell: cal_cells.Cell, hits: int) -> cal_cells.CellResult:
        counts = [0] * len(cal.OUTCOMES)
        counts[cal.SUPPORTED], counts[cal.INCONCLUSIVE] = hits, CLAIM_TRIALS - hits
        return cal_cells.CellResult(cell, cal.Rates(CLAIM_TRIALS, tuple(counts)), ())

    refused = cal_cells.claim(s, cells, [result(cells[0], 1800), result(cells[1], 2100)])
    assert not refused.shown and [r.cell for r in refused.above] == [cells[1]]
    text = "\n".join(cal_text.claim_lines(refused, [], []))
    assert ("at most 5% in every one-attempt cell: NOT shown at 40000 trials: the 95% upper "
            f"bound of 1 cell(s) is above 5.00% ({cells[1].label}: 5.47%)") in text
    assert "worst false supported at the target, one attempt: 5.25%, 95% upper bound 5.47%" \
        in text
    confirmed = cal_cells.claim(s, cells, [result(cells[0], 1800), result(cells[1], 1700)])
    assert confirmed.shown and confirmed.worst.cell == cells[0]
    assert ("every cell's 95% upper bound (exact, Clopper-Pearson, two-sided; 40000 trials "
            "each) is at most 5.00%") in "\n".join(cal_text.claim_lines(confirmed, [], []))


def test_the_rank_rule_does_not_hold_when_the_candidate_is_steady() -> None:
    # The issue's finding, so that the cells would show a rule that is only honest when both
    # arms spread alike: B0 5% between instances, a steady candidate (8.7% observed).
    rank = dataclasses.replace(_settings(), decision_rule="ratio-interval-moses/1",
                               confidence=0.95)
    noise = cal.Noise(instance_sd=0.05, candidate_instance_sd=0.0, drawn_order=True)
    result = _cell_rates(rank, cal_cells.Cell("unequal spread", noise), 0.5, 6000, 11)
    assert _lower(result.at_target) > 0.065, result.at_target


def test_a_falling_drift_stays_within_5_percent() -> None:
    # Not a cell of the table (its rising drift is): latencies falling 1% per started instance,
    # order drawn per run; 1.9% observed, 95% upper bound 2.3% at 6,000 seeded trials.
    cell = cal_cells.Cell("drift", cal.Noise(instance_sd=0.03, drift_per_instance=-0.01,
                                       drawn_order=True))
    result = _cell_rates(_settings(), cell, 0.5, 6000, 5)
    assert _upper(result.at_target) <= 0.05, result.at_target


def test_several_candidates_on_one_b0_each_at_5_percent_and_holm_holds_the_family() -> None:
    # Six candidates at the target on one B0, 4,000 seeded trials: each one's rate and Holm's
    # family rate have their 95% upper bounds at most 5%; without Holm any of six is above 10%.
    cell = cal_cells.Cell("shared B0", cal.Noise(instance_sd=0.03, drawn_order=True), candidates=6)
    result = _cell_rates(_settings(), cell, 0.5, 4000, 13)
    assert _upper(result.at_target) <= 0.05, result.at_target
    assert result.any_supported is not None and result.holm_any is not None
    assert cal.clopper_pearson(round(result.any_supported * 4000), 4000)[0] > 0.10
    assert cal.clopper_pearson(round(result.holm_any * 4000), 4000)[1] <= 0.05, result.holm_any


def test_holm_steps_down() -> None:
    p = np.array([[0.01, 0.02, 0.04], [0.03, 0.01, 0.2], [np.nan, 0.001, 0.5]])
    assert cal_cells.holm(p, 0.05).tolist() == [[True, True, True], [False, True, False],
                                          [False, True, False]]


def test_a_rerun_after_inconclusive_is_a_second_chance() -> None:
    once = _cell_rates(_settings(), cal_cells.Cell("rerun", cal.Noise(instance_sd=0.03)), 0.5,
                       6000, 21)
    twice = _cell_rates(_settings(), cal_cells.Cell("rerun", cal.Noise(instance_sd=0.03), reruns=1),
                        0.5, 6000, 21)
    assert twice.at_target.supported > once.at_target.supported * 1.3


def _welch_designs() -> list[tuple[LatencySettings, cal.Noise, int]]:
    s = _settings()
    noisy = cal.Noise(within_sd=0.03, instance_sd=0.05, candidate_instance_sd=0.01,
                      drift_per_instance=0.01, first_request_factor=1.1, drawn_order=True)
    heavy = dataclasses.replace(noisy, tail_df=3, candidate_instance_sd=0.08)
    return [(s, noisy, 1), (s, heavy, 1), (s, noisy, 3),
            (_settings("reference"), heavy, 2),
            (dataclasses.replace(s, instances_per_arm=4), noisy, 1)]


@pytest.mark.parametrize("index", range(len(_welch_designs())))
def test_the_fast_welch_decision_is_replication_decide_trial_by_trial(index: int) -> None:
    settings, noise, k = _welch_designs()[index]
    ids = [f"c{i + 1}" for i in range(k)]
    seen: set[int] = set()
    for ratio in (0.4, 0.5, 0.6):
        d = cal.draw(settings, ids if k > 1 else ids[0], noise, ratio, 200,
                     np.random.default_rng([index, int(ratio * 10)]))
        for c in range(k):
            exact, fast = cal.decide_exact(d, c), cal._decide_fast(d, c)
            assert np.array_equal(exact, fast), np.flatnonzero(exact != fast)[:5]
            seen |= set(exact.tolist())
    assert seen >= {cal.SUPPORTED, cal.FAILED, cal.INCONCLUSIVE}, seen


def test_the_order_drawn_per_run_moves_instances_only_inside_their_block() -> None:
    s = _settings()
    d = cal._positions(s, latency_schedule(s, "t", ["a", "b"]), 2, 500, True,
                       np.random.default_rng(1))
    blocks = (d // 3).astype(int)
    assert (blocks == np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])).all()
    assert len({tuple(row) for row in d.astype(int).tolist()}) > 50
