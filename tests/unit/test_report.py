"""The HTML report's lossy section: B0's spread, per-dimension errors, fidelity and audio."""

from __future__ import annotations

from pathlib import Path

import pytest

from ref2va_accept.core import Check
from ref2va_accept.evidence import (
    AnyCheck,
    EvidenceBundle,
    LatencyInstance,
    LatencyRatioCheck,
    TrackVerdict,
    check_record,
    new_check,
)
from ref2va_accept.evidence.sanitize import Sanitizer
from ref2va_accept.report import host_html, lossy_tables_html, summary_html, verdict_table_html
from tests.unit.check_records import make_check

pytestmark = pytest.mark.fast


def _bundle(tmp_path: Path, unscored_seed: int | None = None) -> EvidenceBundle:
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    bundle.add_check(make_check(
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
    bundle.add_check(make_check(
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
                       "audio": {"error": "b.mp4: expected an audio stream, found none"}}]
         + ([] if unscored_seed is None else [
             {"seed": unscored_seed, "threshold": 0.01, "errors": [],
              "not_scored": "seed 42 broke the gate first",
              "fidelity_gate": {"below_minimum": [], "open": []},
              "fidelity": {"error": "not compared"}, "audio": {"error": "not compared"}}])}))
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


def _memory_wait(instance: str, *, released: bool, held_mb: dict[str, float],
                 problem: str | None = None) -> dict[str, object]:
    return {"instance": instance, "arm": instance.split(".")[1], "released": released,
            "waited_s": 1.0 if released else 120.0, "held_mb": held_mb, "problem": problem,
            "polls": []}


def test_host_section_shows_identity_drift_and_memory_still_held(tmp_path: Path) -> None:
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    bundle.set_section("host_identity", {"engine_kind": "vllm-omni", "ok": False, "rows": [
        {"field": "torch_npu", "frozen": "2.6.0", "host": "2.6.0", "status": "match",
         "source": "installed torch-npu"},
        {"field": "cann", "frozen": "8.3.RC1", "host": "8.5.0", "status": "DRIFT",
         "source": "ascend_toolkit_install.info"}]})
    bundle.set_section("device_memory", {
        "status": "measured", "kind": "npu", "devices": [0, 1, 2, 3], "tolerance_mb": 512,
        "timeout_s": 120, "poll_s": 1.0, "idle": {"used_mb": {"0": 3000.0}, "problem": None},
        "waits": [_memory_wait("5s-lossy.b0.1", released=True, held_mb={}),
                  _memory_wait("5s-lossy.cache-dit.2", released=False,
                               held_mb={"3": 28987.0})]})
    page = host_html(bundle)
    assert "DIFFERS: every verdict is capped" in page
    assert ">DRIFT</td>" in page and "8.3.RC1" in page and "8.5.0" in page
    assert "<td>torch_npu</td><td>2.6.0</td><td>2.6.0</td><td>installed torch-npu</td>" \
        "<td>match</td>" in page  # a matching row is plain
    assert "idle level {&#x27;0&#x27;: 3000.0} MB on devices [0, 1, 2, 3]" in page
    assert "2 stop(s) waited for, 1 released within 512 MB in 120 s" in page
    assert "5s-lossy.cache-dit.2: still held {&#x27;3&#x27;: 28987.0} MB" in page
    assert "5s-lossy.b0.1" not in page  # released: not listed


def test_host_section_says_when_memory_was_not_measured(tmp_path: Path) -> None:
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    assert host_html(bundle) == ""
    bundle.set_section("device_memory", {"status": "not_applicable", "kind": "none",
                                         "reason": "no accelerator"})
    assert "not applicable (no accelerator)" in host_html(bundle)
    # An identity preflight whose every row matches says so, above no drift.
    bundle.set_section("host_identity", {"engine_kind": "reference", "ok": True, "rows": [
        {"field": "torch", "frozen": "2.6.0", "host": "2.6.0", "status": "match",
         "source": "installed torch"}]})
    page = host_html(bundle)
    assert "(all match)" in page and "DIFFERS" not in page and "color:#cf222e" not in page


def test_a_seed_left_unscored_says_why_and_shows_no_score_table(tmp_path: Path) -> None:
    tables = lossy_tables_html(_bundle(tmp_path / "a")).count("<table class='ref2va-lossy'")
    page = lossy_tables_html(_bundle(tmp_path / "b", unscored_seed=43))
    assert "<p><b>seed 43</b></p><p>not scored: seed 42 broke the gate first; the gate was " \
        "failed already" in page
    assert page.count("<table class='ref2va-lossy'") == tables  # none for seed 43


def test_the_report_renders_the_gates_decisions_and_does_not_decide_again(tmp_path: Path) -> None:
    # Recorded decisions that raw numbers alone would contradict: the report shows what the
    # gate decided (it alone knows its rule), never a verdict of its own from the numbers.
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    bundle.add_check(make_check(
        "5s-lossy", "b0", "baseline_variability", "pass", None, "spread",
        {"same_seed_spread": {"vbench.x": 0.001}, "different_seed_spread": {},
         "gated": ["vbench.x"], "limit": 0.0025, "threshold": 0.01,
         "below_limit": {"vbench.x": False}, "unmeasured": [], "baseline_scores": []}))
    bundle.add_check(make_check(
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
    from ref2va_accept.judging import InstanceRun, judge_latency
    from tests.unit.latency_doubles import INSTANCE, latency_run

    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    runs = [latency_run("b0", [300], warmups=[340, 305]), latency_run("fast", [140], [150]),
            latency_run("b0", [310]), latency_run("fast", [139]),
            latency_run("b0", [295]), latency_run("fast", [142])]
    # The candidate's first instance hosted its quality gate.
    runs[1].gate = [make_check("5s-lossless", "fast", "lossless_gate", "pass", None, "exact")]
    for check in judge_latency("5s-lossless", "fast", runs, INSTANCE):
        bundle.add_check(check)
    unsteady: list[InstanceRun] = [
        latency_run("b0", [], warmups=[400, 300, 250, 200], steady=False)]
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
    bundle.verdicts = [TrackVerdict(track="5s-lossy", candidate="c1", verdict="inconclusive",
                                    reasons=("open_checks",), open_checks=("lossy_gate",),
                                    checks={"resource_interference": "not_applicable",
                                            "b0_media": "pass"})]
    page = verdict_table_html(bundle)
    assert "<th>not applicable</th>" in page
    assert "<td>lossy_gate</td><td>resource_interference</td>" in page  # open, then n/a


def test_the_verdict_table_carries_each_latency_interval_and_comes_before_the_environment(
        tmp_path: Path) -> None:
    bundle = _latency_bundle(tmp_path)
    bundle.verdicts = [
        TrackVerdict(track="5s-lossless", candidate="fast", verdict="supported",
                     reasons=("latency_supported",), open_checks=(), checks={}),
        TrackVerdict(track="15s-lossless", candidate="fast", verdict="inconclusive",
                     reasons=("warmup_not_steady",), open_checks=(), checks={}),
        TrackVerdict(track="5s-lossy", candidate="other", verdict="failed",
                     reasons=("quality_gate_failed",), open_checks=(), checks={})]
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
    from ref2va_accept.report import latency_svg

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

    from ref2va_accept.judging import judge_latency
    from ref2va_accept.report import latency_cell
    from tests.unit.latency_doubles import INSTANCE, latency_run

    welch = dataclasses.replace(INSTANCE, decision_rule="welch-log/1", confidence=0.955)
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    runs = [latency_run("b0", [300]), latency_run("fast", [140]),
            latency_run("b0", [310]), latency_run("fast", [139]),
            latency_run("b0", [295]), latency_run("fast", [142])]
    for check in judge_latency("5s-lossless", "fast", runs, welch, futile=(4, 0)):
        bundle.add_check(check)
    stopped = make_check("5s-lossless", "slow", Check.LATENCY_RATIO, "open", None,
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


# -- the sections read from the typed records (issue 27): each rule with a passing and a
# -- failing input ---------------------------------------------------------------------------------

def _ledger_entry(**fields: object) -> dict[str, object]:
    return {"schema": "ref2va-ledger/1", "kind": "attempt", "at": "2026-01-01T00:00:00+00:00",
            "run_id": "run", "run_status": "complete", **fields}


def _budget(**fields: object) -> dict[str, object]:
    return {"wall_ceiling_h": 16.0, "device_ceiling_h": 64, "authorizations": [],
            "spent_before": {"runs": 2, "wall_s": 5400, "device_s": 0},
            "planned_wall_s": [3600, 7200], "planned_device_s": None, "devices": 2,
            "over": [], "unpriced": [], **fields}


def test_the_ledger_section_marks_this_runs_attempts_newest_first(tmp_path: Path) -> None:
    from ref2va_accept.report import ledger_html

    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    assert ledger_html(bundle) == ""  # no ledger read: no section
    latency = {"ratio_of_medians": 0.467, "lower": 0.448, "upper": 0.481, "target": 0.5,
               "verdict": "supported"}
    bundle.set_section("ledger", {"file": "c.ledger.jsonl", "appended": 2, "torn_tail": True,
                                  "history": [
        _ledger_entry(run_id="earlier", track="5s-lossless", candidate="c1",
                      verdict="failed", reasons=["latency_failed"]),
        _ledger_entry(kind="run", wall_s=60, device_s=0),  # a run's entry: no attempt row
        _ledger_entry(track="5s-lossless", candidate="c1", verdict="supported",
                      change_class="implementation", latency=latency,
                      reasons=["latency_supported"])]})
    page = ledger_html(bundle)
    assert "<h3>Campaign record (c.ledger.jsonl)</h3>" in page
    assert "2 attempts, 1 from this run" in page and "cut short" in page
    assert page.index("run (this run)") < page.index("earlier")  # newest first
    assert "<td>implementation</td>" in page and "<td>not declared</td>" in page
    assert "<td>0.467 [0.448, 0.481] vs 0.5</td><td>latency_supported</td>" in page
    assert "<td>-</td><td>latency_failed</td>" in page  # no latency summary: no ratio


def test_the_budget_section_charges_this_runs_measured_entry(tmp_path: Path) -> None:
    from ref2va_accept.report import budget_html

    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    assert budget_html(bundle) == ""  # no budget check: no section
    bundle.set_section("budget", _budget(over=["wall: <over>"]))
    page = budget_html(bundle)
    assert "2 logical device(s) per instance; 0 authorization(s)" in page
    assert "over: wall: &lt;over&gt;" in page
    assert "<td>ceiling (with authorizations)</td><td>16</td><td>64</td>" in page
    assert "<td>spent by 2 earlier run(s)</td><td>1.50</td><td>0.00</td>" in page
    assert "<td>1.00 - 2.00</td><td>not estimated</td>" in page
    assert "<td>this run, measured</td><td>-</td><td>-</td>" in page  # no entry of its own yet
    assert "<td>left after this run</td><td>14.50</td><td>64.00</td>" in page
    # This run's own ledger entry is what it spent; another run's is not.
    bundle.set_section("ledger", {"file": "c.ledger.jsonl", "appended": 1, "torn_tail": False,
                                  "history": [_ledger_entry(kind="run", wall_s=1800, device_s=7200),
                                              _ledger_entry(kind="run", run_id="other",
                                                            wall_s=99999, device_s=99999)]})
    page = budget_html(bundle)
    assert "<td>this run, measured</td><td>0.50</td><td>2.00</td>" in page
    assert "<td>left after this run</td><td>14.00</td><td>62.00</td>" in page


def _localization(status: str = "pass", **data: object) -> AnyCheck:
    parting = {"kind": "differs", "module": "blocks.3", "b0": "b0-sha", "candidate": "c-sha",
               "before": "blocks.2", "output": 0, "skipped": [],
               "sentence": "blocks.3 is the first block whose output differs"}
    figures = {"name": "blocks.3.mlp", "status": "differs", "equal": False, "dtype_a": "float32",
               "dtype_b": "float32", "shape_a": [2, 4], "shape_b": [2, 4], "elements": 8,
               "differing": 2, "fraction": 0.25, "first_index": [0, 1], "max_abs_diff": 1e-06,
               "max_ulp": 3}
    picture = {"shape": [2, 4], "rows": 2, "cols": 4, "row_edges": [0, 1, 2],
               "col_edges": [0, 2, 4], "share": [[0.5, 0.0], [0.0, 0.5]], "differing": 2}
    return make_check("5s-lossless", "c1", "localization", status, None, "named blocks.3.mlp", {
        "point": "dit.step000", "seed": 42, "stage": "dit", "step": 0, "first_step": 0,
        "point_step": 0, "found": True, "module": "blocks.3.mlp", "where": "blocks.3.mlp",
        "sentence": "blocks.3.mlp parts first", "level1": parting,
        "level2": {**parting, "module": "blocks.3.mlp", "sentence": "mlp first"},
        "figures": figures, "inputs_equal": True, "picture": picture,
        "picture_of": "blocks.3.mlp output", "requests": [], **data})


def test_the_first_divergence_panel_from_the_check_or_its_recorded_form(tmp_path: Path) -> None:
    from ref2va_accept.report import localization_html, panel

    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    assert localization_html(bundle) == ""
    check = _localization()
    bundle.add_check(check)
    page = localization_html(bundle)
    assert "5s-lossless / c1: first divergence NAMED" in page
    assert "<b>blocks.3.mlp</b> at step 0 (first diverging point dit.step000, seed 42)" in page
    assert "inputs to it: equal in both runs" in page
    assert "blocks first: blocks.3 is the first block whose output differs" in page
    assert "<tr><th>share differing</th><td>25%</td></tr>" in page
    assert "<tr><th>first at</th><td>[0, 1]</td></tr>" in page and "<svg" in page
    # ref2va-accept localize draws its page from the check the pass made: the same panel.
    assert panel(check) == page[page.index("<div"):]
    # Level 1 alone, figures not compared, no picture, inputs unknown: none of their lines.
    bare = panel(_localization(level2=None, figures={"error": "no dump"}, picture=None,
                               inputs_equal=None))
    assert "blocks first" not in bare and "<table" not in bare and "<svg" not in bare
    assert "inputs to it" not in bare
    # Open: no place named, whatever the pass got to; the sentence says why.
    unseen = panel(_localization(found=False, module=None, where="", step=2, first_step=1,
                                 level1=None, level2=None, figures=None, picture=None,
                                 inputs_equal=None, sentence="c1's level-1 capture recorded no "
                                 "call (its capture report: 14 modules hooked, 0 calls)",
                                 status="open"))
    assert "first divergence OPEN" in unseen and "blocks.3" not in unseen
    assert "<b>no place named</b> at steps 1..2 (first diverging point dit.step000" in unseen
    assert "recorded no call (its capture report: 14 modules hooked, 0 calls)" in unseen
    not_reproduced = panel(_localization(found=False, module=None, step=2, first_step=2,
                                         where="blocks.3 (not reproduced)", status="open"))
    assert "<b>no place named</b>: blocks.3 (not reproduced), at step 2" in not_reproduced
    with pytest.raises(ValueError, match="5s-lossless/c1: a lossless_gate check is not a "
                                         "localization check"):
        panel(make_check("5s-lossless", "c1", "lossless_gate", "pass", None, "exact",
                         {"seed": 1, "points": [], "first_divergence": None}))
    with pytest.raises(ValueError, match="first_step"):  # refused where it is built
        new_check(check.track, check.arm, check.name, check.status, check.reason, check.detail,
                  {k: v for k, v in check.json_dict()["data"].items() if k != "first_step"})


def _profiles(root: Path) -> list[dict[str, object]]:
    """B0 and a candidate read from four-rank profiles in torch_npu's formats, the candidate's
    rank 2 missing, as the profiling scenario records them."""
    from ref2va_accept.arms import with_comparison
    from ref2va_accept.evidence import Profile, Profiled, ServerPeak
    from ref2va_accept.profiles import read_profiles
    from tests.npu_fixtures import text

    entries: list[Profile] = []
    for arm, variant, present in (("b0", text.Variant(), None),
                                  ("c1", text.candidate(), (0, 1, 3))):
        folder = text.write_arm(root / "profiles" / "5s-lossless" / arm / "traces", variant,
                                present)
        read = read_profiles(folder, root, [0, 1, 2, 3])
        entry = read.profile(
            track="5s-lossless", arm=arm, expected=[0, 1, 2, 3], instance=f"p.{arm}.1",
            profiler_config={"profiler": "torch"}, warmups=[1.5, None, 2.25],
            profiled=Profiled(sample_id="s1", ok=True, latency_s=2.125,
                              server_peak_memory_mb=ServerPeak(value=512.5, definition="hbm")))
        entries.append(with_comparison(entry, entries))
    return [e.json_dict() for e in entries]


def test_the_profiles_section_per_arm_with_ranks_steps_operators_and_b0_beside(
        tmp_path: Path) -> None:
    from ref2va_accept.report import profiles_html

    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    assert profiles_html(bundle) == ""
    for entry in _profiles(bundle.folder):
        bundle.add_profile(entry)
    page = profiles_html(bundle)
    assert "<h3>5s-lossless b0: summarized</h3>" in page
    assert "ranks expected [0, 1, 2, 3], profiled [0, 1, 2, 3]" in page
    assert "Warm-ups 1.50, 2.25 s. Profiled request 2.12 s; server peak memory 512.5 MB" in page
    # The step's split per rank and step, to one scale, with the copies beneath.
    assert page.count("<svg class='ref2va-step-bars'") == 2
    assert "rank 0 step 1: computing 40" in page and "host-device copies 0.3 ms" in page
    # Top operators with shapes and core; communication; copies; memory with definitions.
    assert ("<td>device kernel</td><td>FlashAttentionScore</td><td>MIX_AIC</td>"
            "<td>1,40,4096,128;1,40,16384,128;1,40,16384,128</td>") in page
    assert "<td>hcom_allReduce_</td><td>8</td><td>7.20</td>" in page
    assert "0-3 HCCS" in page and "<td>H2D</td><td>2</td><td>134217728</td>" in page
    assert "<td>allocated_peak</td><td>NPU:0 (PTA)</td><td>30000.0</td>" in page
    assert "<dt>active_peak</dt>" in page
    # The candidate: a missing rank is open, and it stands beside B0 on the ranks both have.
    assert "<h3>5s-lossless c1: open</h3>" in page
    assert "<tr><td>2</td><td>missing</td><td>-</td>" in page
    assert ("<h4>c1 beside b0</h4><p>a rank&#x27;s mean over rank(s) 0, 1, 3, profiled by "
            "both") in page
    assert "rank(s) 2 profiled by b0 only: left out of every mean" in page
    assert ("<td><code>FlashAttentionScore</code></td><td>MIX_AIC</td><td>17.02</td>"
            "<td>8.51</td><td>-8.51</td><td>0.500</td>") in page
    assert ">gone</td>" in page and ">new</td>" in page
    # The report is what the evidence holds: the same figures from the bundle read back.
    assert bundle.record.profiles is not None
    comparison = bundle.record.profiles[1].comparison
    assert comparison is not None and comparison.ranks_compared == [0, 1, 3]


def test_the_latency_decision_in_brief_from_the_typed_check(tmp_path: Path) -> None:
    from ref2va_accept.evidence import LatencySummary
    from ref2va_accept.report import latency_cell, ratio_text

    bundle = _latency_bundle(tmp_path)
    decided, unsteady = bundle.record.checks_of(LatencyRatioCheck)
    summary = LatencySummary.of(decided)
    assert summary is not None and summary.json_dict() == {
        "ratio_of_medians": pytest.approx(0.467, abs=5e-4), "lower": pytest.approx(0.448, abs=5e-4),
        "upper": pytest.approx(0.481, abs=5e-4), "target": 0.5, "verdict": "supported"}
    assert LatencySummary.of(unsteady) is None and LatencySummary.of(None) is None
    assert ratio_text(summary) == "0.467 [0.448, 0.481] vs 0.5"
    assert ratio_text(summary.model_copy(update={"lower": None})) == "0.467 [-, 0.481] vs 0.5"
    with pytest.raises(ValueError, match="verdict"):  # a summary missing a key is refused
        LatencySummary.model_validate({k: v for k, v in summary.json_dict().items()
                                       if k != "verdict"})
    assert latency_cell(decided).endswith("0.467 [0.448, 0.481] vs 0.5</span>")
    assert latency_cell(unsteady) == (
        "<span style='color:#9a6700'>not decided: warmup_not_steady</span>")
    assert latency_cell(None) == "-"


def test_the_audio_line_from_the_record_or_the_quality_commands_dict() -> None:
    from ref2va_accept.evidence import AudioComparisonRecord
    from ref2va_accept.report import audio_comparison_text

    stats = {"sample_rate": 48000, "channels": 2, "samples": 96000, "duration_s": 2.0,
             "start_time_s": 0.0, "loudness_lufs": -23.0, "peak_dbfs": -1.0,
             "clipping_ratio": 0.0, "silence_ratio": 0.0}
    audio = {"scorer_version": "1", "length_slack_samples": 2048, "candidate": stats,
             "baseline": stats, "lag_samples": 0, "lag_ms": 0.0, "lag_peak_correlation": 1.0,
             "compared_samples": 96000, "snr_db": "inf", "si_sdr_db": 41.234, "lsd_db": 0.5,
             "mrstft": 0.01234, "mrstft_spectral_convergence": 0.0,
             "mrstft_log_magnitude": 0.0, "loudness_diff_lu": -0.5,
             "length_mismatch_samples": 0, "length_within_aac_slack": True,
             "start_time_diff_s": None, "scorers": {}}
    line = audio_comparison_text(AudioComparisonRecord.model_validate(audio))
    assert line == ("lag 0.00 ms, SNR inf dB, SI-SDR 41.23 dB, LSD 0.500 dB, MR-STFT 0.0123, "
                    "loudness -0.50 LU, length difference 0 samples")
    with pytest.raises(ValueError, match="snr"):  # a misspelt figure is refused, not "-"
        AudioComparisonRecord.model_validate(
            {**{k: v for k, v in audio.items() if k != "snr_db"}, "snr": 1})
