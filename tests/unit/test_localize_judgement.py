"""What the localization pass may name, judged on capture logs and reports written by hand: a
capture backs a place only when the engine reports hooking modules and recording the calls its
log holds; B0's calls the candidate's capture does not cover are not "not run"; a level 2 that
does not see level 1's block part again names nothing; inputs that already differ where the pass
begins to see (the first step it captured, an encoder's first hooked module) leave it open."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ref2va_accept.core import LocalizeError
from ref2va_accept.judging.localize import Target, divergence
from ref2va_accept.judging.localize._capture import Call, Digest
from ref2va_accept.judging.localize._judgement import (
    NotSeen,
    at_stage_start,
    captured,
    name_inside,
    name_level_one,
    not_reproduced,
)

pytestmark = pytest.mark.fast

DIT = Target("dit", 3, 1)  # level 1 over steps 1..3
ENCODERS = Target("encoders", None)


def _call(index: int, module: str, step: int | None, given: str = "i", made: str = "o",
          call: int = 0) -> Call:
    def digest(sha: str) -> tuple[Digest, ...]:
        return (Digest((2,), "F32", sha),)
    return Call(index, module, call, digest(given), digest(made), step)


def _capture(folder: Path, calls: list[Call], report: dict[str, Any] | None) -> Path:
    folder.mkdir(parents=True)
    (folder / "capture.jsonl").write_text("".join(json.dumps({
        "index": c.index, "step": c.step, "module": c.module, "call": c.call,
        "inputs": [{"shape": [2], "dtype": "F32", "sha256": c.inputs[0].sha256}],
        "outputs": [{"shape": [2], "dtype": "F32", "sha256": c.outputs[0].sha256}]}) + "\n"
        for c in calls))
    (folder / "enabled_path.json").write_text(json.dumps(
        {} if report is None else {"capture": report}))
    return folder


def _steps(*steps: int) -> list[Call]:
    return [_call(i, f"dit.blocks.{i % 2}", step) for i, step in enumerate(steps)]


def test_a_capture_the_engine_reports_whole_gives_its_calls(tmp_path: Path) -> None:
    calls = _steps(1, 1, 2, 2, 3, 3)
    folder = _capture(tmp_path / "a", calls, {"errors": [], "modules_hooked": 2, "calls": 6})
    assert captured(folder, "b0", 1, DIT) == calls


@pytest.mark.parametrize(("calls", "report", "arm", "said"), [
    ([], {"errors": [], "modules_hooked": 14, "calls": 0}, "cand",
     "cand's level-1 capture of the DiT at steps 1..3 recorded no call (its capture report: 14 "
     "modules hooked, 0 calls: hooks that never fired)"),
    ([], {"errors": [], "modules_hooked": 0, "calls": 0}, "cand",
     "cand's level-1 capture of the DiT at steps 1..3 hooked no module (its capture report: 0 "
     "modules hooked, 0 calls)"),
    (_steps(1, 2, 3), {"errors": []}, "cand",
     "its capture report does not say modules_hooked or calls"),
    (_steps(1, 2, 3), {"errors": [], "modules_hooked": 2, "calls": 5}, "cand",
     "its capture.jsonl holds 3 calls, its capture report: 2 modules hooked, 5 calls"),
    (_steps(1, 2, 4), {"errors": [], "modules_hooked": 2, "calls": 3}, "cand",
     "recorded calls at step(s) 4, which it was not asked for (1, 2, 3)"),
    (_steps(1, 3), {"errors": [], "modules_hooked": 2, "calls": 2}, "b0",
     "b0's level-1 capture of the DiT at steps 1..3 recorded no call at step(s) 2"),
])
def test_a_capture_that_does_not_show_what_it_saw_backs_nothing(
        tmp_path: Path, calls: list[Call], report: dict[str, Any], arm: str, said: str) -> None:
    folder = _capture(tmp_path / "a", calls, report)
    with pytest.raises(NotSeen) as refused:
        captured(folder, arm, 1, DIT)
    assert said in str(refused.value)


def test_a_candidate_capture_may_miss_a_step_the_parting_then_judges(tmp_path: Path) -> None:
    # Only B0's capture must cover every step: the candidate's gaps are for the parting to see.
    folder = _capture(tmp_path / "a", _steps(1, 3), {"errors": [], "modules_hooked": 2,
                                                     "calls": 2})
    assert len(captured(folder, "cand", 1, DIT)) == 2


def test_a_missing_or_failing_report_is_an_error_of_the_request(tmp_path: Path) -> None:
    with pytest.raises(LocalizeError, match=r"no capture report in its enabled_path\.json"):
        captured(_capture(tmp_path / "a", [], None), "cand", 2, DIT, "dit.blocks.0")
    failing = _capture(tmp_path / "b", [], {"errors": ["dit.blocks.0: OSError: disk full"],
                                            "modules_hooked": 3, "calls": 0})
    with pytest.raises(LocalizeError, match=r"capture failed in the engine: dit\.blocks\.0: "
                                            "OSError"):
        captured(failing, "cand", 2, DIT, "dit.blocks.0")


# -- B0's calls the candidate's capture does not cover ------------------------------------------

B0_STEPS = [_call(0, "a", 1), _call(1, "b", 1), _call(2, "c", 1),
            _call(3, "a", 2), _call(4, "b", 2), _call(5, "c", 2)]


@pytest.mark.parametrize(("kept", "kind", "unseen"), [
    ([0, 2, 3, 4, 5], "not_run", ""),  # b skipped at step 1, c after it: not run
    ([0, 1, 2, 3], "uncovered", "recorded none of B0's later calls"),  # stopped early
    ([0, 1, 2], "uncovered", "its last call is c at step 1"),  # nothing of step 2
    ([0, 1, 2, 5], "not_run", ""),  # a and b not run at step 2, c after them
    ([3, 4, 5], "uncovered", "recorded no call at step 1"),  # a whole step unseen
    ([], "uncovered", "recorded no call at all"),
])
def test_calls_b0_made_are_not_run_only_where_the_candidate_capture_is_seen_around_them(
        kept: list[int], kind: str, unseen: str) -> None:
    found = divergence(B0_STEPS, [B0_STEPS[i] for i in kept])
    assert found.kind == kind, found.sentence()
    assert unseen in found.sentence()
    if kind == "uncovered":
        assert "not run" not in found.where() and "cannot be told" in found.sentence()


# -- level 2 against level 1 ----------------------------------------------------------------------

def _block(step: int | None, made: str, given: str = "i") -> Call:
    return _call(9, "dit.blocks.1" if step is not None else "text_encoder.layers.1", step,
                 given, made)


def test_level_two_reproduces_only_when_the_block_parts_again() -> None:
    b0_block, cand_block = _block(2, "x"), _block(2, "y")
    first = divergence([b0_block], [cand_block])
    assert first.kind == "differs"
    inside_b0 = [_call(0, "dit.blocks.1.fc2", 2, made="p"), b0_block]
    inside_cand = [_call(0, "dit.blocks.1.fc2", 2, made="q"), cand_block]
    assert not_reproduced(first, divergence(inside_b0, inside_cand), inside_b0, inside_cand,
                          "cand") == ""
    # a module inside differs, yet the block's own output is equal this time
    equal = [inside_cand[0], b0_block]
    assert not_reproduced(first, divergence(inside_b0, equal), inside_b0, equal, "cand") == \
        "found dit.blocks.1's outputs equal in both runs"
    no_block = [_call(0, "dit.blocks.1.fc2", 2, made="q")]
    assert not_reproduced(first, divergence(inside_b0, no_block), inside_b0, no_block, "cand") == \
        "recorded no call of dit.blocks.1 at this step in cand's capture"
    assert not_reproduced(first, divergence(inside_b0, inside_b0), inside_b0, inside_b0, "cand") \
        == "found every hooked module's output equal in both runs"


def test_inputs_that_differ_at_an_encoders_first_hooked_module_name_nothing() -> None:
    # audio_encoder.layers.0 follows the text encoder's last layer, equal: its differing inputs
    # were prepared outside anything hooked (the reference audio as the pipeline reads it).
    b0 = [_call(0, "text_encoder.layers.1", None), _call(1, "audio_encoder.layers.0", None)]
    cand = [b0[0], _call(1, "audio_encoder.layers.0", None, given="j", made="p")]
    first = divergence(b0, cand)
    assert first.kind == "inputs_differ" and at_stage_start(first, ENCODERS)
    inside = [_call(0, "audio_encoder.layers.0.fc1", None, given="i")]
    second = divergence(inside, [_call(0, "audio_encoder.layers.0.fc1", None, given="j",
                                    made="p")])
    found = name_inside(first, second, ENCODERS, [])
    assert not found.found and found.where == "before audio_encoder.layers.0 (not seen)"
    assert ("audio_encoder.layers.0's inputs already differ at the first module the pass hooked "
            "in audio_encoder") in found.sentence
    assert "the request's inputs as the pipeline prepares them for audio_encoder" in \
        found.sentence
    # Within one encoder, after its own equal layer: code between them, named.
    later = [_call(0, "text_encoder.layers.0", None), _call(1, "text_encoder.layers.1", None)]
    fed = divergence(later, [later[0], _call(1, "text_encoder.layers.1", None, "j", "p")])
    assert not at_stage_start(fed, ENCODERS)
    inside_fed = divergence([_call(0, "text_encoder.layers.1.fc1", None)],
                         [_call(0, "text_encoder.layers.1.fc1", None, "j", "p")])
    named = name_inside(fed, inside_fed, ENCODERS, [])
    assert named.found and named.where == ("code between text_encoder.layers.0 and "
                                           "text_encoder.layers.1.fc1")


def test_inputs_that_differ_after_the_first_step_captured_are_code_between_modules() -> None:
    # Step 1 all equal, step 2's block fed: the code after step 1's last module, named.
    b0 = [_call(0, "dit.blocks.0", 1), _call(1, "dit.blocks.1", 1),
          _call(2, "dit.blocks.0", 2), _call(3, "dit.blocks.1", 2)]
    cand = [*b0[:3], _call(3, "dit.blocks.1", 2, given="j", made="p")]
    first = divergence(b0, cand)
    assert first.kind == "inputs_differ" and not at_stage_start(first, DIT)
    second = divergence([_call(0, "dit.blocks.1.qkv", 2)],
                     [_call(0, "dit.blocks.1.qkv", 2, given="j", made="p")])
    found = name_inside(first, second, DIT, ["dit.step000"])
    assert found.found and found.where == "code between dit.blocks.0 and dit.blocks.1.qkv"


def test_every_block_equal_is_code_after_them_in_the_dit_and_nothing_named_in_the_encoders(
        ) -> None:
    dit = [_call(0, "dit.blocks.0", 1), _call(1, "dit.blocks.0", 2), _call(2, "dit.blocks.0", 3)]
    found = name_level_one(divergence(dit, dit), "dit.step003", DIT)
    assert found.found and found.where == "code after every hooked module"
    # cond.image differs while the text encoder's layers, the only calls hooked, all agree: the
    # image side's modules may never have been seen (a VAE called through its methods).
    encoders = [_call(0, "text_encoder.layers.0", None), _call(1, "text_encoder.layers.1", None)]
    unseen = name_level_one(divergence(encoders, encoders), "cond.image", ENCODERS)
    assert not unseen.found and unseen.where == "" and unseen.module is None
    assert ("every hooked encoder module's output is equal in both runs, yet cond.image differs"
            in unseen.sentence and "no place is named" in unseen.sentence)
