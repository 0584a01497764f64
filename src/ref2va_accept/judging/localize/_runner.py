"""The localization pass: where a lossless candidate that is not bit-exact first parts from B0.

Run after a lossless gate fails with ``quality_gate_failed`` (on by default; pytest's
``--no-localize`` turns it off), from the first diverging comparison point:

- ``cond.*``: the conditioning encoders; ``dit.stepNNN[.video|.audio]``: the DiT at step NNN, or
  at every step after the last equal frozen point up to NNN when the frozen points skip steps;
  any later point (latents, decoded output, the MP4) is not a module's output of one step, and the
  pass says so without a request.
- **Level 1** (blocks): one request per arm at the gate's seed, the stage's point dumped at each
  of those steps (the diverging one must differ again, or the divergence did not reproduce) and
  every block of the stage hooked there: each call's step and input and output digests, no
  tensor on disk. Compared in B0's completion order (:func:`capture.divergence`), this names the
  step and the first block where the runs part.
- **Level 2** (inside the block): one more request per arm at that step, that block and every
  module inside it hooked, their tensors written. The first module whose output differs while
  its inputs are equal is named, with its shape, dtype, largest absolute and ULP difference, the
  share of elements that differ (the tensors package's streaming comparator) and a picture of
  where (:mod:`picture`). When the candidate did not run a block B0 ran (outputs reused from a
  cached step) level 1 already says where, and the picture is of the stage's point at that step.

A place is named only from calls captured in both arms (:mod:`judgement`): a capture the engine
reports with no module hooked or no call recorded, calls B0 made that the candidate's capture
does not demonstrably cover, a level 2 that does not see level 1's block part again, and inputs
that already differ at the first module hooked in a stage all leave the check open, saying what
was not seen.

Instances: B0 (level 1), the candidate (levels 1 and 2), B0 again (level 2): three starts and four
requests at most, every instance stopped before the next starts (the host has one set of devices).
Each request asks the engine to stop once its capture is written (``capture.stop``: after the last
captured step on every rank, or before the denoise for the encoders), since nothing after it can
change what the pass compares; the answer counts as stopped on purpose only as
:func:`judgement.stopped_whole` says, anything else is a request that failed.
B0's captures are kept for the session: another candidate of the track that fails at the same
point reuses them (one start and two requests of its own).
Before level 2 the free disk is checked against a bound of the tensors it writes. Whatever
happens, the pass ends in one ``localization`` check (passed: the place is named; open: why not),
so a failure here never loses the gate's verdict or any evidence already written.
"""

from __future__ import annotations

import contextlib
import logging
import math
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from ref2va_accept.core import (
    ArmRole,
    LocalizeError,
    Reason,
    Ref2VAError,
    TensorFileError,
)
from ref2va_accept.evidence import (
    AnyCheck,
    LocalizationCheck,
    LocalizedFigures,
    LocalizeRequest,
    LosslessGateCheck,
    LosslessGateData,
    NotCompared,
)
from ref2va_accept.judging.localize._capture import Call, Divergence, divergence
from ref2va_accept.judging.localize._judgement import (
    Finding,
    NotSeen,
    captured,
    name_inside,
    name_level_one,
    not_reproduced,
    stopped_whole,
)
from ref2va_accept.judging.localize._picture import diff_map
from ref2va_accept.judging.localize._result import Localization, Target, point_at, target_of
from ref2va_accept.planning import DTYPE_BYTES, fmt_bytes
from ref2va_accept.tensors import compare_dumps, compare_tensor_files, point_file
from ref2va_contract.diagnostics import (
    CAPTURE_DIT,
    CAPTURE_FIRST_STEP_KEY,
    CAPTURE_STAGE_KEY,
    CAPTURE_STEP_KEY,
    CAPTURE_STOP_KEY,
    CAPTURE_TENSORS_KEY,
    CAPTURE_WITHIN_KEY,
)

if TYPE_CHECKING:
    from ref2va_accept.arms import Arms, Outcome

log = logging.getLogger(__name__)
# The candidate's level-2 capture and its calls, or why it backs nothing.
Level2: TypeAlias = "tuple[Outcome, list[Call]] | NotSeen"

# Level 2 writes every tensor of the diverging block and its modules, per arm: bounded by this
# many times the block's own inputs and outputs (an MLP's hidden layer is 4x the block's width;
# a block has about a dozen modules), times the disk check's margin.
LEVEL2_FACTOR = 32
DISK_MARGIN = 1.25
# At most, per localized candidate: B0 (level 1), the candidate (levels 1 and 2), B0 (level 2).
# Inputs that already differ at the first module hooked in a stage end the pass open (see
# _judgement.py) instead of sending it a stage back, so these bounds hold whatever it finds.
REQUESTS = 4
STARTS = 3


def _tensor_bytes(call: Call) -> int:
    return sum(math.prod(d.shape) * DTYPE_BYTES.get(d.dtype, 8)
               for d in (*call.inputs, *call.outputs))


class LocalizationPass:
    """One candidate's pass over its track's arms (see the module doc)."""

    def __init__(self, arms: Arms, candidate: str, point: str, seed: int,
                 gate_dumps: tuple[Path, Path] | None = None,
                 b0_captures: dict[tuple[Any, ...], Outcome] | None = None,
                 equal_points: Sequence[str] = ()) -> None:
        self.arms, self.candidate, self.point, self.seed = arms, candidate, point, seed
        # B0's captures already made this session (track, point, seed, stage, step, within):
        # a second candidate of the track failing at the same point reuses them.
        self.b0_captures = b0_captures if b0_captures is not None else {}
        # The gate's own dump folders (B0's, the candidate's): the point's picture when level 2
        # does not run.
        self.gate_dumps = gate_dumps
        self.equal_points = list(equal_points)
        self.result = Localization(arms.plan.track_id, candidate, point, seed,
                                   target_of(point, equal_points))

    def run(self) -> Localization:
        result = self.result
        target = result.target
        if target is None:
            result.sentence = (f"{self.point} is not made by one step of a module the pass can "
                               "hook (it covers the encoders and the DiT's steps): the DiT's "
                               "outputs were equal, so look at what follows them")
            return result
        try:
            self._levels(target)
        except NotSeen as exc:
            result.found = False
            result.sentence = f"{exc}; no place is named from what was not captured"
            log.warning("localization of %s/%s: %s", result.track, self.candidate, exc)
        except (Ref2VAError, OSError) as exc:
            result.found = False
            result.sentence = f"the pass could not finish: {str(exc).splitlines()[0]}"
            log.warning("localization of %s/%s: %s", result.track, self.candidate, exc)
        except Exception as exc:  # a defect of the pass: said, and the gate's verdict kept
            result.found = False
            result.sentence = (f"the pass stopped on an internal error: {type(exc).__name__}: "
                               f"{str(exc).splitlines()[0] if str(exc) else ''}")
            log.exception("localization of %s/%s", result.track, self.candidate)
        if result.picture is None and self.gate_dumps is not None:
            self._show_point(*self.gate_dumps, self.point, "the gate's dumps")
        return result

    # -- the requests ----------------------------------------------------------------------------
    def _points(self, target: Target) -> tuple[str, ...]:
        """The points a request of the pass dumps: the stage's point at every step it captures
        (the diverging one among them), so the step where the runs part can be pictured."""
        if target.stage != CAPTURE_DIT or target.step is None:
            return (self.point,)
        first = target.step if target.first_step is None else target.first_step
        return tuple(point_at(self.point, step) for step in range(first, target.step + 1))

    def _capture(self, arm: str, target: Target, within: str | None, level: int,
                 engine: Any) -> tuple[Outcome, list[Call]]:
        capture = {CAPTURE_STAGE_KEY: target.stage, CAPTURE_STEP_KEY: target.step,
                   CAPTURE_WITHIN_KEY: within, CAPTURE_TENSORS_KEY: within is not None,
                   CAPTURE_STOP_KEY: True}
        if target.first_step is not None and target.first_step != target.step:
            capture[CAPTURE_FIRST_STEP_KEY] = target.first_step
        points = self._points(target)
        outcome = self.arms.request(engine, arm, kind="localize", index=level, seed=self.seed,
                                    diagnostics_points=points, capture=capture)
        folder = outcome.dump_dir
        sample = outcome.sample
        stopped = outcome.says_capture_stopped
        self.result.requests.append(LocalizeRequest(
            arm=arm, level=level, within=within, ok=sample.ok, stopped=stopped,
            latency_s=sample.latency_s,
            dump_dir=self.arms.evidence.relative(folder) if folder else None))
        if not (sample.ok or stopped) or folder is None:
            raise LocalizeError(f"{arm}'s level-{level} request failed: {outcome.explain()}")
        if stopped:
            stopped_whole(folder, arm, level, target, points)
        # Only what the engine reports capturing counts (judgement.captured).
        return outcome, captured(folder, arm, level, target, within)

    def _on(self, arm: str, work: Any) -> Any:
        engine = self.arms.start(arm)
        try:
            return work(engine)
        finally:
            self.arms.registry.stop(engine)

    def _b0(self, target: Target, within: str | None, level: int) -> tuple[Outcome, list[Call]]:
        """B0's capture, made once per session for one track, point, seed and scope."""
        key = (self.arms.plan.track_id, self.point, self.seed, target.stage, target.step,
               target.first_step, within)
        made = self.b0_captures.get(key)
        if made is None:
            made, calls = self._on(ArmRole.B0,
                                   lambda e: self._capture(ArmRole.B0, target, within, level, e))
            self.b0_captures[key] = made
            return made, calls
        self.result.requests.append(LocalizeRequest(arm=ArmRole.B0, level=level, within=within,
                                                    ok=True, reused=True))
        return made, captured(made.dump_dir, ArmRole.B0, level, target, within)  # type: ignore[arg-type]

    def _levels(self, target: Target) -> None:
        result = self.result
        b0_one, b0_calls = self._b0(target, None, 1)
        first: Divergence | None = None

        def candidate_levels(engine: Any) -> tuple[Outcome, Level2 | None]:
            nonlocal first
            one, calls = self._capture(self.candidate, target, None, 1, engine)
            self._reproduced(b0_one, one)
            first = divergence(b0_calls, calls)
            result.level1 = first
            # Inputs that already differ may come from one of the block's own modules called
            # outside its forward (a block's modulation, say): look inside it either way.
            if first.kind not in ("differs", "inputs_differ"):
                return one, None
            assert first.b0 is not None
            self._room(first.b0)
            try:
                return one, self._capture(self.candidate, self._at(target, first),
                                          first.b0.module, 2, engine)
            except NotSeen as exc:  # level 2 saw nothing: B0's is not worth a start
                return one, exc

        cand_one, cand_two = self._on(self.candidate, candidate_levels)
        assert first is not None
        if cand_two is None:
            # Level 1 already says where (a block B0 ran and the candidate did not, calls in
            # another order, or no block's output differing): no block to look inside.
            if first.kind != "none":
                self._at(target, first)
            self._say(name_level_one(first, self.point, target))
        else:
            self._inside(target, first, cand_two)
        if result.picture is None and first.step is not None:
            # No module's output to show: the stage's point where the runs part (level 1 dumped
            # it at every step it captured).
            self._show_point(b0_one.dump_dir, cand_one.dump_dir,  # type: ignore[arg-type]
                             point_at(self.point, first.step), "level 1's dumps")

    def _say(self, found: Finding) -> None:
        result = self.result
        result.found, result.where, result.module = found.found, found.where, found.module
        result.sentence = found.sentence

    def _inside(self, target: Target, first: Divergence,
                cand_two: Level2) -> None:
        """What the result says once level 2 ran (``target``: level 1's): the module it names,
        open when it does not reproduce level 1."""
        within = str(first.module)
        try:
            if isinstance(cand_two, NotSeen):
                raise cand_two
            b0_two, b0_calls = self._b0(self._at(target, first), within, 2)
        except NotSeen as exc:
            self._not_reproduced(first, f"level 2 could not look inside it: {exc}")
            return
        cand_out, cand_calls = cand_two
        second = divergence(b0_calls, cand_calls)
        self.result.level2 = second
        missed = not_reproduced(first, second, b0_calls, cand_calls, self.candidate)
        if missed:
            self._not_reproduced(first, f"level 2, hooking inside {within}, {missed}")
            return
        self._say(name_inside(first, second, target, self.equal_points))
        named = second if second.kind in ("differs", "inputs_differ") else None
        if named is not None and named.b0 is not None and named.candidate is not None:
            self.result.inputs_equal = named.kind == "differs"
            self._show_module(named, b0_two.dump_dir, cand_out.dump_dir)  # type: ignore[arg-type]

    def _not_reproduced(self, first: Divergence, what: str) -> None:
        step = f" at step {first.step}" if first.step is not None else ""
        self._say(Finding(False, f"{first.module} (not reproduced)", None,
                          f"not reproduced: level 1 found {first.sentence()}{step}; {what}; no "
                          "place is named"))

    def _at(self, target: Target, found: Divergence) -> Target:
        """Level 2's target: the one step where level 1 saw the runs part."""
        step = found.step if found.step is not None else target.step
        self.result.target = Target(target.stage, step, step) if target.stage == CAPTURE_DIT \
            else target
        return self.result.target

    def _reproduced(self, b0: Outcome, candidate: Outcome) -> None:
        compared = compare_dumps(b0.dump_dir, candidate.dump_dir, [self.point])  # type: ignore[arg-type]
        status = compared.points[0].status
        if status in ("missing_in_a", "missing_in_b"):
            arm = ArmRole.B0 if status == "missing_in_a" else self.candidate
            raise LocalizeError(f"{self.point} was not written by {arm}'s level-1 request: the "
                                "divergence cannot be confirmed")
        if compared.equal:
            raise LocalizeError(f"the divergence did not reproduce: {self.point} is bit-exact "
                                "with B0 in the pass's requests (a nondeterministic candidate?)")

    def _room(self, block: Call) -> None:
        need = int(2 * LEVEL2_FACTOR * _tensor_bytes(block) * DISK_MARGIN)
        folder = self.arms.evidence.folder
        free = shutil.disk_usage(folder).free
        if free < need:
            raise LocalizeError(f"not enough disk for level 2 inside {block.module}: it writes up "
                                f"to {fmt_bytes(need)}, {fmt_bytes(free)} free")

    # -- figures and pictures --------------------------------------------------------------------
    def _show(self, a: Path, b: Path, label: str) -> None:
        """The figures and the picture of one tensor, B0's file against the candidate's."""
        point = compare_tensor_files(a, b).points[0]
        self.result.figures = LocalizedFigures(**{**point.model_dump(exclude_unset=True),
                                                   "name": label})
        self.result.picture = diff_map(a, b)
        self.result.picture_of = label

    def _show_module(self, named: Divergence, b0_dir: Path, cand_dir: Path) -> None:
        assert named.b0 is not None and named.candidate is not None
        index = named.output or 0
        files = (named.b0.outputs[index].file, named.candidate.outputs[index].file)
        if None in files:
            return
        try:
            self._show(b0_dir / files[0], cand_dir / files[1],  # type: ignore[operator]
                       f"{named.b0.label}, output {index}")
        except TensorFileError as exc:
            self.result.figures = NotCompared(error=str(exc))

    def _show_point(self, b0_dir: Path, cand_dir: Path, point: str, source: str) -> None:
        """A comparison point's figures and picture, when no module's output is shown."""
        a, b = point_file(b0_dir, point), point_file(cand_dir, point)
        if not (a.is_file() and b.is_file()):
            return
        unreadable = self.result.figures  # a module's tensors that could not be read, if any
        with contextlib.suppress(TensorFileError):
            self._show(a, b, f"{point} ({source})")
        if unreadable is not None:
            self.result.figures = unreadable


def localize(arms: Arms, candidate: str, point: str, seed: int,
             gate_dumps: tuple[Path, Path] | None = None,
             b0_captures: dict[tuple[Any, ...], Outcome] | None = None,
             equal_points: Sequence[str] = ()) -> LocalizationCheck:
    """Run the pass and record its one check in the evidence (also when it could not finish)."""
    result = LocalizationPass(arms, candidate, point, seed, gate_dumps, b0_captures,
                              equal_points).run()
    check = result.check()
    arms.evidence.add_check(check)
    return check


def failed_gate(checks: Sequence[AnyCheck]) -> LosslessGateData | None:
    """The table of a lossless gate that failed on bit-exactness (as the evidence records
    it), None when no gate did."""
    for check in checks:
        if isinstance(check, LosslessGateCheck) and check.reason is Reason.QUALITY_GATE_FAILED:
            return check.data if isinstance(check.data, LosslessGateData) else None
    return None


def wants_pass(checks: Sequence[AnyCheck]) -> str | None:
    """The first diverging point of a lossless gate that failed on bit-exactness, or None."""
    table = failed_gate(checks)
    return None if table is None else table.first_divergence


def equal_before(table: LosslessGateData) -> list[str]:
    """The points a lossless gate's table found equal before its first divergence."""
    found = []
    for point in table.points:
        if point.name == table.first_divergence:
            break
        if point.equal:
            found.append(point.name)
    return found


