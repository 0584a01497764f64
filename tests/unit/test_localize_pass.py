"""The localization pass's runner against stand-in arms that write the captures an engine would:
which instances it starts and in what order, B0's captures reused by a second candidate, and a
pass that cannot finish (a request that fails, a divergence that does not reproduce, too little
disk) ending in one open check with its reason, every instance stopped. Then every absence the
pass must not read as a place (a capture whose hooks never fired, a candidate's capture that
stopped early or missed a step, a level 2 that does not reproduce level 1, inputs that already
differ where the pass begins to see), planted and seen open, by status and by sentence."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from ref2va_accept.arms import Outcome
from ref2va_accept.evidence import LocalizedFigures
from ref2va_accept.judging.localize import Localization
from ref2va_accept.judging.localize import _runner as runner
from ref2va_accept.judging.localize._runner import LocalizationPass
from ref2va_accept.tensors import write_tensor_file
from ref2va_contract.diagnostics import (
    CAPTURE_STOP_KEY,
    CAPTURE_STOPPED_MARKER,
    CAPTURE_STOPPED_STATUS,
)
from tests.unit.timed_samples import timed_sample

pytestmark = pytest.mark.fast

POINT = "dit.step002"  # the candidate breaks at step 2 by default
BLOCKS = ["dit.blocks.0", "dit.blocks.1", "dit.blocks.2"]
INSIDE = ["dit.blocks.1.qkv", "dit.blocks.1.fc2", "dit.blocks.1"]


class StandInArms:
    """Arms as the pass uses it; each request writes the capture the engine would, B0's values
    everywhere except the candidate's `broken` module (and everything after it)."""

    def __init__(self, folder: Path, broken: str = "dit.blocks.1.fc2",
                 fail: tuple[str, int] | None = None, same_point: bool = False,
                 hook_error: bool = False, fed: str | None = None, broken_step: int = 2,
                 missing_point: bool = False, silent: tuple[str, int] | None = None,
                 unhooked: tuple[str, int] | None = None, unreported: bool = False,
                 kept: int | None = None, skips_step: int | None = None,
                 not_run: tuple[str, ...] = (), inside_equal: bool = False,
                 fed_outside: bool = False, stops: bool = True,
                 stop: dict[str, Any] | None = None) -> None:
        self.folder, self.broken, self.fail, self.same_point = folder, broken, fail, same_point
        self.hook_error, self.fed, self.broken_step = hook_error, fed, broken_step
        self.captures: list[dict[str, Any]] = []  # every capture asked, in order
        self.missing_point = missing_point
        # Absences planted in a capture: (arm, level) whose hooks never fire (silent) or that
        # hooked nothing (unhooked); a report without its figures (unreported); the candidate's
        # level-1 capture stopping after `kept` calls, or recording nothing at `skips_step`;
        # blocks the candidate does not run at its broken step (not_run); its level 2 finding
        # every module inside the block equal (inside_equal).
        self.silent, self.unhooked, self.unreported = silent, unhooked, unreported
        self.kept, self.skips_step, self.not_run = kept, skips_step, not_run
        self.inside_equal = inside_equal
        # fed_outside: `fed` feeds the block at level 1 only, as a block's own modulation called
        # outside its forward does (level 2, hooking inside the block, sees that module break)
        self.fed_outside = fed_outside
        # stops: the engine stops a request that asks it once its capture is written (else it
        # runs through and answers the MP4); stop: an answer planted on the candidate's level-1
        # request instead ({"status", "marker", "stopped" (the report's entry, "absent" for
        # none), "points" (False: none written)}).
        self.stops, self.stop = stops, stop
        self.plan = SimpleNamespace(track_id="5s-lossless", seeds=(42,))
        self.log: list[str] = []  # "start ARM", "request ARM LEVEL", "stop ARM"
        self.evidence = SimpleNamespace(folder=folder, relative=lambda p: p.name,
                                        add_check=lambda c: None)
        self.registry = SimpleNamespace(stop=lambda e: self.log.append(f"stop {e}"))
        self.count = 0

    def start(self, arm: str) -> str:
        self.log.append(f"start {arm}")
        return arm

    def request(self, engine: str, arm: str, *, kind: str, index: int, seed: int,
                diagnostics_points: tuple[str, ...], capture: dict[str, Any]) -> Outcome:
        self.log.append(f"request {arm} {index}")
        self.count += 1
        folder = self.folder / f"{arm}-{index}-{self.count}"
        folder.mkdir(parents=True)
        ok = self.fail != (arm, index)
        sample = timed_sample(
            "s", arm, "5s-lossless", kind, index, seed, ok=ok,
            failure=None if ok else "connection_lost",
            detail=None if ok else "engine exited with SIGKILL during the request")
        if not ok:
            return Outcome(sample, None, (), None, folder)
        candidate = arm != "b0"
        planted = self.stop if (arm, index) == ("cand", 1) else None
        stopped: Any = None
        if capture.get(CAPTURE_STOP_KEY) and (self.stops or planted):
            answer = {"status": CAPTURE_STOPPED_STATUS, "marker": True, **(planted or {})}
            marker = f"{CAPTURE_STOPPED_MARKER}: the capture is written" if answer["marker"] \
                else "Cancellation in progress"
            sample = sample.model_copy(update={
                "ok": False, "failure": "http_status", "status": answer["status"],
                "detail": f'HTTP {answer["status"]}: {{"error": {{"message": "{marker}"}}}}'})
            stopped = answer.get("stopped", {"stage": capture["stage"],
                                             "step": capture["step"]})
        point = np.zeros(8, np.float32) + (1.0 if candidate and not self.same_point else 0.0)
        for name in diagnostics_points:
            if not (self.missing_point and candidate) and (planted or {}).get("points", True):
                write_tensor_file(folder / f"{name}.safetensors", {name: point})
        self.captures.append(dict(capture))
        modules = INSIDE if capture["within"] else BLOCKS
        lines, diverged = [], False
        last = capture["step"]
        inside_equal = self.inside_equal and capture["within"] is not None
        for step in range(capture.get("first_step", last), last + 1):
            # the candidate breaks at broken_step; every step after it is fed the divergence
            breaks = candidate and step >= self.broken_step and not inside_equal
            if candidate and step == self.skips_step and not capture["within"]:
                continue
            for module in modules:
                if candidate and step == self.broken_step and module in self.not_run:
                    continue
                i = len(lines)
                # fed: the candidate's code before this module (no module of its own) diverged
                fed = self.fed is not None and not (self.fed_outside and capture["within"])
                diverged = diverged or (breaks and fed and (
                    module == self.fed or module.startswith(f"{self.fed}.")))
                given = "d" if diverged else "s"
                diverged = diverged or (breaks and (module == self.broken
                                                    or self.broken.startswith(module + ".")))
                made = f"{module}-{'d' if diverged else 's'}"
                out = {"shape": [4, 2], "dtype": "F32", "sha256": made}
                if capture["tensors"]:
                    value = np.zeros((4, 2), np.float32)
                    value[1, 1] = 1.0 if made.endswith("-d") else 0.0
                    write_tensor_file(folder / f"t{i}.safetensors", {"out0": value})
                    out["file"] = f"t{i}.safetensors"
                lines.append(json.dumps({"index": i, "step": step, "module": module, "call": 0,
                                         "outputs": [out], "inputs": [
                                             {"shape": [4, 2], "dtype": "F32", "sha256": given}]}))
        if candidate and self.kept is not None and not capture["within"]:
            lines = lines[:self.kept]
        hooked = len(modules)
        if (arm, index) in (self.silent, self.unhooked):
            lines = []  # the engine writes an empty log when no hook fires
            hooked = 0 if (arm, index) == self.unhooked else hooked
        (folder / "capture.jsonl").write_text("".join(f"{line}\n" for line in lines))
        errors = ["dit.blocks.1: RuntimeError: device copy failed"] if self.hook_error else []
        report: dict[str, Any] = {"errors": errors}
        if not self.unreported:
            report.update(modules_hooked=hooked, calls=len(lines))
        if stopped != "absent":
            report["stopped"] = stopped
        (folder / "enabled_path.json").write_text(json.dumps({"capture": report}))
        return Outcome(sample, None if sample.failure else {"video": {}}, (), None, folder)


def test_the_pass_starts_b0_then_the_candidate_then_b0_and_names_the_module(
        tmp_path: Path) -> None:
    arms = StandInArms(tmp_path)
    found = LocalizationPass(arms, "cand", POINT, 42).run()  # type: ignore[arg-type]
    assert found.found and found.module == "dit.blocks.1.fc2" and found.inputs_equal
    assert arms.log == ["start b0", "request b0 1", "stop b0", "start cand", "request cand 1",
                        "request cand 2", "stop cand", "start b0", "request b0 2", "stop b0"]
    assert isinstance(found.figures, LocalizedFigures) and found.figures.differing == 1
    assert found.figures.first_index == [1, 1]
    assert found.picture is not None and found.picture.differing == 1
    check = found.check()
    assert check.status == "pass" and "dit.blocks.1.fc2" in check.detail


def test_every_request_asks_to_stop_once_its_capture_is_written_and_is_read_whole(
        tmp_path: Path) -> None:
    arms = StandInArms(tmp_path)
    found = LocalizationPass(arms, "cand", POINT, 42).run()  # type: ignore[arg-type]
    assert found.check().status == "pass" and found.module == "dit.blocks.1.fc2"
    assert [c[CAPTURE_STOP_KEY] for c in arms.captures] == [True] * 4
    assert [(r.ok, r.stopped) for r in found.requests] == [(False, True)] * 4
    # An engine that runs the requests through (answering the MP4) backs the same place.
    through = StandInArms(tmp_path / "through", stops=False)
    again = LocalizationPass(through, "cand", POINT, 42).run()  # type: ignore[arg-type]
    assert again.module == found.module and again.where == found.where
    assert [(r.ok, r.stopped) for r in again.requests] == [(True, False)] * 4


@pytest.mark.parametrize(("answer", "said"), [
    ({"stopped": {"stage": "dit", "step": 1}}, "cand's level-1 request was stopped before its "
     "capture of the DiT at steps 0..2 was whole: its capture report says it stopped at "
     "{'stage': 'dit', 'step': 1}"),
    ({"stopped": None}, "was stopped before its capture of the DiT at steps 0..2 was whole: its "
     "capture report says it stopped at None"),
    ({"stopped": "absent"}, "cand's level-1 request was answered as stopped, but its "
     "enabled_path.json does not say where it stopped"),
    ({"points": False}, "cand's level-1 request was stopped with dit.step000, dit.step001, "
     "dit.step002 not written"),
    ({"marker": False}, "cand's level-1 request failed: "),
    ({"status": 500}, "cand's level-1 request failed: "),
])
def test_a_request_cut_before_its_capture_is_whole_is_a_failure_not_a_stop(
        tmp_path: Path, answer: dict[str, Any], said: str) -> None:
    arms = StandInArms(tmp_path, stop=answer)
    found = LocalizationPass(arms, "cand", POINT, 42).run()  # type: ignore[arg-type]
    _open(found, said, "the pass could not finish")
    assert found.module is None and found.level1 is None
    assert arms.log.count("start cand") == arms.log.count("stop cand") == 1


def test_points_that_skip_steps_widen_level_one_and_level_two_looks_at_the_step_found(
        tmp_path: Path) -> None:
    # The frozen points are dit.step000 (equal) and dit.step005 (differs); the candidate broke at
    # step 3: level 1 captures steps 1..5, level 2 step 3 alone.
    arms = StandInArms(tmp_path, broken_step=3)
    point = "dit.step005"
    found = LocalizationPass(arms, "cand", point, 42,  # type: ignore[arg-type]
                 equal_points=["cond.text", "dit.step000"]).run()
    level1 = [c for c in arms.captures if c["within"] is None]
    assert {(c["first_step"], c["step"]) for c in level1} == {(1, 5)}
    level2 = [c for c in arms.captures if c["within"] is not None]
    assert {(c.get("first_step"), c["step"]) for c in level2} == {(None, 3)}
    assert found.module == "dit.blocks.1.fc2" and found.target is not None
    assert found.target.step == 3 and found.record().point_step == 5
    assert "(step 3)" in found.check().detail or found.check().json_dict()["data"]["step"] == 3


def test_a_second_candidate_failing_at_the_same_point_reuses_b0s_captures(
        tmp_path: Path) -> None:
    shared: dict[tuple[Any, ...], Outcome] = {}
    first = StandInArms(tmp_path / "one")
    LocalizationPass(first, "cand", POINT, 42, b0_captures=shared).run()  # type: ignore[arg-type]
    second = StandInArms(tmp_path / "two")
    found = LocalizationPass(second, "other", POINT, 42, b0_captures=shared).run()  # type: ignore[arg-type]
    assert found.module == "dit.blocks.1.fc2"
    assert [e for e in second.log if e.startswith("start")] == ["start other"]


@pytest.mark.parametrize(("fail", "said"), [
    (("b0", 1), "b0's level-1 request failed"),
    (("cand", 2), "cand's level-2 request failed"),
])
def test_a_request_that_fails_leaves_the_check_open_with_every_instance_stopped(
        tmp_path: Path, fail: tuple[str, int], said: str) -> None:
    arms = StandInArms(tmp_path, fail=fail)
    found = LocalizationPass(arms, "cand", POINT, 42).run()  # type: ignore[arg-type]
    check = found.check()
    assert check.status == "open" and said in check.detail and "SIGKILL" in check.detail
    starts = [e for e in arms.log if e.startswith("start")]
    assert len(starts) == len([e for e in arms.log if e.startswith("stop")])


def test_a_capture_whose_hooks_failed_in_the_engine_is_not_read_as_modules_not_run(
        tmp_path: Path) -> None:
    found = LocalizationPass(StandInArms(tmp_path, hook_error=True), "cand", POINT, 42).run()  # type: ignore[arg-type]
    assert not found.found and "capture failed in the engine" in found.sentence
    assert "device copy failed" in found.sentence


def test_a_block_fed_by_code_outside_any_module_is_named_as_that_code(tmp_path: Path) -> None:
    arms = StandInArms(tmp_path, broken="nothing", fed="dit.blocks.1")
    found = LocalizationPass(arms, "cand", POINT, 42).run()  # type: ignore[arg-type]
    assert found.found and found.module is None
    assert found.where == "code between dit.blocks.0 and dit.blocks.1.qkv"
    assert "outside any hooked module" in found.sentence and found.inputs_equal is False


def test_blocks_all_equal_at_a_differing_point_say_the_code_after_them(tmp_path: Path) -> None:
    arms = StandInArms(tmp_path, broken="nothing")
    found = LocalizationPass(arms, "cand", POINT, 42).run()  # type: ignore[arg-type]
    assert found.found and found.module is None and found.level2 is None
    assert found.where == "code after every hooked module"
    assert "code after the blocks" in found.sentence
    assert "request cand 2" not in arms.log


def test_a_point_the_candidate_did_not_write_again_is_not_read_as_a_divergence(
        tmp_path: Path) -> None:
    # A request run through without it, and one stopped without it (its evidence not whole).
    found = LocalizationPass(StandInArms(tmp_path, missing_point=True, stops=False), "cand", POINT,  # type: ignore[arg-type]
                 42).run()
    assert not found.found and f"{POINT} was not written by cand's" in found.sentence
    stopped = LocalizationPass(StandInArms(tmp_path / "s", missing_point=True),  # type: ignore[arg-type]
                               "cand", POINT, 42).run()
    assert not stopped.found and "cand's level-1 request was stopped with dit.step000, " \
        f"dit.step001, {POINT} not written" in stopped.sentence


def test_a_divergence_that_does_not_reproduce_is_said_so(tmp_path: Path) -> None:
    found = LocalizationPass(StandInArms(tmp_path, same_point=True), "cand", POINT, 42).run()  # type: ignore[arg-type]
    assert not found.found and "did not reproduce" in found.sentence


def test_too_little_disk_for_level_two_is_said_before_it_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner.shutil, "disk_usage", lambda p: SimpleNamespace(free=10))
    arms = StandInArms(tmp_path)
    found = LocalizationPass(arms, "cand", POINT, 42).run()  # type: ignore[arg-type]
    assert not found.found and "not enough disk for level 2 inside dit.blocks.1" in found.sentence
    assert "request cand 2" not in arms.log


def test_an_internal_error_of_the_pass_is_an_open_check_not_a_lost_verdict(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> Any:
        raise ValueError("a defect")

    monkeypatch.setattr(runner, "divergence", broken)
    arms = StandInArms(tmp_path)
    found = LocalizationPass(arms, "cand", POINT, 42).run()  # type: ignore[arg-type]
    assert found.check().status == "open" and "internal error: ValueError: a defect" in \
        found.sentence
    assert arms.log.count("start cand") == 1 and arms.log[-1] == "stop cand"


def test_a_point_after_the_dit_runs_no_request(tmp_path: Path) -> None:
    arms = StandInArms(tmp_path)
    found = LocalizationPass(arms, "cand", "decoded.video", 42).run()  # type: ignore[arg-type]
    assert not found.found and arms.log == [] and "decoded.video" in found.sentence


# -- absences planted: never a place, always open with what was not seen ----------------------

def _open(found: Localization, *said: str) -> str:
    check = found.check()
    assert check.status == "open" and not found.found, check.detail
    for words in said:
        assert words in found.sentence, found.sentence
    return found.sentence


@pytest.mark.parametrize(("planted", "said"), [
    ({"silent": ("cand", 1)}, "cand's level-1 capture of the DiT at steps 0..2 recorded no call "
                              "(its capture report: 3 modules hooked, 0 calls: hooks that never "
                              "fired)"),
    ({"unhooked": ("cand", 1)}, "cand's level-1 capture of the DiT at steps 0..2 hooked no module "
                                "(its capture report: 0 modules hooked, 0 calls)"),
    ({"silent": ("b0", 1)}, "b0's level-1 capture of the DiT at steps 0..2 recorded no call"),
    ({"unreported": True}, "b0's level-1 capture of the DiT at steps 0..2: its capture report "
                           "does not say modules_hooked or calls"),
])
def test_a_capture_that_recorded_nothing_is_open_naming_the_arm_and_its_report(
        tmp_path: Path, planted: dict[str, Any], said: str) -> None:
    arms = StandInArms(tmp_path, **planted)
    found = LocalizationPass(arms, "cand", POINT, 42).run()  # type: ignore[arg-type]
    sentence = _open(found, said, "no place is named from what was not captured")
    assert "not run" not in sentence and "code after" not in found.where
    assert found.level1 is None and found.module is None
    if planted.get("silent") == ("b0", 1) or planted.get("unreported"):
        assert "start cand" not in arms.log  # B0 saw nothing: the candidate is not started
    assert arms.log.count("start cand") == arms.log.count("stop cand")


def test_hooks_that_never_fire_in_both_arms_are_open_not_code_after_every_module(
        tmp_path: Path) -> None:
    # Both arms' engines hook and record nothing: the pass stops at B0's, the first it reads.
    arms = StandInArms(tmp_path, broken="nothing", silent=("b0", 1))
    _open(LocalizationPass(arms, "cand", POINT, 42).run(), "b0's level-1 capture")  # type: ignore[arg-type]


def test_a_candidate_capture_that_stopped_early_is_open_not_blocks_not_run(
        tmp_path: Path) -> None:
    # Its capture ends after step 1's first call: B0's later calls are not "not run".
    found = LocalizationPass(StandInArms(tmp_path, kept=4), "cand", POINT, 42).run()  # type: ignore[arg-type]
    _open(found, "B0 ran dit.blocks.1 .. dit.blocks.2 (5 calls) (after dit.blocks.0); the "
                 "candidate's capture has no call of them and recorded none of B0's later "
                 "calls (its last call is dit.blocks.0 at step 1: it may have stopped early)",
          "no place is named from calls one arm did not capture")
    assert found.level1 is not None and found.level1.kind == "uncovered"
    assert found.where == "dit.blocks.1 .. dit.blocks.2 not in the candidate's capture"


def test_a_step_the_candidates_capture_recorded_nothing_at_is_open(tmp_path: Path) -> None:
    found = LocalizationPass(StandInArms(tmp_path, skips_step=1), "cand", POINT, 42).run()  # type: ignore[arg-type]
    _open(found, "B0 ran dit.blocks.0 .. dit.blocks.2 (3 calls) (after dit.blocks.2)",
          "recorded no call at step 1 (its hooks may not have fired there)")


def test_blocks_the_candidate_skipped_between_calls_it_made_are_named_not_run(
        tmp_path: Path) -> None:
    arms = StandInArms(tmp_path, broken="nothing", not_run=("dit.blocks.1",))
    found = LocalizationPass(arms, "cand", POINT, 42).run()  # type: ignore[arg-type]
    assert found.check().status == "pass" and found.where == "dit.blocks.1 not run"
    assert found.module == "dit.blocks.1" and "ran in B0 but not in the candidate" in \
        found.sentence and "request cand 2" not in arms.log
    # The same blocks skipped at the end of what the capture spans: nothing after them shows
    # the capture was still live, so they are not named.
    late = StandInArms(tmp_path / "late", broken="nothing",
                       not_run=("dit.blocks.1", "dit.blocks.2"))
    _open(LocalizationPass(late, "cand", POINT, 42).run(), "recorded none of B0's later calls")  # type: ignore[arg-type]


@pytest.mark.parametrize(("planted", "said"), [
    ({"inside_equal": True}, "level 2, hooking inside dit.blocks.1, found every hooked module's "
                             "output equal in both runs"),
    ({"silent": ("cand", 2)}, "level 2 could not look inside it: cand's level-2 capture inside "
                              "dit.blocks.1 recorded no call (its capture report: 3 modules "
                              "hooked, 0 calls: hooks that never fired)"),
    ({"silent": ("b0", 2)}, "level 2 could not look inside it: b0's level-2 capture inside "
                            "dit.blocks.1 recorded no call"),
])
def test_a_level_two_that_does_not_reproduce_level_one_is_open_naming_level_one(
        tmp_path: Path, planted: dict[str, Any], said: str) -> None:
    arms = StandInArms(tmp_path, **planted)
    found = LocalizationPass(arms, "cand", POINT, 42).run()  # type: ignore[arg-type]
    _open(found, "not reproduced: level 1 found dit.blocks.1: inputs equal, output 0 "
                 "(F32[4, 2]) differs at step 2", said, "no place is named")
    assert found.where == "dit.blocks.1 (not reproduced)" and found.module is None
    assert "every hooked module's output is equal" not in found.check().detail
    if planted.get("silent") == ("cand", 2):  # nothing to compare B0's with: B0 not restarted
        assert arms.log.count("start b0") == 1


@pytest.mark.parametrize(("equal", "first_step", "unseen"), [
    ([], 0, "in the encoders (no cond.* point compared) or the pipeline's code before "
            "dit.blocks.1 at step 0"),
    (["cond.text", "dit.step000"], 1,
     "in the encoders (cond.text equal at the gate; whatever else they hand the DiT not "
     "compared), step 0, which level 1 did not capture (the gate found dit.step000 equal), or "
     "the pipeline's code before dit.blocks.1 at step 1"),
])
def test_inputs_that_already_differ_where_the_pass_begins_to_see_are_open_naming_the_range(
        tmp_path: Path, equal: list[str], first_step: int, unseen: str) -> None:
    # The candidate's block is fed the divergence at the first step level 1 captures: it may
    # come from the encoders or the steps before, which the pass did not see.
    arms = StandInArms(tmp_path, broken="nothing", fed="dit.blocks.1", broken_step=first_step)
    found = LocalizationPass(arms, "cand", POINT, 42, equal_points=equal).run()  # type: ignore[arg-type]
    _open(found, f"dit.blocks.1's inputs already differ at step {first_step}, the first step "
                 "level 1 captured", unseen, "no place is named")
    assert found.where == "before dit.blocks.1 (not seen)" and "code between" not in found.where
    assert found.inputs_equal is False and found.figures is not None  # what was seen is kept


def test_a_module_that_breaks_inside_a_block_fed_at_the_first_step_is_still_named(
        tmp_path: Path) -> None:
    # A block's modulation, called outside its forward, feeds it at the first step captured:
    # level 2 sees the module compute differently on equal inputs, a place in both arms' calls.
    arms = StandInArms(tmp_path, fed="dit.blocks.1", fed_outside=True, broken_step=0)
    found = LocalizationPass(arms, "cand", POINT, 42).run()  # type: ignore[arg-type]
    assert found.level1 is not None and found.level1.kind == "inputs_differ"
    assert found.check().status == "pass" and found.module == "dit.blocks.1.fc2"
    assert found.inputs_equal is True


def _failed_gate(reason: Any, point: str | None) -> Any:
    from ref2va_accept.core import Check
    from tests.unit.check_records import make_check

    status = "fail" if reason is not None else "pass"
    return make_check("5s-lossless", "cand", Check.LOSSLESS_GATE, status, reason, "x",
                      {"seed": 42, "points": [], "first_divergence": point})


@pytest.mark.parametrize(("enabled", "reason", "runs"), [
    (True, "quality_gate_failed", True),
    (False, "quality_gate_failed", False),  # pytest --no-localize
    (True, "comparison_point_missing", False),  # nothing to compare: nothing to localize
    (True, None, False),  # bit-exact: no pass
])
def test_the_hosted_gate_runs_the_pass_once_its_instance_is_stopped(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, enabled: bool, reason: Any,
        runs: bool) -> None:
    import ref2va_accept.judging.localize as localize_package
    from ref2va_accept.core import Reason
    from ref2va_accept.judging import Baselines
    from ref2va_accept.judging import _lossless as lossless

    called: list[tuple[str, str, int]] = []
    monkeypatch.setattr(localize_package, "localize",
                        lambda arms, cand, point, seed, dumps, b0, equal: called.append(
                            (cand, point, seed)) or "check")
    baselines = Baselines()
    baselines.localize = enabled
    gate_runner = lossless.LosslessGateRunner(baselines)
    watched = Outcome(timed_sample("s", "cand", "5s-lossless", "quality", 0, 42, ok=True),
                      {}, (), None, tmp_path / "c")
    made = SimpleNamespace(watched=Outcome(watched.sample, {}, (), None, tmp_path / "b"))
    monkeypatch.setattr(gate_runner, "made", lambda arms: made)
    hosted = lossless.HostedGate(gate_runner, "cand")
    hosted.watched = watched
    run = SimpleNamespace(gate=[_failed_gate(Reason(reason) if reason else None,
                                             "dit.step002" if reason else None)])
    found = hosted.settle(SimpleNamespace(), run)  # type: ignore[arg-type]
    assert (found == ["check"]) is runs
    assert called == ([("cand", "dit.step002", 42)] if runs else [])
