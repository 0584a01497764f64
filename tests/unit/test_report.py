"""The HTML report's lossy section: B0's spread, per-dimension errors, fidelity and audio."""

from __future__ import annotations

from pathlib import Path

import pytest

from ref2va_accept.check_records import CheckResult, TrackVerdict
from ref2va_accept.checks import Check
from ref2va_accept.evidence import EvidenceBundle
from ref2va_accept.records import LatencyInstance, LatencyRatioCheck, check_record
from ref2va_accept.report import host_html, lossy_tables_html, summary_html, verdict_table_html
from ref2va_accept.sanitize import Sanitizer

pytestmark = pytest.mark.fast


def _bundle(tmp_path: Path) -> EvidenceBundle:
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    bundle.add_check(CheckResult(
        "5s-lossy", "b0", "baseline_variability", "pass", None, "B0 same-seed spread at most 0",
        {"same_seed_spread": {"vbench.temporal_flickering": 0.0, "fidelity.x": 0.0},
         "different_seed_spread": {"vbench.temporal_flickering": 0.0039},
         "gated": ["vbench.temporal_flickering"], "limit": 0.0025, "threshold": 0.01,
         "below_limit": {"vbench.temporal_flickering": True}, "unmeasured": [],
         "baseline_scores": []}))
    errors = [
        {"scorer": "vbench.temporal_flickering", "dimension": "temporal_flickering",
         "kind": "vbench", "baseline": 0.98, "candidate": 0.97, "error": 0.0102,
         "status": "ok", "detail": "", "threshold": 0.01, "gate": "broken"},
        {"scorer": "vbench.aesthetic_quality", "dimension": "aesthetic_quality",
         "kind": "vbench", "baseline": None, "candidate": None, "error": None, "status": "open",
         "detail": "weights missing", "threshold": 0.01, "gate": "open"},
        {"scorer": "vbench.subject_consistency", "dimension": "subject_consistency",
         "kind": "vbench", "baseline": 0.95, "candidate": 0.95, "error": 0.0,
         "status": "ok", "detail": "", "threshold": 0.01, "gate": "within"},
    ]
    bundle.add_check(CheckResult(
        "5s-lossy", "cache-dit-aggressive", "lossy_gate", "fail", "quality_gate_failed",
        "relative error at or above 1.00%: vbench.temporal_flickering 1.020%",
        {"threshold": 0.01, "normalized": False, "min_psnr_db": 30.0, "min_ssim": None,
         "worst": {"vbench.temporal_flickering": 0.0102},
         "per_seed": [{"seed": 42, "threshold": 0.01, "errors": errors,
                       "fidelity_gate": {"below_minimum": [], "open": []},
                       "fidelity": {"frames": 3, "psnr_db": 27.5, "psnr_min_db": 25.0,
                                    "ssim_mean": 0.91, "ssim_min": 0.88, "identical_frames": 1,
                                    "all_identical": False,
                                    "psnr_per_frame": ["inf", 25.0, 26.0],
                                    "ssim_per_frame": [1.0, 0.88, 0.85]},
                       "audio": {"error": "b.mp4: expected an audio stream, found none"}}]}))
    return bundle


def test_lossy_section_shows_every_number_a_reviewer_decides_on(tmp_path: Path) -> None:
    page = lossy_tables_html(_bundle(tmp_path))
    assert page.startswith("<h3>Lossy gates</h3>")
    assert "5s-lossy / B0: baseline variability PASS" in page
    assert "0.3900%" in page and "below the limit 0.2500%" in page  # different-seed spread
    assert page.index("vbench.temporal_flickering") < page.index("fidelity.x")  # gated first
    assert "<td>vbench.temporal_flickering</td><td>gated</td><td>0.0000%</td><td>0.3900%</td>" \
        "<td>yes</td>" in page
    assert "<td>fidelity.x</td><td>reported</td><td>0.0000%</td><td>-</td><td>-</td>" in page
    assert "5s-lossy / cache-dit-aggressive: lossy gate FAIL" in page
    assert "PSNR dB at least 30.0" in page
    assert "1.0200%" in page and "font-weight:bold'>BROKEN" in page  # marked in red
    assert "weights missing" in page and "<td>open</td>" in page  # open, never within
    assert "<td>0.0000%</td><td>within</td>" in page
    assert "PSNR 27.50 dB (min frame 25.00 dB)" in page and "1/3 frames identical" in page
    assert page.count("<polyline") == 2  # PSNR and SSIM curves; identical frame drawn at the cap
    assert "audio against B0: error: b.mp4: expected an audio stream" in page


def test_report_orders_verdicts_then_gates_then_requests(tmp_path: Path) -> None:
    page = summary_html(_bundle(tmp_path))
    assert page.index("Verdicts per track") < page.index("Lossy gates") \
        < page.index("Timed requests")


def test_no_lossy_checks_no_section(tmp_path: Path) -> None:
    assert lossy_tables_html(EvidenceBundle.create(tmp_path, "run", Sanitizer((), ()))) == ""


def test_host_section_shows_identity_drift_and_memory_still_held(tmp_path: Path) -> None:
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    bundle.data["host_identity"] = {"ok": False, "rows": [
        {"field": "torch_npu", "frozen": "2.6.0", "host": "2.6.0", "status": "match",
         "source": "installed torch-npu"},
        {"field": "cann", "frozen": "8.3.RC1", "host": "8.5.0", "status": "DRIFT",
         "source": "ascend_toolkit_install.info"}]}
    bundle.data["device_memory"] = {
        "status": "measured", "devices": [0, 1, 2, 3], "tolerance_mb": 512, "timeout_s": 120,
        "idle": {"used_mb": {"0": 3000.0}}, "waits": [
            {"instance": "5s-lossy.b0.1", "released": True, "held_mb": {}},
            {"instance": "5s-lossy.cache-dit.2", "released": False, "held_mb": {"3": 28987.0},
             "problem": None}]}
    page = host_html(bundle)
    assert "DIFFERS: every verdict is capped" in page
    assert ">DRIFT</td>" in page and "8.3.RC1" in page and "8.5.0" in page
    assert "2 stop(s) waited for, 1 released" in page
    assert "5s-lossy.cache-dit.2: still held {&#x27;3&#x27;: 28987.0} MB" in page


def test_host_section_says_when_memory_was_not_measured(tmp_path: Path) -> None:
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    assert host_html(bundle) == ""
    bundle.data["device_memory"] = {"status": "not_applicable", "reason": "no accelerator"}
    assert "not applicable (no accelerator)" in host_html(bundle)


def test_the_report_renders_the_gates_decisions_and_does_not_decide_again(tmp_path: Path) -> None:
    # Recorded decisions that raw numbers alone would contradict: the report shows what the
    # gate decided (it alone knows its rule), never a verdict of its own from the numbers.
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    bundle.add_check(CheckResult(
        "5s-lossy", "b0", "baseline_variability", "pass", None, "spread",
        {"same_seed_spread": {"vbench.x": 0.001}, "different_seed_spread": {},
         "gated": ["vbench.x"], "limit": 0.0025, "threshold": 0.01,
         "below_limit": {"vbench.x": False}, "unmeasured": [], "baseline_scores": []}))
    bundle.add_check(CheckResult(
        "5s-lossy", "c1", "lossy_gate", "fail", "quality_gate_failed", "broken",
        {"threshold": 0.01, "normalized": False, "worst": {"vbench.x": 0.0},
         "min_psnr_db": None, "min_ssim": None,
         "per_seed": [{"seed": 1, "threshold": 0.01, "errors": [
             {"scorer": "vbench.x", "dimension": "x", "kind": "vbench", "baseline": 1.0,
              "candidate": 1.0, "error": 0.0, "status": "ok", "detail": "", "threshold": 0.01,
              "gate": "broken"}],
             "fidelity_gate": {"below_minimum": [], "open": []},
             "fidelity": {"error": "not compared"}, "audio": {"error": "not compared"}}]}))
    page = lossy_tables_html(bundle)
    assert "<td>vbench.x</td><td>gated</td><td>0.1000%</td><td>-</td><td>no</td>" in page
    assert "<td>0.0000%</td><td style='color:#cf222e;font-weight:bold'>BROKEN</td>" in page


def _latency_bundle(tmp_path: Path) -> EvidenceBundle:
    """A supported 5 s lossless latency comparison (0.467 [0.448, 0.481]) and a 15 s one whose
    protocol ended before a decision (warm-ups never steady)."""
    from ref2va_accept.latency import InstanceRun, judge_latency
    from tests.unit.test_latency_judgement import INSTANCE, _run

    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    runs = [_run("b0", [300], warmups=[340, 305]), _run("fast", [140], [150]),
            _run("b0", [310]), _run("fast", [139]), _run("b0", [295]), _run("fast", [142])]
    # The candidate's first instance hosted its quality gate.
    runs[1].gate = [CheckResult("5s-lossless", "fast", "lossless_gate", "pass", None, "exact")]
    for check in judge_latency("5s-lossless", "fast", runs, INSTANCE):
        bundle.add_check(check)
    unsteady: list[InstanceRun] = [_run("b0", [], warmups=[400, 300, 250, 200], steady=False)]
    for check in judge_latency("15s-lossless", "fast", unsteady, INSTANCE):
        bundle.add_check(check)
    return bundle


def test_latency_section_shows_instances_interval_and_b0_spread(tmp_path: Path) -> None:
    page = summary_html(_latency_bundle(tmp_path))
    section = page[page.index("Latency: instances and intervals"):]
    assert "SUPPORTED" in section and "ratio interval [0.448, 0.481]" in section
    assert "unit: server instance (3 fresh instances per arm" in section
    assert "340.000, 305.000" in section  # every warm-up
    assert section.count("fast (its quality gate first)") == 1  # the instance that hosted it
    assert "between instances 2.53%" in section and "within an instance" in section
    assert "not decided: warmup_not_steady" in section and "NO" in section
    assert page.index("Latency: instances") < page.index("Timed requests")


def test_the_verdict_table_shows_not_applicable_checks_as_such(tmp_path: Path) -> None:
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    bundle.verdicts = [TrackVerdict("5s-lossy", "c1", "inconclusive", ("open_checks",),
                                    ("lossy_gate",), {"resource_interference": "not_applicable",
                                                      "b0_media": "pass"})]
    page = verdict_table_html(bundle)
    assert "<th>not applicable</th>" in page
    assert "<td>lossy_gate</td><td>resource_interference</td>" in page  # open, then n/a


def test_the_verdict_table_carries_each_latency_interval_and_comes_before_the_environment(
        tmp_path: Path) -> None:
    bundle = _latency_bundle(tmp_path)
    bundle.verdicts = [
        TrackVerdict("5s-lossless", "fast", "supported", ("latency_supported",), (), {}),
        TrackVerdict("15s-lossless", "fast", "inconclusive", ("warmup_not_steady",), (), {}),
        TrackVerdict("5s-lossy", "other", "failed", ("quality_gate_failed",), (), {})]
    table = verdict_table_html(bundle)
    assert "<th>latency: ratio of medians [interval] vs target</th>" in table
    assert "0.467 [0.448, 0.481] vs 0.5</span></td>" in table  # supported, in its colour
    assert "not decided: warmup_not_steady" in table
    assert "<td>FAILED</td>" not in table and table.count("<td>-</td>") >= 1  # no latency check
    page = summary_html(bundle)
    # pytest-html's own environment table is hidden; the report's comes after the verdicts.
    assert page.startswith("<style>#environment-header, #environment { display: none; }")
    assert page.index("Verdicts per track") < page.index("<h3>Environment</h3>") \
        < page.index("Latency: instances")
    assert str(tmp_path) not in page


def test_the_latency_chart_draws_every_request_by_instance_position() -> None:
    from ref2va_accept.report_latency import latency_svg

    instances = [LatencyInstance.model_validate(i) for i in (
        {"arm": "b0", "position": 0, "warmups_s": [7.0, 6.5], "steady": True,
         "measured_s": [6.6], "distinct_s": [], "value_s": 6.6},
        {"arm": "fast", "position": 1, "warmups_s": [2.5, 2.2], "steady": True,
         "measured_s": [2.1], "distinct_s": [2.0], "value_s": 2.1},
        {"arm": "b0", "position": 2, "warmups_s": [7.1, 6.8], "steady": True,
         "measured_s": [6.7], "distinct_s": [], "value_s": 6.7})]
    svg = latency_svg(instances, "fast")
    assert svg.startswith("<svg class='ref2va-latency-chart'")
    assert svg.count("<circle") == 9  # 6 warm-ups and 3 measured, each a point
    assert svg.count("fill='none'") == 6 and svg.count("<path") == 1  # hollow; one probe cross
    assert "B0 measured 6.600 s" in svg and "fast distinct 2.000 s" in svg
    assert ">0</text>" in svg and ">2</text>" in svg  # B0 before and after, by position
    assert latency_svg([], "fast") == ""


def test_the_latency_cells_say_what_stopped_a_candidate_and_name_the_welch_rule(
        tmp_path: Path) -> None:
    import dataclasses

    from ref2va_accept.latency import judge_latency
    from ref2va_accept.report_latency import latency_cell
    from tests.unit.test_latency_judgement import INSTANCE, _run

    welch = dataclasses.replace(INSTANCE, decision_rule="welch-log/1", confidence=0.955)
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    runs = [_run("b0", [300]), _run("fast", [140]), _run("b0", [310]), _run("fast", [139]),
            _run("b0", [295]), _run("fast", [142])]
    for check in judge_latency("5s-lossless", "fast", runs, welch, futile=(4, 0)):
        bundle.add_check(check)
    stopped = CheckResult("5s-lossless", "slow", Check.LATENCY_RATIO, "open", None,
                          "not measured: stopped on lossless_gate (quality_gate_failed)",
                          {"stopped_on": "lossless_gate (quality_gate_failed)"})
    bundle.add_check(stopped)
    record = check_record(stopped)
    assert isinstance(record, LatencyRatioCheck)
    assert latency_cell(record) == ("<span style='color:#9a6700'>not measured: "
                                    "stopped on lossless_gate (quality_gate_failed)</span>")
    section = summary_html(bundle)
    section = section[section.index("Latency: instances and intervals"):]
    assert "Welch interval on log values [" in section and "p-value of ratio &gt;= target" \
        in section
    assert "stopped after instance #4" in section
