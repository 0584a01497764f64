"""The localization pass's judge side: capture logs compared (every way two runs can part), the
picture of where two tensors differ, which stage a point leads to, and what the pass costs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ref2va_accept.check_records import CheckResult
from ref2va_accept.checks import Check, Reason
from ref2va_accept.errors import LocalizeError
from ref2va_accept.localize import diff_map, parting, read_log, svg, target_of, wants_pass
from ref2va_accept.tensors import write_tensor_file

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
    found = parting(read_log(_log(tmp_path / "a", B0)), read_log(_log(tmp_path / "b", candidate)))
    assert (found.kind, found.module) == (kind, module), found.sentence()
    assert found.sentence()


def test_a_module_called_twice_is_compared_call_by_call(tmp_path: Path) -> None:
    b0 = [("m.a", "i", "1"), ("m.a", "j", "2")]
    candidate = [("m.a", "i", "1"), ("m.a", "j", "X")]
    found = parting(read_log(_log(tmp_path / "a", b0)), read_log(_log(tmp_path / "b", candidate)))
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


def test_the_equal_points_are_read_from_the_gates_table() -> None:
    from ref2va_accept.localize.runner import equal_before

    table = {"first_divergence": "dit.step025", "points": [
        {"name": "cond.text", "equal": True}, {"name": "dit.step000", "equal": True},
        {"name": "dit.step025", "equal": False}, {"name": "dit.step049", "equal": False}]}
    assert equal_before(table) == ["cond.text", "dit.step000"]


@pytest.mark.parametrize("point", ["latent.video", "decoded.audio", "mp4.video"])
def test_a_point_after_the_dit_is_not_localized_by_modules(point: str) -> None:
    assert target_of(point) is None


def _gate(status: str, reason: Reason | None, data: dict[str, Any]) -> CheckResult:
    return CheckResult("5s-lossless", "c", Check.LOSSLESS_GATE, status, reason,  # type: ignore[arg-type]
                       "x", data)


def test_only_a_bit_exact_failure_asks_for_the_pass() -> None:
    assert wants_pass([_gate("fail", Reason.QUALITY_GATE_FAILED,
                             {"first_divergence": "dit.step003"})]) == "dit.step003"
    assert wants_pass([_gate("pass", None, {"first_divergence": None})]) is None
    assert wants_pass([_gate("fail", Reason.COMPARISON_POINT_MISSING,
                             {"first_divergence": None})]) is None


def test_plan_prices_the_pass_at_its_worst_case() -> None:
    from ref2va_accept.campaign import load_campaign
    from ref2va_accept.cost import Prices
    from ref2va_accept.localize.price import pass_cost
    from ref2va_accept.plan import plan_campaign
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
    assert "logical-device-h" in cost.line() and cost.to_dict()["device_h"] > 0
    # A campaign without frozen prices says which are missing instead of a figure.
    unpriced = pass_cost(plans, Prices(), 4)
    assert unpriced.wall_s is None and "expected_start_s" in unpriced.line()


def test_the_disk_check_sizes_a_pass_per_lossless_candidate_gate() -> None:
    from ref2va_accept import disk
    from ref2va_accept.localize import runner
    from ref2va_accept.run_plan import Plan, Unit

    assert disk.LOCALIZE_REQUESTS == runner.REQUESTS
    from ref2va_accept.campaign import load_campaign
    from ref2va_accept.plan import plan_campaign
    from tests.unit.suite_runner import ROOT

    plans = plan_campaign(load_campaign(ROOT / "fixtures/campaigns/reference.yaml"))
    plan = plans["5s-lossless"]
    gate = Unit("gate", "5s-lossless", 2, 1, 1, localize=1)
    with_pass = disk.estimate(Plan({"n": (gate,)}), plans)
    without = disk.estimate(Plan({"n": (Unit("gate", "5s-lossless", 2, 1, 1),)}), plans)
    need = with_pass.tracks[0].localize_bytes
    # the reference contract freezes dit.step000, 025 and 049: level 1 may span 25 steps
    assert disk.step_span(plan) == 25
    assert need == 4 * disk.mp4_bytes(plan) + (2 * 25 + 2) * disk.largest_point_bytes(plan) > 0
    assert with_pass.estimate_bytes - without.estimate_bytes == need
    assert "localization passes" in with_pass.parts()


