"""The lossless gate: strict bit-exactness at the frozen comparison points (docs/quality.md).

Order of judgement for one lossless track:
1. B0 must honour its own contract (every point written, with the frozen dtype and shape) and
   reproduce itself bit for bit on two independent instances, watched and unobserved alike;
   otherwise the track is inconclusive and no candidate is judged against that noise.
2. A candidate must write every point (`comparison_point_missing`), equal B0 at every point in
   pipeline order (`quality_gate_failed`, naming the first divergence), give the same decoded
   output when unobserved as when watched (`output_differs_when_unobserved`), and show no
   approximate path in its enabled_path.json (`enabled_path_mismatch`), whatever its label says.

Each comparison records its seed and, per point, whether it is equal and how it differs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ref2va_accept.arms import Arms, Outcome
from ref2va_accept.core import ArmRole, Check, CheckStatus, MediaError, Reason, TensorFileError
from ref2va_accept.evidence import AnyCheck, MediaProbe, PointRecord, new_check
from ref2va_accept.judging._b0_gate import GateRuns
from ref2va_accept.judging._decoded import compare_decoded_mp4
from ref2va_accept.judging._gate_run import GateOnInstance, record, reference_run
from ref2va_accept.judging._gates import BaselineGateRunner
from ref2va_accept.judging._verdicts import GateChecks
from ref2va_accept.planning import LosslessContract
from ref2va_accept.tensors import (
    DumpComparison,
    Status,
    compare_dumps,
    point_file,
    read_header,
)
from ref2va_contract.diagnostics import (
    APPROXIMATE_KEY,
    CACHE_DIT_PATH,
    CACHE_KEY,
    DTYPE_KEY,
    ENABLED_PATH_FILE,
    REFERENCE_KV_KEY,
    REFERENCE_KV_REUSE_PATH,
    REUSED_STEPS_KEY,
)

if TYPE_CHECKING:
    from ref2va_accept.engines import EngineInstance
    from ref2va_accept.judging._latency_run import InstanceRun

log = logging.getLogger(__name__)

_MP4_POINTS = ("mp4.video", "mp4.audio")

def contract_problems(outcome: Outcome, contract: LosslessContract) -> list[str]:
    """What the request did not deliver of the contract: missing points, wrong dtype or shape."""
    problems: list[str] = []
    if not outcome.sample.ok or outcome.media_path is None:
        return [f"the request failed ({outcome.sample.failure}): {outcome.sample.detail}"]
    folder = outcome.dump_dir
    for point in contract.points:
        dtype: str = point.dtype
        if point.source == "mp4":
            found = _mp4_shape(outcome, point.name)
            if found is None:
                # An MP4 that does not decode, or lacks the stream, writes no such point.
                problems.append(f"{point.name}: not decodable from the MP4 "
                                f"({outcome.explain()})")
                continue
        else:
            path = point_file(folder, point.name) if folder else None
            if path is None or not path.is_file():
                problems.append(f"{point.name}: not written")
                continue
            try:
                tensors = list(read_header(path).values())
            except TensorFileError as exc:
                problems.append(f"{point.name}: unreadable ({exc})")
                continue
            if len(tensors) != 1:
                problems.append(f"{point.name}: one tensor expected, found {len(tensors)}")
                continue
            found, dtype = list(tensors[0].shape), tensors[0].dtype
        if dtype != point.dtype:
            problems.append(f"{point.name}: dtype {point.dtype} frozen, {dtype} written")
        if isinstance(point.shape, list) and found is not None and found != point.shape:
            problems.append(f"{point.name}: shape {point.shape} frozen, {found} written")
    if contract.diagnostics and (folder is None or not (folder / ENABLED_PATH_FILE).is_file()):
        problems.append(f"{ENABLED_PATH_FILE}: not written")
    return problems


def _mp4_shape(outcome: Outcome, name: str) -> list[int] | None:
    if not outcome.media:
        return None
    media = MediaProbe.model_validate(outcome.media)  # the probe as the evidence records it
    if name == "mp4.video" and media.video:
        v = media.video
        return [v.frames_decoded, v.height, v.width, 3]
    if name == "mp4.audio" and media.audio:
        a = media.audio
        return [a.channels, a.samples_decoded]
    return None


def compare(reference: Outcome, other: Outcome, contract: LosslessContract) -> DumpComparison:
    """Every contract point of two requests, in the contract's (pipeline) order."""
    found: dict[str, PointRecord] = {}
    if contract.diagnostics and reference.dump_dir and other.dump_dir:
        for point in compare_dumps(reference.dump_dir, other.dump_dir,
                                   contract.diagnostics).points:
            found[point.name] = point
    if contract.mp4 and reference.media_path and other.media_path:
        found.update(compare_mp4(reference.media_path, other.media_path, contract.mp4))
    # Every contracted point is in the result: one that could not be compared is missing (on
    # the side that lacks it; on B, the other request, when both seem to have it), never left out.
    return DumpComparison.of(found.get(name) or _not_compared(name, reference, other, contract)
                             for name in contract.order)


def _not_compared(name: str, reference: Outcome, other: Outcome, contract: LosslessContract
                  ) -> PointRecord:
    status: Status = "missing_in_b"
    if not _holds(reference, name, contract):
        status = "missing_in_a"
    return PointRecord.of(name, status, None, None, None, None)


def _holds(outcome: Outcome, name: str, contract: LosslessContract) -> bool:
    if name in contract.mp4:
        return outcome.media_path is not None and _mp4_shape(outcome, name) is not None
    return outcome.dump_dir is not None and point_file(outcome.dump_dir, name).is_file()


def compare_mp4(a: Path, b: Path, names: Sequence[str]) -> dict[str, PointRecord]:
    try:
        decoded = compare_decoded_mp4(a, b)
    except MediaError as exc:
        log.warning("decoded comparison failed: %s", exc)
        return {}
    return {p.name: p for p in decoded.points if p.name in names}


def enabled_path(outcome: Outcome) -> dict[str, Any] | None:
    if outcome.dump_dir is None:
        return None
    try:
        loaded: dict[str, Any] = json.loads((outcome.dump_dir / ENABLED_PATH_FILE).read_text())
    except (OSError, ValueError):
        return None
    return loaded


def declared_time(path: dict[str, Any]) -> str:
    """The non-zero declared costs an enabled_path.json reports ('' when none)."""
    model = path.get("cost_model")
    if not isinstance(model, dict):
        return ""
    costs = {k: v for k, v in model.items()
             if k != "source" and isinstance(v, (int, float)) and not isinstance(v, bool) and v}
    return ", ".join(f"{k} {v:g}" for k, v in sorted(costs.items()))


def enabled_path_problems(candidate: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """Approximate paths that actually ran in the candidate, read from what it reports."""
    problems: list[str] = []
    approximate = candidate.get(APPROXIMATE_KEY) or []
    if approximate:
        problems.append(f"approximate paths ran: {', '.join(map(str, approximate))}")
    reused = (candidate.get(CACHE_KEY) or {}).get(REUSED_STEPS_KEY) or []
    if reused and CACHE_DIT_PATH not in approximate:
        problems.append(f"cached steps reused: {reused}")
    kv_reused = (candidate.get(REFERENCE_KV_KEY) or {}).get(REUSED_STEPS_KEY) or []
    if kv_reused and REFERENCE_KV_REUSE_PATH not in approximate:
        problems.append(f"reference K/V reused at steps: {kv_reused}")
    if candidate.get(DTYPE_KEY) != baseline.get(DTYPE_KEY):
        problems.append(f"dtype {candidate.get(DTYPE_KEY)}, B0 ran {baseline.get(DTYPE_KEY)}")
    return problems


@dataclass(frozen=True)
class Baseline(GateChecks):
    """B0's reference run of a lossless track and whether it may be judged against."""

    watched: Outcome


def judge_baseline(
    track: str, contract: LosslessContract, first: Outcome, unobserved: Outcome, second: Outcome
) -> Baseline:
    """B0 twice on independent instances (watched), once unobserved: all must agree bit for bit."""
    for outcome in (first, unobserved, second):
        if not outcome.sample.ok:
            check = new_check(track, ArmRole.B0, Check.BASELINE_DETERMINISM, CheckStatus.FAIL,
                              Reason.BASELINE_REQUEST_FAILED, outcome.explain())
            return Baseline(checks=(check,), watched=first)
    problems = contract_problems(first, contract) + contract_problems(second, contract)
    if problems:
        check = new_check(track, ArmRole.B0, Check.BASELINE_DETERMINISM, CheckStatus.FAIL,
                          Reason.BASELINE_CONTRACT,
                          "B0 does not honour the frozen contract: " + "; ".join(problems))
        return Baseline(checks=(check,), watched=first)
    between = compare(first, second, contract)
    watched_mp4 = compare_mp4(first.media_path, unobserved.media_path,  # type: ignore[arg-type]
                              _MP4_POINTS)
    differing = [p.name for p in between.points if not p.equal]
    differing += [f"{name} (unobserved)" for name, p in watched_mp4.items() if not p.equal]
    # Watched against unobserved must be compared, not skipped when a file does not decode.
    differing += [f"{name} (unobserved: not compared)" for name in _MP4_POINTS
                  if name not in watched_mp4]
    data = {"seed": first.sample.seed, "points": [p.json_dict() for p in between.points]}
    if differing:
        check = new_check(track, ArmRole.B0, Check.BASELINE_DETERMINISM, CheckStatus.FAIL,
                          Reason.BASELINE_NONDETERMINISTIC,
                          f"B0 does not reproduce itself; differing: {', '.join(differing)}",
                          data)
    else:
        check = new_check(track, ArmRole.B0, Check.BASELINE_DETERMINISM, CheckStatus.PASS,
                          None, f"B0 bit-exact with itself at {len(between.points)} points", data)
    return Baseline(checks=(check,), watched=first)


def judge_candidate(
    track: str,
    candidate: str,
    contract: LosslessContract,
    baseline: Baseline,
    watched: Outcome,
    unobserved: Outcome,
) -> list[AnyCheck]:
    """The candidate's lossless checks; each failing one names its reason code."""
    checks = judge_gate(track, candidate, contract, baseline, watched)
    if not watched.sample.ok:
        return checks
    return [*checks, judge_unobserved(track, candidate, contract, watched, unobserved)]


def judge_gate(track: str, candidate: str, contract: LosslessContract, baseline: Baseline,
               watched: Outcome) -> list[AnyCheck]:
    """The checks of the candidate's watched request alone (bit-exactness with B0, declared
    time, the enabled-path audit): what decides a hosted gate before any warm-up."""
    if not watched.sample.ok:
        return [new_check(track, candidate, Check.LOSSLESS_GATE, CheckStatus.FAIL,
                          Reason.CANDIDATE_REQUEST_FAILED, watched.explain())]
    checks: list[AnyCheck] = []
    missing = contract_problems(watched, contract)
    comparison = compare(baseline.watched, watched, contract)
    table = {"seed": watched.sample.seed, "points": [p.json_dict() for p in comparison.points],
             "first_divergence": comparison.first_divergence}
    uncompared = [f"{p.name}: not compared ({p.status.replace('_', ' ')})"
                  for p in comparison.points if p.status in ("missing_in_a", "missing_in_b")]
    if missing or uncompared:
        checks.append(new_check(track, candidate, Check.LOSSLESS_GATE, CheckStatus.FAIL,
                                Reason.COMPARISON_POINT_MISSING,
                                "; ".join(missing or uncompared), table))
    elif not comparison.equal:
        first = next(p for p in comparison.points if not p.equal)
        checks.append(new_check(
            track, candidate, Check.LOSSLESS_GATE, CheckStatus.FAIL, Reason.QUALITY_GATE_FAILED,
            f"not bit-exact; first diverging point {first.name} ({_describe(first)})", table))
    else:
        checks.append(new_check(track, candidate, Check.LOSSLESS_GATE, CheckStatus.PASS, None,
                                f"bit-exact with B0 at all {len(comparison.points)} contracted "
                                "points", table))

    base_path, cand_path = enabled_path(baseline.watched), enabled_path(watched)
    declared = [f"{who}: {what}" for who, path in ((ArmRole.B0, base_path), (candidate, cand_path))
                if path is not None and (what := declared_time(path))]
    if declared:
        checks.append(new_check(
            track, candidate, Check.DECLARED_TIME, CheckStatus.FAIL, Reason.DECLARED_DEVICE_TIME,
            "declared device time in enabled_path.json (slept, not computed: no latency of "
            "this arm is a measurement): " + "; ".join(declared)))
    if contract.diagnostics:
        if cand_path is None or base_path is None:
            checks.append(new_check(track, candidate, Check.ENABLED_PATH_AUDIT, CheckStatus.FAIL,
                                    Reason.COMPARISON_POINT_MISSING,
                                    f"{ENABLED_PATH_FILE} not written"))
        else:
            problems = enabled_path_problems(cand_path, base_path)
            checks.append(new_check(
                track, candidate, Check.ENABLED_PATH_AUDIT,
                CheckStatus.FAIL if problems else CheckStatus.PASS,
                Reason.ENABLED_PATH_MISMATCH if problems else None,
                "; ".join(problems) or "no approximate path ran",
                {"approximate": cand_path.get("approximate"), "dtype": cand_path.get("dtype")}))

    return checks


def judge_unobserved(track: str, candidate: str, contract: LosslessContract, watched: Outcome,
                     unobserved: Outcome) -> AnyCheck:
    """The candidate's decoded output with no diagnostics asked against its watched one."""
    if not unobserved.sample.ok or unobserved.media_path is None or watched.media_path is None:
        return new_check(track, candidate, Check.UNOBSERVED_OUTPUT, CheckStatus.FAIL,
                         Reason.CANDIDATE_REQUEST_FAILED, unobserved.explain())
    wanted = contract.mp4 or _MP4_POINTS
    same = compare_mp4(watched.media_path, unobserved.media_path, wanted)
    differing = [name for name, p in same.items() if not p.equal]
    differing += [f"{name} (not compared)" for name in wanted if same and name not in same]
    return new_check(
        track, candidate, Check.UNOBSERVED_OUTPUT,
        CheckStatus.FAIL if differing or not same else CheckStatus.PASS,
        Reason.OUTPUT_DIFFERS_WHEN_UNOBSERVED if differing or not same else None,
        (f"decoded output differs when no diagnostics are asked: {', '.join(differing)}"
         if differing else "could not decode both outputs" if not same
         else "decoded output identical watched and unobserved"))


def _describe(point: PointRecord) -> str:
    if point.status != "differs":
        return point.status.replace("_", " ")
    first = None if point.first_index is None else tuple(point.first_index)
    return (f"{point.differing}/{point.elements} elements differ, first at "
            f"{first}, max |diff| {point.max_abs_diff:.3g}, max ULP {point.max_ulp}")


def run_baseline(arms: Arms, runs: GateRuns | None = None) -> Baseline:
    """B0 on two fresh instances: watched + unobserved on the first, watched on the second
    (judging/_b0_gate.py; `runs`: the instances this track shares with others of its gate group).

    Every check lands in the evidence before this returns; the instances are stopped by then.
    """
    plan = arms.plan

    def judged(runs: GateRuns) -> tuple[Baseline, dict[str, object]]:
        first, second = runs.watched[plan.track_id]
        unobserved = runs.plain[0][plan.seeds[0]]
        return (judge_baseline(plan.track_id, plan.lossless, first, unobserved, second),
                {"unobserved_request": {"track": unobserved.sample.track,
                                        "kind": unobserved.sample.kind}})

    return reference_run(arms, runs, judged)


def run_candidate(arms: Arms, candidate: str, baseline: Baseline,
                  b0_captures: dict[tuple[Any, ...], Any] | None = None) -> list[AnyCheck]:
    """The candidate on a fresh instance, watched then unobserved, judged against B0; when it
    is not bit-exact and `b0_captures` is given (the session's B0 captures: the pass is on),
    the localization pass names where it parted from B0. (Its timed outputs are compared with
    the watched one at verdict time: judging/_timed_output.py.)
    """
    plan = arms.plan
    contract = plan.lossless
    engine = arms.start(candidate)
    watched = arms.request(engine, candidate, kind="quality", index=0,
                           diagnostics_points=contract.diagnostics,
                           record_check=Check.CANDIDATE_MEDIA)
    unobserved = arms.request(engine, candidate, kind="unobserved", index=0)
    arms.registry.stop(engine)
    checks = record(arms, judge_candidate(plan.track_id, candidate, contract, baseline, watched,
                                          unobserved))
    if b0_captures is not None:
        checks += localization(arms, candidate, checks, baseline, watched, b0_captures)
    return checks


def localization(arms: Arms, candidate: str, checks: Sequence[AnyCheck], baseline: Baseline,
                 watched: Outcome, b0_captures: dict[tuple[Any, ...], Any]
                 ) -> list[AnyCheck]:
    """The localization pass (localize/) when the gate failed on bit-exactness, once every
    instance of the gate is stopped: its one check, recorded; nothing when the gate did not."""
    from ref2va_accept.judging.localize import equal_before, failed_gate, localize  # noqa: PLC0415 - a failed gate

    table = failed_gate(checks)
    point = None if table is None else table.first_divergence
    if table is None or point is None or watched.sample.seed is None:
        return []
    dumps = baseline.watched.dump_dir, watched.dump_dir
    return [localize(arms, candidate, point, watched.sample.seed,
                     None if None in dumps else dumps,  # type: ignore[arg-type]
                     b0_captures, equal_before(table))]


class LosslessGateRunner(BaselineGateRunner[Baseline]):
    """The lossless gate as the scenarios run it (gates.QualityGate); B0 made once per track."""

    name = "lossless"

    def make_baseline(self, arms: Arms) -> Baseline:
        return run_baseline(arms, self.baselines.gate_runs(arms))

    def host(self, candidate: str) -> HostedGate:
        return HostedGate(self, candidate)

    def judge(self, arms: Arms, candidate: str, baseline: Baseline) -> Sequence[AnyCheck]:
        baselines = self.baselines
        return run_candidate(arms, candidate, baseline,
                             baselines.localize_b0 if baselines.localize else None)


class HostedGate(GateOnInstance[Baseline]):
    """The lossless gate on the candidate's first latency instance (latency_run.GateHost): the
    watched request before the warm-ups, judged against B0 at once; the unobserved output is
    the instance's first measured request (the same request, timed and never watched), or an
    unobserved request of its own when no measured one came back (a gate that stopped the
    instance, a warm-up that failed). None of its requests is a warm-up: the watched one dumps
    the comparison points, so its timing is not one."""

    def __init__(self, runner: LosslessGateRunner, candidate: str) -> None:
        super().__init__(runner, candidate)
        self.watched: Outcome | None = None

    def before(self, arms: Arms, engine: EngineInstance) -> list[AnyCheck]:
        plan = arms.plan
        baseline = self.runner.made(arms)
        self.watched = arms.request(engine, self.candidate, kind="quality", index=0,
                                    seed=plan.seeds[0],
                                    diagnostics_points=plan.lossless.diagnostics,
                                    record_check=Check.CANDIDATE_MEDIA)
        return record(arms, judge_gate(plan.track_id, self.candidate, plan.lossless, baseline,
                                       self.watched))

    def after(self, arms: Arms, engine: EngineInstance, run: InstanceRun) -> list[AnyCheck]:
        plan = arms.plan
        watched = self.watched
        if watched is None or not watched.sample.ok:
            return []  # the gate check already says the request failed
        measured = [o for o in run.measured if o.sample.ok and o.media_path is not None
                    and o.sample.seed == watched.sample.seed]
        unobserved = measured[0] if measured else arms.request(
            engine, self.candidate, kind="unobserved", index=0, seed=watched.sample.seed)
        check = judge_unobserved(plan.track_id, self.candidate, plan.lossless, watched,
                                 unobserved)
        return record(arms, [check.revised(
            unobserved_request="measured" if measured else "unobserved")])

    def settle(self, arms: Arms, run: InstanceRun) -> list[AnyCheck]:
        """Once the instance is stopped: the localization pass, when the gate failed on
        bit-exactness (it starts instances of its own)."""
        baselines = self.runner.baselines
        if self.watched is None or not baselines.localize:
            return []
        return localization(arms, self.candidate, run.gate, self.runner.made(arms),
                            self.watched, baselines.localize_b0)
