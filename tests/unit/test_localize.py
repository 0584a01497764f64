"""The localization pass's judge side: capture logs compared (every way two runs can part), the
picture of where two tensors differ, which stage a point leads to, and what the pass costs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ref2va_accept.core import Check, LocalizeError, Reason
from ref2va_accept.evidence import AnyCheck
from ref2va_accept.judging.localize import (
    diff_map,
    divergence,
    read_log,
    svg,
    target_of,
    wants_pass,
)
from ref2va_accept.tensors import write_tensor_file
from tests.unit.check_records import make_check

pytestmark = pytest.mark.fast


def _log(folder: Path, calls: list[tuple[str, str, str]]) -> Path:
    """calls: (module, input digest, output digest), call indexes counted per module."""
    folder.mkdir(parents=True)
    seen: dict[str, int] = {}
    lines = []
    for index, (module, given, made) in enumerate(calls):
        call = seen.get(module, 0)
        seen[module] = call + 1
        lines.append(json.dumps({
            "index": index, "module": module, "call": call,
            "inputs": [{"shape": [2], "dtype": "F32", "sha256": given}],
            "outputs": [{"shape": [2], "dtype": "F32", "sha256": made}]}))
    (folder / "capture.jsonl").write_text("\n".join(lines) + "\n")
    return folder


B0 = [("m.a", "i", "1"), ("m.b", "1", "2"), ("m.c", "2", "3")]


@pytest.mark.parametrize(("candidate", "kind", "module"), [
    (B0, "none", None),
    ([("m.a", "i", "1"), ("m.b", "1", "X"), ("m.c", "X", "Y")], "differs", "m.b"),
    ([("m.a", "i", "1"), ("m.b", "Z", "X"), ("m.c", "X", "Y")], "inputs_differ", "m.b"),
    ([("m.a", "i", "1"), ("m.c", "2", "3")], "not_run", "m.b"),
    ([("m.a", "i", "1"), ("m.x", "1", "1"), ("m.b", "1", "2"), ("m.c", "2", "3")],
     "only_in_candidate", "m.x"),
    ([("m.a", "i", "1"), ("m.c", "2", "3"), ("m.b", "1", "2")], "order", "m.b"),
])
def test_two_capture_logs_part_where_they_first_disagree(
        tmp_path: Path, candidate: list[tuple[str, str, str]], kind: str, module: str | None
) -> None:
    found = divergence(read_log(_log(tmp_path / "a", B0)),
                       read_log(_log(tmp_path / "b", candidate)))
    assert (found.kind, found.module) == (kind, module), found.sentence()
    assert found.sentence()


def test_a_module_called_twice_is_compared_call_by_call(tmp_path: Path) -> None:
    b0 = [("m.a", "i", "1"), ("m.a", "j", "2")]
    candidate = [("m.a", "i", "1"), ("m.a", "j", "X")]
    found = divergence(read_log(_log(tmp_path / "a", b0)),
                       read_log(_log(tmp_path / "b", candidate)))
    assert found.kind == "differs" and found.b0 is not None and found.b0.call == 1
    assert "call 1" in found.sentence()


@pytest.mark.parametrize("line", ["not json", '{"index": 0}', '{"index": 0, "module": "m", '
                                  '"call": 0, "inputs": [{"shape": [1]}], "outputs": []}'])
def test_a_malformed_capture_log_is_named_with_its_line(tmp_path: Path, line: str) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "capture.jsonl").write_text(line + "\n")
    with pytest.raises(LocalizeError, match=r"run/capture.jsonl:1"):
        read_log(tmp_path / "run")
    with pytest.raises(LocalizeError, match="cannot read the capture log"):
        read_log(tmp_path / "absent")


def test_the_picture_shows_where_two_tensors_differ(tmp_path: Path) -> None:
    a = np.zeros((64, 96), dtype=np.float32)
    b = a.copy()
    b[:8, 90:] = 1.0  # one corner: the first rows, the last columns
    fa = write_tensor_file(tmp_path / "a.safetensors", {"out0": a})
    fb = write_tensor_file(tmp_path / "b.safetensors", {"out0": b})
    picture = diff_map(fa, fb)
    assert picture is not None and picture.differing == 8 * 6
    share = np.array(picture.share)
    assert share[0, -1] > 0 and share[-1, 0] == 0 and share[:, :40].sum() == 0
    assert "<svg" in svg(picture) and "48 of 6144 elements differ" in svg(picture)
    same = diff_map(fa, fa)
    assert same is not None and same.differing == 0


@pytest.mark.parametrize(("point", "stage", "step"), [
    ("cond.text", "encoders", None), ("cond.audio", "encoders", None),
    ("dit.step007", "dit", 7), ("dit.step012.video", "dit", 12), ("dit.step000.audio", "dit", 0),
])
def test_a_point_leads_to_its_stage(point: str, stage: str, step: int | None) -> None:
    target = target_of(point)
    assert target is not None and (target.stage, target.step) == (stage, step)


@pytest.mark.parametrize(("point", "equal", "first"), [
    ("dit.step025", ["cond.text", "dit.step000"], 1),  # the points skip steps 1..24
    ("dit.step025.video", ["dit.step000.video", "dit.step000.audio", "dit.step010.audio"], 11),
    ("dit.step000", ["cond.text"], 0),
    ("dit.step007", [], 0),  # no equal step before it: from the first step
])
def test_level_one_starts_after_the_last_equal_step(point: str, equal: list[str],
                                                    first: int) -> None:
    target = target_of(point, equal)
    assert target is not None and target.first_step == first


def _table(first: str | None, *points: tuple[str, bool]) -> dict[str, Any]:
    """A lossless gate's table as the gate writes it: every point compared, in order."""
    from ref2va_accept.evidence import PointRecord

    compared = [PointRecord.of(name, "equal" if equal else "differs", "float32", "float32",
                               (2,), (2,), 2, 0 if equal else 1, 0.0 if equal else 0.5)
                for name, equal in points]
    return {"seed": 42, "points": [p.json_dict() for p in compared], "first_divergence": first}


def test_the_equal_points_are_read_from_the_gates_table() -> None:
    from ref2va_accept.evidence import LosslessGateData
    from ref2va_accept.judging.localize._runner import equal_before

    table = LosslessGateData.model_validate(_table(
        "dit.step025", ("cond.text", True), ("dit.step000", True), ("dit.step025", False),
        ("dit.step049", False)))
    assert equal_before(table) == ["cond.text", "dit.step000"]
    # an equal point after the first divergence is not one before it
    later = LosslessGateData.model_validate(_table(
        "cond.text", ("cond.text", False), ("dit.step000", True)))
    assert equal_before(later) == []


@pytest.mark.parametrize("point", ["latent.video", "decoded.audio", "mp4.video"])
def test_a_point_after_the_dit_is_not_localized_by_modules(point: str) -> None:
    assert target_of(point) is None


def _gate(status: str, reason: Reason | None, data: dict[str, Any]) -> AnyCheck:
    return make_check("5s-lossless", "c", Check.LOSSLESS_GATE, status, reason,
                      "x", data)


def test_only_a_bit_exact_failure_asks_for_the_pass() -> None:
    from ref2va_accept.judging.localize import failed_gate

    differs = _table("dit.step003", ("dit.step000", True), ("dit.step003", False))
    assert wants_pass([_gate("fail", Reason.QUALITY_GATE_FAILED, differs)]) == "dit.step003"
    found = failed_gate([_gate("fail", Reason.QUALITY_GATE_FAILED, differs)])
    assert found is not None and [p.name for p in found.points] == ["dit.step000", "dit.step003"]
    assert wants_pass([_gate("pass", None, _table(None, ("dit.step000", True)))]) is None
    assert wants_pass([_gate("fail", Reason.COMPARISON_POINT_MISSING,
                             _table(None, ("dit.step000", True)))]) is None
    # a gate that records no table (nothing compared) names no point to localize
    assert failed_gate([_gate("fail", Reason.QUALITY_GATE_FAILED, {})]) is None


def test_plan_prices_the_pass_at_its_worst_case() -> None:
    from ref2va_accept.campaign import load_campaign
    from ref2va_accept.judging.localize._price import pass_cost
    from ref2va_accept.planning import Prices, plan_campaign
    from tests.unit.suite_runner import ROOT

    campaign = load_campaign(ROOT / "fixtures/campaigns/910c.yaml")
    plans = plan_campaign(campaign)
    prices = Prices.of(campaign)
    cost = pass_cost(plans, prices, 4)
    lossless = [p for p in plans.values() if p.quality == "lossless"]
    candidates = {p.track_id: len([a for a in p.arms if not a.is_baseline]) for p in lossless}
    assert cost.passes == sum(candidates.values()) > 0
    assert (cost.starts, cost.requests) == (3 * cost.passes, 4 * cost.passes)
    expected = sum(n * (3 * prices.start_s[plans[t].duration] + 4 * prices.request_s[
        plans[t].duration]) for t, n in candidates.items())
    assert cost.wall_s == pytest.approx(expected)
    assert "logical-device-h" in cost.line() and cost.json_dict()["device_h"] > 0
    # A campaign without frozen prices says which are missing instead of a figure.
    unpriced = pass_cost(plans, Prices(), 4)
    assert unpriced.wall_s is None and "expected_start_s" in unpriced.line()


def test_the_disk_check_sizes_a_pass_per_lossless_candidate_gate() -> None:
    from ref2va_accept.judging.localize import _runner as runner
    from ref2va_accept.planning import Plan, WorkUnit
    from ref2va_accept.planning import _disk as disk

    assert disk.LOCALIZE_REQUESTS == runner.REQUESTS
    from ref2va_accept.campaign import load_campaign
    from ref2va_accept.planning import plan_campaign
    from tests.unit.suite_runner import ROOT

    plans = plan_campaign(load_campaign(ROOT / "fixtures/campaigns/reference.yaml"))
    plan = plans["5s-lossless"]
    gate = WorkUnit("gate", "5s-lossless", 2, 1, 1, localize=1)
    with_pass = disk.estimate(Plan({"n": (gate,)}), plans)
    without = disk.estimate(Plan({"n": (WorkUnit("gate", "5s-lossless", 2, 1, 1),)}), plans)
    need = with_pass.tracks[0].localize_bytes
    # the reference contract freezes dit.step000, 025 and 049: level 1 may span 25 steps
    assert disk.step_span(plan) == 25
    assert need == 4 * disk.mp4_bytes(plan) + (2 * 25 + 2) * disk.largest_point_bytes(plan) > 0
    assert with_pass.estimate_bytes - without.estimate_bytes == need
    assert "localization passes" in with_pass.parts()




# -- ref2va-accept localize: what it reads of the finished run ----------------------------------

def _finished_run(folder: Path, checks: list[dict[str, Any]],
                  campaign: dict[str, Any] | None) -> Path:
    """A finished run's folder whose evidence.json is a complete bundle (the records read it)."""
    from tests.unit.evidence_schema import validate_bundle

    bundle = validate_bundle({
        "schema": "ref2va-evidence/1", "run_id": "20260101T000000Z-abcdef",
        "status": "complete", "started_at": "2026-01-01T00:00:00+00:00",
        "finished_at": "2026-01-01T00:10:00+00:00", "harness_version": "0.1.0",
        "environment": {"python": "3.11.7", "implementation": "cpython", "machine": "x86_64",
                        "system": "Linux", "packages": {}},
        "campaign": campaign, "verdicts": [], "checks": checks, "instances": [], "samples": [],
        "media": [], "notes": []})
    folder.mkdir()
    (folder / "evidence.json").write_text(json.dumps(bundle))
    return folder


def _recorded_campaign(canonical: dict[str, Any]) -> dict[str, Any]:
    return {"name": "reference", "file": "fixtures/campaigns/reference.yaml",
            "engine_kind": "reference", "source_pin": {}, "canonical": canonical,
            "freeze": {"state": "not_frozen", "lock_sha256": None, "problems": [],
                       "unfilled": [], "verdict_cap": "protocol_not_frozen"},
            "order": {"seed": 1, "drawn_per_run": True, "given": False}}


def _gate_record(status: str, reason: Reason | None, data: dict[str, Any],
                 arm: str = "reduction-order") -> dict[str, Any]:
    recorded: dict[str, Any] = json.loads(json.dumps(
        make_check("5s-lossless", arm, Check.LOSSLESS_GATE, status,
                   reason, "x", data).json_dict()))
    return recorded


def test_localize_reads_the_failed_gate_and_the_campaign_of_the_finished_run(
        tmp_path: Path) -> None:
    from ref2va_accept.campaign import canonical_campaign, load_campaign
    from ref2va_accept.cli import localize_run
    from tests.unit.suite_runner import ROOT

    canonical = json.loads(json.dumps(canonical_campaign(
        load_campaign(ROOT / "fixtures/campaigns/reference.yaml"))))
    failed = _gate_record("fail", Reason.QUALITY_GATE_FAILED, _table(
        "dit.step025", ("dit.step000", True), ("dit.step025", False)), arm="ghost")
    run = _finished_run(tmp_path / "run", [failed], _recorded_campaign(canonical))
    # Everything read back matched: the gate's point, the campaign the run recorded (found from
    # `repo` by its file), its canonical form; what stops it here is a candidate the campaign
    # does not have.
    with pytest.raises(LocalizeError, match=r"reference\.yaml: ghost does not enter 5s-lossless"):
        localize_run(run, "5s-lossless", "ghost", None, ROOT)
    with pytest.raises(LocalizeError, match="no lossless_gate check of ghost on 10s-lossless "
                                            "in this run"):
        localize_run(run, "10s-lossless", "ghost", None, ROOT)


@pytest.mark.parametrize(("checks", "campaign", "refused"), [
    ([_gate_record("pass", None, _table(None, ("dit.step000", True)))], {},
     r"reduction-order on 5s-lossless was not a bit-exact failure in run "
     r"\(lossless_gate pass: x\)"),
    ([_gate_record("fail", Reason.CANDIDATE_REQUEST_FAILED, {})], {},
     "was not a bit-exact failure in run"),
    ([_gate_record("fail", Reason.QUALITY_GATE_FAILED, _table(
        "dit.step000", ("dit.step000", False)))], None, "run recorded no campaign"),
    ([_gate_record("fail", Reason.QUALITY_GATE_FAILED, _table(
        "dit.step000", ("dit.step000", False)))], {"another": "campaign"},
     r"reference\.yaml is not the campaign run ran"),
])
def test_localize_refuses_a_run_it_cannot_localize_again(
        tmp_path: Path, checks: list[dict[str, Any]], campaign: dict[str, Any] | None,
        refused: str) -> None:
    from ref2va_accept.cli import localize_run
    from tests.unit.suite_runner import ROOT

    recorded = None if campaign is None else _recorded_campaign(campaign)
    run = _finished_run(tmp_path / "run", checks, recorded)
    with pytest.raises(LocalizeError, match=refused):
        localize_run(run, "5s-lossless", "reduction-order", None, ROOT)


@pytest.mark.parametrize(("evidence", "said"), [
    (None, r"run: not a finished run's evidence folder \(no evidence.json \(not a run folder\)\)"),
    ("{", r"run: not a finished run's evidence folder \(evidence.json is not JSON"),
    ('{"schema": "ref2va-evidence/1"}', r"run: not a finished run's evidence folder "
                                       r"\(evidence.json does not match the evidence records"),
])
def test_localize_refuses_a_folder_without_a_finished_runs_evidence(
        tmp_path: Path, evidence: str | None, said: str) -> None:
    from ref2va_accept.cli import localize_run

    run = tmp_path / "run"
    run.mkdir()
    if evidence is not None:
        (run / "evidence.json").write_text(evidence)
    with pytest.raises(LocalizeError, match=said):
        localize_run(run, "5s-lossless", "c", None, tmp_path)
