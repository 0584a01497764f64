"""What the localization pass may name from its captures: a place only from calls captured in
both arms, else ``open`` with what was not seen.

- **A capture backs nothing the engine did not report capturing.** Its ``enabled_path.json``
  ``capture`` entry must say how many modules it hooked and calls it recorded, both above zero,
  with no hook failing; its ``capture.jsonl`` must hold exactly those calls, each at a step it
  was asked for; B0's must hold calls at every one of those steps (:func:`captured`). A capture
  whose hooks never fired (a real server whose model calls its modules through methods, say)
  is :class:`NotSeen`, naming the arm and what its report said, never "not run" or "equal".
- **A request the engine stopped is whole only as the contract says** (:func:`stopped_whole`):
  the pass asks every request to stop once its capture is written (the rest of the denoise
  cannot change it); an answer counts as stopped on purpose only with the contract's status, its
  marker, and a capture report saying it stopped where the capture ends, with every point the
  request asked for on disk. A request cut anywhere else, or answered otherwise, failed.
- **Level 2 reproduces level 1** or names nothing: the block level 1 named must differ again
  in level 2's capture, and some module inside it must part (:func:`not_reproduced`).
- **Inputs that already differ at the first module the pass hooked in a stage** (at the first
  step level 1 captured, or an encoder's first hooked module) came from before anything it saw:
  the encoders, the steps the frozen points skip, the pipeline's code before that module, or for
  the encoders the inputs as the pipeline prepares them. The pass does not go one stage back
  (that would take two more starts and up to four more requests, at a request's price each, for
  encoder outputs the gate's ``cond.*`` points already compared): it stays ``open``, naming that
  range (:func:`name_inside`), and denser frozen points narrow it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ref2va_accept.core import ArmRole, LocalizeError
from ref2va_accept.judging.localize._capture import Call, Divergence, differing_output, read_log
from ref2va_accept.judging.localize._result import Target
from ref2va_accept.tensors import dit_step, point_file
from ref2va_contract.diagnostics import (
    CAPTURE_DIT,
    CAPTURE_LOG_FILE,
    CAPTURE_REPORT_KEY,
    CAPTURE_STAGE_KEY,
    CAPTURE_STEP_KEY,
    CAPTURE_STOPPED_KEY,
    ENABLED_PATH_FILE,
)


class CaptureReport(BaseModel):
    """The engine's own report of a capture (its enabled_path.json's ``capture``, written by
    engine.module_capture): what it hooked and recorded, and any hook that failed."""

    model_config = ConfigDict(extra="allow")

    errors: list[Any] = []
    modules_hooked: int | None = None
    calls: int | None = None


class NotSeen(LocalizeError):
    """A capture that cannot back a place: its message names the arm, the level and what the
    engine reported."""


def _steps(steps: list[int | None]) -> str:
    return ", ".join("the encoders" if s is None else str(s) for s in steps)


def captured(folder: Path, arm: str, level: int, target: Target, within: str | None = None
             ) -> list[Call]:
    """The calls of one capture, once the engine's report and its log agree that it saw them
    (see the module doc); :class:`NotSeen` otherwise, LocalizeError for a report that is missing
    or names a failed hook."""
    try:
        report = json.loads((folder / ENABLED_PATH_FILE).read_text())
        said = CaptureReport.model_validate(report[CAPTURE_REPORT_KEY])
    except (OSError, ValueError, KeyError, TypeError):  # a ValidationError is a ValueError
        raise LocalizeError(f"{arm}'s level-{level} request: no capture report in its "
                            f"{ENABLED_PATH_FILE}") from None
    # A hook that failed leaves calls out of the log, which would read as modules not run.
    if said.errors:
        raise LocalizeError(f"{arm}'s level-{level} capture failed in the engine: "
                            + "; ".join(map(str, said.errors[:3])))
    who = (f"{arm}'s level-{level} capture "
           + (f"inside {within}" if within else f"of {target.describe()}"))
    if said.modules_hooked is None or said.calls is None:
        absent = [k for k in ("modules_hooked", "calls") if getattr(said, k) is None]
        raise NotSeen(f"{who}: its capture report does not say {' or '.join(absent)}, so its "
                      "log cannot be known whole")
    figures = f"its capture report: {said.modules_hooked} modules hooked, {said.calls} calls"
    if said.modules_hooked <= 0:
        raise NotSeen(f"{who} hooked no module ({figures})")
    if said.calls <= 0:
        raise NotSeen(f"{who} recorded no call ({figures}: hooks that never fired)")
    calls = read_log(folder)
    if len(calls) != said.calls:
        raise NotSeen(f"{who}: its {CAPTURE_LOG_FILE} holds {len(calls)} calls, {figures}")
    asked = target.steps()
    outside = [s for s in dict.fromkeys(c.step for c in calls) if s not in asked]
    if outside:
        raise NotSeen(f"{who} recorded calls at step(s) {_steps(outside)}, which it was not "
                      f"asked for ({_steps(list(asked))}): its steps cannot be trusted")
    if arm == ArmRole.B0:
        # The reference side must cover every step, or a step neither arm recorded would pass
        # unseen between two that agree.
        seen = {c.step for c in calls}
        missing = [s for s in asked if s not in seen]
        if missing:
            raise NotSeen(f"{who} recorded no call at step(s) {_steps(missing)} ({figures}): "
                          "what ran there cannot be compared")
    return calls


def stopped_whole(folder: Path, arm: str, level: int, target: Target,
                  points: Sequence[str]) -> None:
    """Accept a request the engine answered as stopped only when its capture report says it
    stopped where the capture ends (after the target's last step; the encoders: before the
    denoise) and every point it asked for is on disk; LocalizeError naming what is missing."""
    who = f"{arm}'s level-{level} request"
    try:
        report = json.loads((folder / ENABLED_PATH_FILE).read_text())[CAPTURE_REPORT_KEY]
        said = report[CAPTURE_STOPPED_KEY]
    except (OSError, ValueError, KeyError, TypeError):
        raise LocalizeError(f"{who} was answered as stopped, but its {ENABLED_PATH_FILE} does "
                            "not say where it stopped: its capture cannot be known whole"
                            ) from None
    where = {CAPTURE_STAGE_KEY: target.stage,
             CAPTURE_STEP_KEY: target.step if target.stage == CAPTURE_DIT else None}
    if said != where:
        raise LocalizeError(f"{who} was stopped before its capture of {target.describe()} was "
                            f"whole: its capture report says it stopped at {said!r}")
    missing = [p for p in points if not point_file(folder, p).is_file()]
    if missing:
        raise LocalizeError(f"{who} was stopped with {', '.join(missing)} not written: its "
                            "evidence is not whole")


@dataclass(frozen=True)
class Finding:
    """What the check says: a place named (``found``), or why none is."""

    found: bool
    where: str
    module: str | None
    sentence: str


NAMES_MODULE = ("differs", "not_run", "only_in_candidate", "order")


def name_level_one(first: Divergence, point: str, target: Target) -> Finding:
    """Level 1's finding when level 2 does not run (no block differs, or B0's calls have no
    counterpart in the candidate's capture).

    Every block equal in the DiT, every step of the range captured in both arms, is a place: the
    step's code after its blocks. In the encoders it is not: a ``cond.*`` point that differs
    while every hooked encoder module agrees comes from an encoder whose modules the hooks did
    not see (a VAE called through its methods, say) as much as from code after them."""
    if first.kind == "uncovered":
        return Finding(False, first.where(), None,
                       f"{first.sentence()}; no place is named from calls one arm did not "
                       "capture")
    if first.kind == "none" and target.stage != CAPTURE_DIT:
        return Finding(False, "", None,
                       f"every hooked encoder module's output is equal in both runs, yet {point} "
                       "differs: the divergence is in encoder code the pass did not see (an "
                       "encoder's own code around its modules, or modules its hooks never saw "
                       "called); no place is named")
    if first.kind == "none":
        return Finding(True, first.where(), None,
                       f"every block's output at this step is equal in both runs, yet {point} "
                       "differs: the divergence is in code after the blocks (the final layer's "
                       "arithmetic, guidance, the step update), not in a module the pass hooks")
    return Finding(True, first.where(), first.module, first.sentence())


def not_reproduced(first: Divergence, second: Divergence, b0_two: list[Call],
                   cand_two: list[Call], candidate: str) -> str:
    """What level 2 saw instead of level 1's block parting again ("" when it did)."""
    if second.kind == "none":
        return "found every hooked module's output equal in both runs"
    assert first.b0 is not None
    label = first.b0.label
    ours = next((c for c in b0_two if c.key == first.b0.key), None)
    theirs = next((c for c in cand_two if c.key == first.b0.key), None)
    if ours is None or theirs is None:
        return (f"recorded no call of {label} at this step in "
                f"{ArmRole.B0 if ours is None else candidate}'s capture")
    if differing_output(ours, theirs) is None:
        return f"found {label}'s outputs equal in both runs"
    return ""


def at_stage_start(first: Divergence, target: Target) -> bool:
    """Whether level 1 parted at the first module the pass hooked in its stage, with inputs that
    already differ: at the first step level 1 captured (the DiT), or at an encoder's first
    hooked module (the encoders)."""
    if first.kind != "inputs_differ" or first.b0 is None:
        return False
    if target.stage == CAPTURE_DIT:
        return first.step == target.steps()[0]
    before = first.before
    return before is None or _root(before.module) != _root(first.b0.module)


def _root(module: str) -> str:
    return module.split(".", 1)[0]


def unseen_range(first: Divergence, target: Target, equal_points: list[str]) -> str:
    """What the pass could not see before the first module it hooked in its stage."""
    assert first.b0 is not None
    label = first.b0.label
    if target.stage != CAPTURE_DIT:
        return (f"the request's inputs as the pipeline prepares them for {_root(label)} "
                f"(tokenizing, decoding, resizing, resampling) or its code before {label}")
    conds = [p for p in equal_points if p.startswith("cond.")]
    seen = (f"{', '.join(conds)} equal at the gate; whatever else they hand the DiT not "
            "compared") if conds else "no cond.* point compared"
    parts = [f"the encoders ({seen})"]
    start = target.steps()[0]
    if start:
        dits = [p for p in equal_points if dit_step(p) is not None]
        skipped = "step 0" if start == 1 else f"steps 0..{start - 1}"
        parts.append(f"{skipped}, which level 1 did not capture (the gate found "
                     f"{', '.join(dits) or 'no dit point'} equal)")
    parts.append(f"the pipeline's code before {label} at step {start}")
    return ", ".join(parts[:-1]) + ("," if len(parts) > 2 else "") + f" or {parts[-1]}"


def name_inside(first: Divergence, second: Divergence, target: Target,
                equal_points: list[str]) -> Finding:
    """Level 2's finding, once it reproduced level 1 (``target``: level 1's)."""
    within = str(first.module)
    if second.kind == "uncovered":
        return Finding(False, second.where(), None,
                       f"{second.sentence()}; no place is named from calls one arm did not "
                       "capture")
    if second.kind == "differs":
        sentence = (f"{within}: inputs equal, output differs, but no module inside it does: "
                    "the divergence is in its own code between them"
                    if second.module == within else second.sentence())
        return Finding(True, second.where(), second.module, sentence)
    if second.kind == "inputs_differ":
        assert second.b0 is not None
        if at_stage_start(first, target):
            unseen = unseen_range(first, target, equal_points)
            start = (f"at step {first.step}, the first step level 1 captured"
                     if target.stage == CAPTURE_DIT
                     else f"at the first module the pass hooked in {_root(within)}")
            return Finding(False, f"before {within} (not seen)", None,
                           f"{within}'s inputs already differ {start}, and no module inside it "
                           "computes differently on equal inputs: the divergence came from "
                           f"before anything the pass hooked, in {unseen}; no place is named "
                           "(denser frozen points narrow it)")
        # The block's inputs already differed: the code runs from level 1's last equal call.
        after = first.before if first.kind == "inputs_differ" else (second.before
                                                                    or first.before)
        start = after.label if after else "the start of the step"
        return Finding(True, f"code between {start} and {second.module}", None,
                       f"{second.module}'s inputs already differ: the divergence is in code "
                       f"outside any hooked module, run between {start} and {second.module}")
    return Finding(True, second.where(first.before),
                   second.module if second.kind in NAMES_MODULE else None, second.sentence())
