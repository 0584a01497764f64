"""The reference engine's module capture and planted divergences, compared by the judge's own
capture reader (localize/capture.py): the pass names exactly the module where a divergence was
planted, at block level and inside the block, in the DiT at a chosen step and in the encoders;
with the capture's hooks off (the ``capture_hooks_off`` fault) the engine reports no call and the
judge names nothing from it. A capture that stops once it is whole writes what a whole request
writes and runs no step after it; a cancel before then is a cancel."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engine.reference.errors import ApiError, CaptureStopped, GenerationCancelled
from engine.reference.faults import FaultPlan, FaultyGenerator, resolve_fault, wrap_generator
from engine.reference.profile import load_profile
from engine.reference.torch_generator import TorchGenerator
from ref2va_accept.judging.localize import Target, divergence, read_log
from ref2va_accept.judging.localize._judgement import NotSeen, captured
from ref2va_contract.diagnostics import (
    ACCEPTANCE_FIELD,
    CAPTURE_LOG_FILE,
    CAPTURE_STOPPED_MARKER,
)
from tests.engine.pipeline_harness import SPEC, Monitor, generator

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def b0(tmp_path_factory: pytest.TempPathFactory) -> TorchGenerator:
    """One B0 engine for the module, as a server keeps one across its requests: building it
    (seeded weights drawn in place) cost as much as a capture run, once a test. Its diagnostics
    root is the session's temporary folder, so that every test's own tmp_path is inside it."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        return generator(monkeypatch, tmp_path_factory.getbasetemp())


def _capture(engine: TorchGenerator | FaultyGenerator, folder: Path, point: str,
             **capture: Any) -> Path:
    block = {"dump_dir": str(folder), "points": [point], "capture": capture}
    request = replace(SPEC, extra_params={**SPEC.extra_params, ACCEPTANCE_FIELD: block})
    engine.validate(request)
    list(engine.generate(request, Monitor()).frames)
    return folder


def _localize(b0: TorchGenerator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
              planted: str, stage: str, step: int | None) -> tuple[str, str]:
    candidate = generator(monkeypatch, tmp_path, **{"plant-divergence": planted})
    point = "cond.text" if stage == "encoders" else f"dit.step{step:03d}"
    where = {"stage": stage, "step": step}
    one = divergence(read_log(_capture(b0, tmp_path / "b0-1", point, **where)),
                  read_log(_capture(candidate, tmp_path / "c-1", point, **where)))
    # A module of the block called outside its forward (its modulation) feeds it differing
    # inputs: level 1 says so, and level 2 inside the block finds the module.
    assert one.kind in ("differs", "inputs_differ"), one.sentence()
    inside = {**where, "within": one.module, "tensors": True}
    two = divergence(read_log(_capture(b0, tmp_path / "b0-2", point, **inside)),
                  read_log(_capture(candidate, tmp_path / "c-2", point, **inside)))
    assert two.kind == "differs", two.sentence()
    assert two.b0 is not None and all(o.file for o in two.b0.outputs)
    return str(one.module), str(two.module)


@pytest.mark.parametrize(("planted", "step", "block"), [
    ("dit.blocks.2.cross_q", 3, "dit.blocks.2"),
    ("dit.blocks.0.qkv", 0, "dit.blocks.0"),
    ("dit.blocks.5.fc1", 5, "dit.blocks.5"),
    ("dit.blocks.4.modulation", 1, "dit.blocks.4"),
])
def test_a_divergence_planted_in_the_dit_is_named_exactly(
        b0: TorchGenerator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, planted: str,
        step: int, block: str) -> None:
    found = _localize(b0, monkeypatch, tmp_path, f"{planted}@{step}", "dit", step)
    assert found == (block, planted)


def test_a_divergence_planted_in_the_conditioning_is_named_in_the_encoder(
        b0: TorchGenerator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    found = _localize(b0, monkeypatch, tmp_path, "text_encoder.layers.1.fc2", "encoders", None)
    assert found == ("text_encoder.layers.1", "text_encoder.layers.1.fc2")


def test_a_split_k_reduction_is_named_at_the_projection_it_changed(
        b0: TorchGenerator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    split = generator(monkeypatch, tmp_path, **{"reduction-order": "split_k"})
    inside = {"stage": "dit", "step": 0, "within": "dit.blocks.0", "tensors": True}
    found = divergence(read_log(_capture(b0, tmp_path / "a", "dit.step000", **inside)),
                    read_log(_capture(split, tmp_path / "b", "dit.step000", **inside)))
    assert (found.kind, found.module) == ("differs", "dit.blocks.0.fc2")


def test_only_the_chosen_step_is_captured_and_the_hooks_go_away(
        b0: TorchGenerator, tmp_path: Path) -> None:
    engine = b0
    hooked = sum(len(m._forward_hooks) for m in engine.model.modules())
    folder = _capture(engine, tmp_path / "a", "dit.step001", stage="dit", step=1)
    calls = read_log(folder)
    # One call per block-level module that runs in a step (the time embedding twice: video and
    # audio sigmas), all at step 1 alone: a second step would repeat every module.
    assert len({c.key for c in calls}) == len(calls)
    assert [c.module for c in calls if c.module.startswith("dit.blocks.")] == \
        [f"dit.blocks.{i}" for i in range(6)]
    report = (folder / "enabled_path.json").read_text()
    assert '"capture"' in report and '"calls": ' + str(len(calls)) in report
    assert sum(len(m._forward_hooks) for m in engine.model.modules()) == hooked
    # A request without a capture writes no log.
    _plain = tmp_path / "plain"
    request = replace(SPEC, extra_params={**SPEC.extra_params, ACCEPTANCE_FIELD: {
        "dump_dir": str(_plain), "points": ["dit.step001"]}})
    list(engine.generate(request, Monitor()).frames)
    assert not (_plain / CAPTURE_LOG_FILE).exists()


def test_a_capture_from_a_first_step_names_each_lines_step(
        b0: TorchGenerator, tmp_path: Path) -> None:
    engine = b0
    calls = read_log(_capture(engine, tmp_path / "r", "dit.step003", stage="dit", step=3,
                              first_step=1))
    assert sorted({c.step for c in calls}) == [1, 2, 3]
    per_step = [c for c in calls if c.step == 1]
    assert [c.key[1:] for c in calls if c.step == 3] == [c.key[1:] for c in per_step]


@pytest.mark.parametrize(("capture", "named"), [
    ({"stage": "dit", "step": 99}, "step"),
    ({"stage": "vae", "step": 0}, "stage"),
    ({"stage": "encoders", "step": 2}, "step"),
    ({"stage": "dit", "step": 0, "within": "dit.blocks.9"}, "dit.blocks.9"),
    ({"stage": "dit", "step": 0, "tensors": "yes"}, "tensors"),
    ({"stage": "dit", "step": 0, "surprise": 1}, "capture"),
    ({"stage": "dit", "step": 2, "first_step": 3}, "first_step"),
    ({"stage": "encoders", "step": None, "first_step": 0}, "first_step"),
])
def test_a_capture_it_cannot_honour_is_refused_before_anything_runs(
        b0: TorchGenerator, tmp_path: Path, capture: dict[str, Any], named: str) -> None:
    engine = b0
    block = {"dump_dir": str(tmp_path / "x"), "points": ["dit.step000"], "capture": capture}
    request = replace(SPEC, extra_params={**SPEC.extra_params, ACCEPTANCE_FIELD: block})
    with pytest.raises(ApiError) as refused:
        engine.validate(request)
    assert named in str(refused.value)
    assert not (tmp_path / "x" / CAPTURE_LOG_FILE).exists()


@pytest.mark.parametrize(("point", "where", "target"), [
    ("dit.step001", {"stage": "dit", "step": 1}, Target("dit", 1, 1)),
    ("cond.text", {"stage": "encoders", "step": None}, Target("encoders", None)),
])
def test_with_the_capture_hooks_off_the_engine_reports_no_call_and_nothing_is_named(
        b0: TorchGenerator, tmp_path: Path, point: str, where: dict[str, Any],
        target: Target) -> None:
    engine = b0
    hooked = sum(len(m._forward_hooks) for m in engine.model.modules())
    # The fault's profile switches it on, and the server wraps its generator for it.
    profile = load_profile(REPO / "engine/profiles/reference/fault-capture-hooks-off.yaml")
    plan = resolve_fault(profile.args, {})
    assert plan == FaultPlan("capture_hooks_off")
    off = wrap_generator(engine, plan)
    assert isinstance(off, FaultyGenerator)
    folder = _capture(off, tmp_path / "off", point, **where)
    report = json.loads((folder / "enabled_path.json").read_text())["capture"]
    assert report["modules_hooked"] > 0 and report["calls"] == 0 and report["errors"] == []
    assert read_log(folder) == []
    with pytest.raises(NotSeen) as refused:
        captured(folder, "cand", 1, target)
    assert (f"recorded no call (its capture report: {report['modules_hooked']} modules hooked, "
            "0 calls: hooks that never fired)") in str(refused.value)
    # B0's capture of the same request, hooks on, is whole; against the silent one, its calls
    # are not "not run": the candidate's capture recorded none at all.
    on = _capture(engine, tmp_path / "on", point, **where)
    found = divergence(captured(on, "b0", 1, target), read_log(folder))
    assert found.kind == "uncovered" and "recorded no call at all" in found.sentence()
    assert sum(len(m._forward_hooks) for m in engine.model.modules()) == hooked


# -- a capture that stops once it is whole ------------------------------------------------------

class _Steps(Monitor):
    """Counts the steps a generation finished."""

    def __init__(self) -> None:
        self.done: list[int] = []

    def step_done(self, step: int, total: int) -> None:
        self.done.append(step)


def _stopping(engine: TorchGenerator, folder: Path, points: list[str],
              **capture: Any) -> tuple[_Steps, CaptureStopped]:
    block = {"dump_dir": str(folder), "points": points, "capture": {**capture, "stop": True}}
    request = replace(SPEC, extra_params={**SPEC.extra_params, ACCEPTANCE_FIELD: block})
    engine.validate(request)
    steps = _Steps()
    with pytest.raises(CaptureStopped) as stopped:
        engine.generate(request, steps)
    return steps, stopped.value


@pytest.mark.parametrize(("where", "points", "ran", "said"), [
    ({"stage": "dit", "step": 2, "first_step": 1}, ["dit.step001", "dit.step002"], [1, 2, 3],
     "the DiT at step 2"),
    ({"stage": "encoders", "step": None}, ["cond.text", "cond.audio"], [],
     "the conditioning encoders"),
])
def test_a_capture_that_stops_writes_what_a_whole_request_writes_and_runs_no_step_after_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: dict[str, Any],
        points: list[str], ran: list[int], said: str) -> None:
    engine = generator(monkeypatch, tmp_path)  # its own: a stopped generation ends mid-denoise
    hooked = sum(len(m._forward_hooks) for m in engine.model.modules())
    steps, stopped = _stopping(engine, tmp_path / "stop", points, **where)
    assert str(stopped).startswith(f"{CAPTURE_STOPPED_MARKER}: the capture of {said}")
    assert steps.done == ran  # no step after the capture's last (step_done counts from 1)
    report = json.loads((tmp_path / "stop" / "enabled_path.json").read_text())
    assert report["capture"]["stopped"] == {"stage": where["stage"], "step": where["step"]}
    assert "decode_video" not in report["stages"]
    assert sum(len(m._forward_hooks) for m in engine.model.modules()) == hooked
    # The same capture run through writes the same calls and points, byte for byte: the pass's
    # evidence does not depend on the rest of the denoise.
    assert sorted(p.stem for p in (tmp_path / "stop").glob("*.safetensors")) == sorted(points)
    whole = _capture(engine, tmp_path / "whole", points[0], **where)
    assert (tmp_path / "stop" / CAPTURE_LOG_FILE).read_bytes() == \
        (whole / CAPTURE_LOG_FILE).read_bytes()
    assert (tmp_path / "stop" / f"{points[0]}.safetensors").read_bytes() == \
        (whole / f"{points[0]}.safetensors").read_bytes()
    assert json.loads((whole / "enabled_path.json").read_text())["capture"]["stopped"] is None


def test_a_capture_that_stops_refuses_a_point_it_would_never_write(
        b0: TorchGenerator, tmp_path: Path) -> None:
    engine = b0
    for points, named in ((["dit.step001", "dit.step003"], "dit.step003"),
                          (["latent.video"], "latent.video"), ("all", "decoded.video")):
        block = {"dump_dir": str(tmp_path / "x"), "points": points,
                 "capture": {"stage": "dit", "step": 2, "stop": True}}
        request = replace(SPEC, extra_params={**SPEC.extra_params, ACCEPTANCE_FIELD: block})
        with pytest.raises(ApiError) as refused:
            engine.validate(request)
        assert refused.value.status_code == 400 and named in str(refused.value)
        assert "stops once its capture is whole" in str(refused.value)


def test_a_cancel_before_the_capture_is_whole_is_a_cancel_not_a_stop(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    engine = generator(monkeypatch, tmp_path)  # its own: a cancelled generation ends mid-denoise

    class CancelledAtStep1(_Steps):
        def step_done(self, step: int, total: int) -> None:
            super().step_done(step, total)
            if step == 1:
                raise GenerationCancelled("generation x was cancelled")

    block = {"dump_dir": str(tmp_path / "c"), "points": ["dit.step003"],
             "capture": {"stage": "dit", "step": 3, "stop": True}}
    request = replace(SPEC, extra_params={**SPEC.extra_params, ACCEPTANCE_FIELD: block})
    with pytest.raises(GenerationCancelled):
        engine.generate(request, CancelledAtStep1())
    # no enabled_path.json, so no capture report saying it stopped: the judge reads a failure
    assert not (tmp_path / "c" / "enabled_path.json").exists()
