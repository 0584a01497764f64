"""The 5 s lossless track of the reference campaign, run whole as a user runs it, verdicts checked.

`pytest -m "lossless and 5s"` runs the acceptance, quality, perf and verdict scenarios of that
track. The reference candidates do for real what their profiles say, so the verdicts are known.
Here the quality, perf and verdict scenarios run (what decides the candidates' verdicts): the
acceptance scenarios (B0's smoke request and its lifecycle) check the engine's contract, not a
verdict, and the selftest's acceptance session runs them on a 4-step copy of this track (and
`./ref2va campaign` on the track itself); here they were four more B0 requests and three more
engine starts at 50 steps, about 35 s of the timed phase's CPU.

Lossless-text-kv is bit-exact and about 3x faster from compute it really skips (no declared
device time in the reference campaign), so supported; reduction-order diverges from the first
DiT output on: its quality gate, run first, decides it and no latency instance of it starts.
Lossless-text-kv's verdict rests on measured latency, so this run is timed (and its session runs
in a process of its own, sharing nothing with the test's).
The track's third candidate, mislabelled-cache (Cache-DiT under a lossless label), fails on its
enabled path and its outputs, not on its latency: it is deselected here (its verdict stays open)
and judged on a 4-step copy in test_mislabelled_cache_run.py, outside the timed phase. (A B0
with unseeded noise in one step, which must make the track inconclusive, is
test_baseline_nondeterminism_run.py: nothing timed.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ref2va_accept.arms import say_now
from tests.unit.browser import chromium
from tests.unit.suite_runner import ROOT, bundle, only_run, run_pytest, tagged, verdict_of

# Its latency verdicts are measured: `./ref2va selftest` runs it on a CPU of its own.
pytestmark = pytest.mark.timed


def _checks(evidence: dict[str, Any], arm: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in evidence["checks"] if c["arm"] == arm}


# What a noisy shared CPU alone can do to a latency run: B0 moves more than the campaign's drift
# tolerance between its first and last instance, a warm-up never settles, or the interval, on
# three one-request values per arm, is too wide to clear the target though the candidate is as
# fast as ever (`latency_out_of_reach`, inconclusive). The judge then rightly says
# "inconclusive", and the operator runs again. How often: `ref2va-accept calibrate
# fixtures/campaigns/reference.yaml --within-sd 0.10 --instance-sd 0.10,0.15 --ratios 0.31,0.34`
# finds the supported candidate in 83% / 70% of runs at 10% instance spread and 64% / 50% at 15%
# (the timed phase measured 0.34-0.43 beside phase 2's load, instance spread 10-20%).
NOISE_REASONS = frozenset({"drift", "warmup_not_steady", "latency_out_of_reach"})
# Runs of the track at most: three inconclusive in a row are 0.5% at 83% found per run, 2.7% at
# 70%; a candidate really slower than the target is not found in any run, and fails the test.
MAX_RUNS = 3


def _run_track(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any], Path]:
    evidence = tmp_path_factory.mktemp("evidence")
    result = run_pytest("tests/quality", "tests/perf", "tests/verdicts", "-m", "lossless and 5s",
                        "-k", "not mislabelled-cache", "-rA",
                        "--campaign", str(ROOT / "fixtures/campaigns/reference.yaml"),
                        "--evidence-dir", str(evidence), timeout=1800)
    return result, bundle(evidence), only_run(evidence)


def _not_evaluable_for_noise(evidence: dict[str, Any]) -> list[str]:
    """The reasons the supported candidate was inconclusive, where noise alone explains them."""
    verdict = verdict_of(evidence, "lossless-text-kv")
    reasons = list(verdict["reasons"])
    if verdict["verdict"] == "inconclusive" and reasons and set(reasons) <= NOISE_REASONS:
        return reasons
    return []


@pytest.fixture(scope="module")
def five_second_run(tmp_path_factory: pytest.TempPathFactory,
                    request: pytest.FixtureRequest) -> tuple[Any, dict[str, Any], Path]:
    """The track, run once; run again (at most MAX_RUNS in all) only while a run was not
    evaluable for noise alone (the supported candidate inconclusive for NOISE_REASONS and
    nothing else), as an operator would. Every other outcome is judged as it came. Each rerun's
    cause is written to the terminal (a warning would be an error here: pytest.ini)."""
    run = _run_track(tmp_path_factory)
    for _ in range(MAX_RUNS - 1):
        reasons = _not_evaluable_for_noise(run[1])
        if not reasons:
            break
        said = (f"5 s lossless track run again: its run {run[1]['run_id']} was not evaluable "
                f"for {', '.join(reasons)}")
        say_now(request.config, said)
        run = _run_track(tmp_path_factory)
    return run


def _outcome(stdout: str, test: str) -> str:
    """PASSED or FAILED for one test id in pytest's -rA summary."""
    for line in stdout.splitlines():
        if line.endswith(test) or f"{test} - " in line:
            return line.split()[0]
    raise AssertionError(f"{test} not in the summary")


def test_the_run_fails_because_some_candidates_must(five_second_run: Any) -> None:
    result, evidence, _ = five_second_run
    assert result.returncode == 1, result.stdout[-3000:]
    verdicts = "tests/verdicts/test_track_verdicts.py::test_track_verdict"
    assert _outcome(result.stdout, f"{verdicts}[5s-lossless:lossless-text-kv]") == "PASSED"
    assert _outcome(result.stdout, f"{verdicts}[5s-lossless:reduction-order]") == "FAILED"
    assert tagged(evidence["run_id"]) == []


def test_lossless_candidate_is_supported_with_every_check_passed(five_second_run: Any) -> None:
    verdict = verdict_of(five_second_run[1], "lossless-text-kv")
    assert verdict["verdict"] == "supported", (verdict["reasons"], verdict["checks"])
    assert verdict["open_checks"] == []
    # No device is probed on the CPU reference campaign: interference is not applicable, shown
    # as such; every other check passed.
    checks = dict(verdict["checks"])
    assert checks.pop("resource_interference") == "not_applicable"
    assert all(s == "pass" for s in checks.values()), checks
    latency = _checks(five_second_run[1], "lossless-text-kv")["latency_ratio"]["data"]
    interval = latency["interval"]["interval"]
    assert interval["upper"] <= 0.5 and latency["verdict"] == "supported"
    # One value per instance: three fresh B0 and three fresh candidate instances.
    assert latency["unit"] == "instance" and len(latency["instances"]) == 6
    assert len(latency["baseline_s"]) == 3 and len(latency["candidate_s"]) == 3


def test_a_candidate_that_failed_its_gate_starts_no_latency_instance(five_second_run: Any
                                                                     ) -> None:
    # The quality scenarios run first: reduction-order's bit-exact failure decides it, so the
    # latency protocol starts none of its instances and B0's three serve lossless-text-kv alone.
    evidence = five_second_run[1]
    latency = _checks(evidence, "reduction-order")["latency_ratio"]
    assert latency["status"] == "open"
    assert latency["detail"] == "not measured: stopped on lossless_gate (quality_gate_failed)"
    timed = [s for s in evidence["samples"] if s["arm"] == "reduction-order"
             and s["kind"] in ("warmup", "measured", "distinct")]
    assert timed == []
    starts = [i for i in evidence["instances"] if i["arm"] == "reduction-order"]
    assert len(starts) == 2  # its quality instance and the localization pass's
    b0 = _checks(evidence, "lossless-text-kv")["latency_ratio"]["data"]
    assert b0["sequence"].count("b0") == 3 and "reduction-order" not in b0["sequence"]


def test_verdict_table_heads_the_report_and_the_evidence(five_second_run: Any) -> None:
    _, evidence, run = five_second_run
    rows = {(v["track"], v["candidate"]) for v in evidence["verdicts"]}
    assert rows == {("5s-lossless", c) for c in
                    ("lossless-text-kv", "reduction-order", "mislabelled-cache")}
    # A candidate whose scenarios were deselected is open, never judged on what did not run.
    unjudged = verdict_of(evidence, "mislabelled-cache")
    assert unjudged["verdict"] == "inconclusive" and "latency_ratio" in unjudged["open_checks"]
    report = (run / "report.html").read_text()
    assert report.index("Verdicts per track") < report.index("<table id=\"results-table\">")
    assert "SUPPORTED" in report
    # No tail figure for 3 samples: MLPerf's early stopping needs 64 for a p90 claim.
    tails = _checks(evidence, "lossless-text-kv")["latency_ratio"]["data"]["interval"]["tails"]
    assert tails and all(t["value"] is None and t["samples"] < t["required"] for t in tails)


def test_baseline_is_deterministic(five_second_run: Any) -> None:
    check = _checks(five_second_run[1], "b0")["baseline_determinism"]
    assert check["status"] == "pass", check["detail"]
    assert len(check["data"]["points"]) == 12  # 10 dumped points + 2 decoded from the MP4


def test_lossless_candidate_passes_every_lossless_check(five_second_run: Any) -> None:
    checks = _checks(five_second_run[1], "lossless-text-kv")
    for name in ("lossless_gate", "enabled_path_audit", "unobserved_output", "candidate_media"):
        assert checks[name]["status"] == "pass", checks[name]
    points = checks["lossless_gate"]["data"]["points"]
    assert all(p["status"] == "equal" for p in points) and len(points) == 12


def test_reduction_order_fails_at_the_first_dit_output(five_second_run: Any) -> None:
    checks = _checks(five_second_run[1], "reduction-order")
    gate = checks["lossless_gate"]
    assert gate["status"] == "fail" and gate["reason"] == "quality_gate_failed"
    assert gate["data"]["first_divergence"] == "dit.step000"
    assert "first diverging point dit.step000" in gate["detail"]
    assert checks["enabled_path_audit"]["status"] == "pass"  # it hides nothing: it is just wrong
    verdict = verdict_of(five_second_run[1], "reduction-order")
    assert verdict["verdict"] == "failed" and verdict["reasons"] == ["quality_gate_failed"]


def test_reduction_order_is_localized_to_the_projection_whose_reduction_changed(
        five_second_run: Any) -> None:
    # Split-K changes the MLP down-projection of every block: the first one to run is block 0's.
    check = _checks(five_second_run[1], "reduction-order")["localization"]
    data = check["data"]
    assert check["status"] == "pass", check["detail"]
    assert data["module"] == "dit.blocks.0.fc2" and data["step"] == 0
    assert data["level1"]["module"] == "dit.blocks.0" and data["inputs_equal"] is True
    assert data["figures"]["differing"] > 0 and data["figures"]["max_ulp"] >= 1
    assert data["picture"]["differing"] == data["figures"]["differing"]
    assert [r["level"] for r in data["requests"]] == [1, 1, 2, 2]
    assert verdict_of(five_second_run[1], "reduction-order")["localized"] == \
        "dit.blocks.0.fc2 (step 0)"
    # The candidate that is bit-exact runs no pass.
    assert "localization" not in _checks(five_second_run[1], "lossless-text-kv")
    report = (five_second_run[2] / "report.html").read_text()
    assert "First divergence" in report and "dit.blocks.0.fc2" in report and "<svg" in report


def test_report_shows_verdicts_and_the_point_table(five_second_run: Any) -> None:
    report = (five_second_run[2] / "report.html").read_text()
    assert "Comparison points" in report
    assert "reduction-order" in report and "dit.step000" in report and "FAILED" in report


def test_report_renders_in_a_browser_with_the_verdicts_first(five_second_run: Any) -> None:
    from playwright.sync_api import sync_playwright

    report = five_second_run[2] / "report.html"
    errors: list[str] = []
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(report.as_uri())
            page.wait_for_load_state("load")
            # pytest-html's script ran: it draws the results table from the report's data, a
            # row per test of the run (3 quality, 2 latency, 2 verdict scenarios).
            assert page.locator("#results-table tbody.results-table-row").count() == 7
            visible = page.evaluate(
                "() => Array.from(document.querySelectorAll('table'))"
                ".filter(t => t.getClientRects().length > 0)"
                ".map(t => [t.id || t.className, t.getBoundingClientRect().top])")
            # The first table a reviewer sees is the verdict table, on the first screen.
            assert visible[0][0] == "ref2va-verdicts" and visible[0][1] < 900, visible[:3]
            assert "environment" not in [name for name, _ in visible]
            verdicts = page.locator("table.ref2va-verdicts").inner_text()
            assert "SUPPORTED" in verdicts and "vs 0.5" in verdicts
            # The latency comparisons are drawn, one chart per candidate timed: lossless-text-kv
            # alone, since reduction-order's gate stopped it before any latency instance.
            assert page.locator("svg.ref2va-latency-chart").count() == 1
            assert "not measured: stopped on lossless_gate" in verdicts
        finally:
            browser.close()
    assert errors == []
