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
  tensor on disk. Compared in B0's completion order (:func:`capture.parting`), this names the
  step and the first block where the runs part.
- **Level 2** (inside the block): one more request per arm at that step, that block and every
  module inside it hooked, their tensors written. The first module whose output differs while
  its inputs are equal is named, with its shape, dtype, largest absolute and ULP difference, the
  share of elements that differ (the tensors package's streaming comparator) and a picture of
  where (:mod:`picture`). When the candidate did not run a block B0 ran (outputs reused from a
  cached step) level 1 already says where, and the picture is of the stage's point at that step.

Instances: B0 (level 1), the candidate (levels 1 and 2), B0 again (level 2): three starts and four
requests at most, every instance stopped before the next starts (the host has one set of devices).
B0's captures are kept for the session: another candidate of the track that fails at the same
point reuses them (one start and two requests of its own).
Before level 2 the free disk is checked against a bound of the tensors it writes. Whatever
happens, the pass ends in one ``localization`` check (passed: the place is named; open: why not),
so a failure here never loses the gate's verdict or any evidence already written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from ref2va_accept.core import (
    ArmRole,
    Check,
    CheckStatus,
    LocalizeError,
    Reason,
    Ref2VAError,
    TensorFileError,
)
from ref2va_accept.evidence import CheckResult, LosslessGateData, check_record
from ref2va_accept.judging.localize.capture import Call, Parting, parting, read_log
from ref2va_accept.judging.localize.picture import DiffMap, diff_map
from ref2va_accept.planning import DTYPE_BYTES, fmt_bytes
from ref2va_accept.tensors import compare_dumps, compare_tensor_files, point_file
from ref2va_accept.tensors.comparison import dit_step
from ref2va_contract.diagnostics import (
    CAPTURE_DIT,
    CAPTURE_ENCODERS,
    CAPTURE_FIRST_STEP_KEY,
    CAPTURE_REPORT_KEY,
    CAPTURE_STAGE_KEY,
    CAPTURE_STEP_KEY,
    CAPTURE_TENSORS_KEY,
    CAPTURE_WITHIN_KEY,
    ENABLED_PATH_FILE,
)

if TYPE_CHECKING:
    from ref2va_accept.arms import Arms, Outcome

log = logging.getLogger(__name__)

# Level 2 writes every tensor of the diverging block and its modules, per arm: bounded by this
# many times the block's own inputs and outputs (an MLP's hidden layer is 4x the block's width;
# a block has about a dozen modules), times the disk check's margin.
LEVEL2_FACTOR = 32
DISK_MARGIN = 1.25
REQUESTS = 4  # at most, per localized candidate
STARTS = 3


class CaptureReport(BaseModel):
    """The engine's own report of a capture (its enabled_path.json's `capture`: module_capture
    writes what it hooked and captured); the pass reads its errors alone."""

    model_config = ConfigDict(extra="allow")

    errors: list[Any] = []


@dataclass(frozen=True)
class Target:
    stage: str
    step: int | None  # the diverging point's step (the last one level 1 captures)
    first_step: int | None = None  # the first step level 1 captures (points skip steps)

    def describe(self) -> str:
        if self.stage != CAPTURE_DIT:
            return "the conditioning encoders"
        if self.first_step is not None and self.first_step != self.step:
            return f"the DiT at steps {self.first_step}..{self.step}"
        return f"the DiT at step {self.step}"


def point_at(point: str, step: int) -> str:
    """The same DiT point at another step (``dit.step025.video`` -> ``dit.step002.video``)."""
    return re.sub(r"^dit\.step\d{3}", f"dit.step{step:03d}", point)


def target_of(point: str, equal_points: Sequence[str] = ()) -> Target | None:
    """Which stage (and steps) made a comparison point; None for one no module of a step makes.

    ``equal_points``: the contracted points found equal before it. When the frozen points skip
    steps (dit.step000, dit.step025, ...), the runs may have parted at any step after the last
    equal one: level 1 captures them all, from the step after it.
    """
    if point.startswith("cond."):
        return Target(CAPTURE_ENCODERS, None)
    step = dit_step(point)
    if step is None:
        return None
    earlier = [s for s in map(dit_step, equal_points) if s is not None and s < step]
    return Target(CAPTURE_DIT, step, max(earlier) + 1 if earlier else 0)


@dataclass
class Localization:
    """What the pass found for one candidate (the ``localization`` check's data)."""

    track: str
    candidate: str
    point: str
    seed: int | None
    target: Target | None = None
    found: bool = False
    sentence: str = ""  # where, in words
    module: str | None = None  # the module path named (None: outside any module, or not found)
    where: str = ""  # the place in a few words: the module, "code between A and B", "X not run"
    level1: Parting | None = None
    level2: Parting | None = None
    # the named module's output (else the pictured point), B0 against the candidate
    figures: dict[str, Any] | None = None
    inputs_equal: bool | None = None
    picture: DiffMap | None = None
    picture_of: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)

    def check(self) -> CheckResult:
        detail = (f"first divergence at {self.point}"
                  + (f", in {self.target.describe()}" if self.target else "")
                  + f": {self.sentence}")
        return CheckResult(self.track, self.candidate, Check.LOCALIZATION,
                           CheckStatus.PASS if self.found else CheckStatus.OPEN, None, detail,
                           self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return {
            "point": self.point, "seed": self.seed,
            "stage": self.target.stage if self.target else None,
            "step": self.target.step if self.target else None,
            "first_step": self.target.first_step if self.target else None,
            "point_step": dit_step(self.point),
            "found": self.found, "module": self.module, "where": self.where,
            "sentence": self.sentence,
            "level1": _parting_dict(self.level1), "level2": _parting_dict(self.level2),
            "figures": self.figures, "inputs_equal": self.inputs_equal,
            "picture": self.picture.to_dict() if self.picture else None,
            "picture_of": self.picture_of, "requests": self.requests,
        }


def _parting_dict(found: Parting | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {"kind": found.kind, "module": found.module,
            "b0": found.b0.label if found.b0 else None,
            "candidate": found.candidate.label if found.candidate else None,
            "before": found.before.label if found.before else None,
            "output": found.output, "skipped": list(found.skipped),
            "sentence": found.sentence()}


def _tensor_bytes(call: Call) -> int:
    return sum(math.prod(d.shape) * DTYPE_BYTES.get(d.dtype, 8)
               for d in (*call.inputs, *call.outputs))


class Pass:
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
                 engine: Any) -> Outcome:
        capture = {CAPTURE_STAGE_KEY: target.stage, CAPTURE_STEP_KEY: target.step,
                   CAPTURE_WITHIN_KEY: within, CAPTURE_TENSORS_KEY: within is not None}
        if target.first_step is not None and target.first_step != target.step:
            capture[CAPTURE_FIRST_STEP_KEY] = target.first_step
        outcome = self.arms.request(engine, arm, kind="localize", index=level, seed=self.seed,
                                    diagnostics_points=self._points(target), capture=capture)
        folder = outcome.dump_dir
        self.result.requests.append({
            "arm": arm, "level": level, "within": within, "ok": outcome.sample.ok,
            "latency_s": outcome.sample.latency_s,
            "dump_dir": self.arms.evidence.relative(folder) if folder else None})
        if not outcome.sample.ok or outcome.dump_dir is None:
            raise LocalizeError(f"{arm}'s level-{level} request failed: {outcome.explain()}")
        # A hook that failed leaves calls out of the log, which would read as modules not run:
        # the engine's own report of its capture must be there and clean.
        try:
            report = json.loads((outcome.dump_dir / ENABLED_PATH_FILE).read_text())
            said = CaptureReport.model_validate(report[CAPTURE_REPORT_KEY])
        except (OSError, ValueError, KeyError, TypeError):  # a ValidationError is a ValueError
            raise LocalizeError(f"{arm}'s level-{level} request: no capture report in its "
                                f"{ENABLED_PATH_FILE}") from None
        if said.errors:
            raise LocalizeError(f"{arm}'s level-{level} capture failed in the engine: "
                                + "; ".join(map(str, said.errors[:3])))
        return outcome

    def _on(self, arm: str, work: Any) -> Any:
        engine = self.arms.start(arm)
        try:
            return work(engine)
        finally:
            self.arms.registry.stop(engine)

    def _b0(self, target: Target, within: str | None, level: int) -> Outcome:
        """B0's capture, made once per session for one track, point, seed and scope."""
        key = (self.arms.plan.track_id, self.point, self.seed, target.stage, target.step,
               target.first_step, within)
        made = self.b0_captures.get(key)
        if made is None:
            made = self._on(ArmRole.B0,
                            lambda e: self._capture(ArmRole.B0, target, within, level, e))
            self.b0_captures[key] = made
        else:
            self.result.requests.append({"arm": ArmRole.B0, "level": level, "within": within,
                                         "ok": True, "reused": True})
        return made

    def _levels(self, target: Target) -> None:
        result = self.result
        b0_one = self._b0(target, None, 1)
        first: Parting | None = None
        cand_two: Outcome | None = None

        def candidate_levels(engine: Any) -> tuple[Outcome, Outcome | None]:
            nonlocal first
            one = self._capture(self.candidate, target, None, 1, engine)
            self._reproduced(b0_one, one)
            first = parting(read_log(b0_one.dump_dir), read_log(one.dump_dir))  # type: ignore[arg-type]
            result.level1 = first
            # Inputs that already differ may come from one of the block's own modules called
            # outside its forward (a block's modulation, say): look inside it either way.
            if first.kind not in ("differs", "inputs_differ"):
                return one, None
            assert first.b0 is not None
            self._room(first.b0)
            return one, self._capture(self.candidate, self._at(target, first), first.b0.module,
                                      2, engine)

        cand_one, cand_two = self._on(self.candidate, candidate_levels)
        assert first is not None
        self._name(target, first, cand_two)
        if result.picture is None and first.step is not None:
            # No module's output to show: the stage's point where the runs part (level 1 dumped
            # it at every step it captured).
            self._show_point(b0_one.dump_dir, cand_one.dump_dir,  # type: ignore[arg-type]
                             point_at(self.point, first.step), "level 1's dumps")

    def _name(self, target: Target, first: Parting, cand_two: Outcome | None) -> None:
        """What the result says, from level 1's parting and, when it ran, level 2's."""
        result = self.result
        if cand_two is None:
            # Level 1 already says where (a block B0 ran and the candidate did not, calls in
            # another order, or no block's output differing): no block to look inside.
            result.found = True
            if first.kind != "none":
                self._at(target, first)
            result.module = first.module if first.kind in ("not_run", "only_in_candidate",
                                                           "order") else None
            result.where = first.where()
            result.sentence = first.sentence() if first.kind != "none" else (
                f"every block's output at this step is equal in both runs, yet {self.point} "
                "differs: the divergence is in code after the blocks (the final layer's "
                "arithmetic, guidance, the step update), not in a module the pass hooks")
            return
        within = first.module
        b0_two = self._b0(self._at(target, first), within, 2)
        second = parting(read_log(b0_two.dump_dir), read_log(cand_two.dump_dir))  # type: ignore[arg-type]
        result.level2 = second
        result.found = True
        result.where = second.where(first.before)
        result.module = second.module if second.kind in ("differs", "not_run",
                                                         "only_in_candidate", "order") else None
        result.sentence = second.sentence()
        if second.kind == "differs" and second.module == within:
            result.sentence = (f"{within}: inputs equal, output differs, but no module inside "
                               "it does: the divergence is in its own code between them")
        elif second.kind == "inputs_differ":
            after = second.before or first.before
            result.sentence = (f"{second.module}'s inputs already differ: the divergence is in "
                               "code outside any hooked module, run between "
                               f"{after.label if after else 'the start of the step'} and "
                               f"{second.module}")
        named = second if second.kind in ("differs", "inputs_differ") else None
        if named is not None and named.b0 is not None and named.candidate is not None:
            result.inputs_equal = named.kind == "differs"
            self._show_module(named, b0_two.dump_dir, cand_two.dump_dir)  # type: ignore[arg-type]

    def _at(self, target: Target, found: Parting) -> Target:
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
        self.result.figures = {**compare_tensor_files(a, b).points[0].to_dict(), "name": label}
        self.result.picture = diff_map(a, b)
        self.result.picture_of = label

    def _show_module(self, named: Parting, b0_dir: Path, cand_dir: Path) -> None:
        assert named.b0 is not None and named.candidate is not None
        index = named.output or 0
        files = (named.b0.outputs[index].file, named.candidate.outputs[index].file)
        if None in files:
            return
        try:
            self._show(b0_dir / files[0], cand_dir / files[1],  # type: ignore[operator]
                       f"{named.b0.label}, output {index}")
        except TensorFileError as exc:
            self.result.figures = {"error": str(exc)}

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
             equal_points: Sequence[str] = ()) -> CheckResult:
    """Run the pass and record its one check in the evidence (also when it could not finish)."""
    result = Pass(arms, candidate, point, seed, gate_dumps, b0_captures, equal_points).run()
    check = result.check()
    arms.evidence.add_check(check)
    return check


def failed_gate(checks: Sequence[CheckResult]) -> LosslessGateData | None:
    """The table of a lossless gate that failed on bit-exactness (as the evidence records
    it), None when no gate did."""
    for check in checks:
        if check.name is Check.LOSSLESS_GATE and check.reason is Reason.QUALITY_GATE_FAILED:
            data = check_record(check).data
            return data if isinstance(data, LosslessGateData) else None
    return None


def wants_pass(checks: Sequence[CheckResult]) -> str | None:
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


