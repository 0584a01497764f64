"""B0 beside a candidate, in the manner of an operator-level compare: which operators got faster
or slower, which are gone or new, and how communication, copies, the step's split and memory
moved. Evidence for the candidate's claimed mechanism (a cache that skips DiT work should show
fewer attention and matmul kernels, a sequence-parallel change more communication), never a
verdict.

Per figure the basis is a rank's mean over the ranks both arms profiled (a rank profiled by one
arm only is named in the notes, not averaged in), and per step where a figure is a step's.
An operator is the same where its time moved by less than 5% or 0.01 ms.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from statistics import fmean
from typing import Literal, TypeAlias

from ref2va_accept.evidence import (
    ArmComparison,
    FigureDelta,
    OperatorDelta,
    Profile,
    RankProfile,
)

__all__ = ["SAME_FRACTION", "SAME_MS", "compare"]

Change: TypeAlias = Literal["faster", "slower", "same", "gone", "new"]
SAME_FRACTION = 0.05
SAME_MS = 0.01
OPERATORS = 40
MIB = 2**20


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(fmean(present), 3) if present and len(present) == len(values) else None


def _delta(figure: str, b0: float | None, cand: float | None) -> FigureDelta:
    return FigureDelta(figure=figure, b0=b0, candidate=cand,
                       delta=None if b0 is None or cand is None else round(cand - b0, 3))


def _per_rank(ranks: Sequence[RankProfile], read: Callable[[RankProfile], float | None]
              ) -> float | None:
    return _mean([read(r) for r in ranks])


def _step_mean(rank: RankProfile, field: str) -> float | None:
    values = [getattr(s, field) for s in rank.step_times]
    return fmean(values) if values and None not in values else None


def _operators(b0: Sequence[RankProfile], cand: Sequence[RankProfile]) -> list[OperatorDelta]:
    def table(ranks: Sequence[RankProfile]) -> dict[tuple[str, str, str | None],
                                                     tuple[float, list[str]]]:
        sums: dict[tuple[str, str, str | None], float] = defaultdict(float)
        shapes: dict[tuple[str, str, str | None], list[str]] = defaultdict(list)
        for rank in ranks:
            for op in rank.operator_totals:
                key = (op.kind, op.name, op.core)
                sums[key] += float(op.ms)
                shapes[key] += [s for s in op.shapes if s not in shapes[key]]
        return {k: (v / len(ranks), shapes[k][:3]) for k, v in sums.items()}

    before, after = table(b0), table(cand)
    rows = []
    for key in set(before) | set(after):
        _, name, core = key
        old, new = before.get(key), after.get(key)
        old_ms = None if old is None else round(old[0], 3)
        new_ms = None if new is None else round(new[0], 3)
        delta = (new_ms or 0.0) - (old_ms or 0.0)
        change: Change
        if old_ms is None:
            change = "new"
        elif new_ms is None:
            change = "gone"
        elif abs(delta) < max(SAME_MS, SAME_FRACTION * old_ms):
            change = "same"
        else:
            change = "faster" if delta < 0 else "slower"
        rows.append(OperatorDelta(
            name=name, core=core, b0_ms=old_ms, candidate_ms=new_ms, delta_ms=round(delta, 3),
            ratio=round(new_ms / old_ms, 4) if old_ms and new_ms is not None else None,
            change=change, b0_shapes=[] if old is None else old[1],
            candidate_shapes=[] if new is None else new[1]))
    rows.sort(key=lambda r: (-abs(float(r.delta_ms)), r.name))
    return rows[:OPERATORS]


def _ops_by_name(ranks: Sequence[RankProfile]) -> dict[str, float]:
    sums: dict[str, float] = defaultdict(float)
    for rank in ranks:
        for op in rank.communication.ops:
            sums[op.name] += float(op.elapse_ms) / len(ranks)
    return sums


def _copies(ranks: Sequence[RankProfile], direction: str, what: str) -> float | None:
    values: list[float | None] = []
    for rank in ranks:
        if rank.copies.status != "measured":
            values.append(None)
            continue
        found = [d for d in rank.copies.directions if d.direction == direction]
        if what == "MiB":
            values.append(None if any(d.bytes is None for d in found)
                          else sum(d.bytes or 0 for d in found) / MIB)
        else:
            values.append(float(sum(getattr(d, what) for d in found)))
    return _mean(values)


def compare(b0: Profile, candidate: Profile) -> ArmComparison:
    """The candidate's profile beside B0's (same track)."""
    first = {r.rank: r for r in b0.ranks}
    second = {r.rank: r for r in candidate.ranks}
    common = sorted(set(first) & set(second))
    notes = []
    for arm, only in ((b0.arm, set(first) - set(second)),
                      (candidate.arm, set(second) - set(first))):
        if only:
            notes.append(f"rank(s) {', '.join(map(str, sorted(only)))} profiled by {arm} only: "
                         "left out of every mean")
    sources = {r.source for r in first.values()} | {r.source for r in second.values()}
    if len(sources) > 1:
        notes.append("the arms' profiles come from different writers "
                     f"({', '.join(sorted(sources))}): their operators are not named alike")
    a = [first[r] for r in common]
    c = [second[r] for r in common]
    if not common:
        notes.append("no rank was profiled by both arms: nothing to compare")
        return ArmComparison(baseline=b0.arm, candidate=candidate.arm, ranks_compared=[],
                             basis="none", step_time=[], operators=[], communication=[],
                             copies=[], memory=[], notes=notes)
    steps = {len(r.step_times) for r in a + c}
    if len(steps) > 1:
        notes.append("the arms profiled different numbers of steps per rank: step figures are "
                     "means per step")
    def steps_of(ranks: Sequence[RankProfile], field: str) -> float | None:
        return _mean([_step_mean(r, field) for r in ranks])

    step_time = [_delta(f"{label} (ms per step)", steps_of(a, f), steps_of(c, f))
                 for label, f in (("step", "total_ms"), ("computing", "computing_ms"),
                                  ("communication not overlapped",
                                   "communication_not_overlapped_ms"),
                                  ("overlapped", "overlapped_ms"), ("copies", "copies_ms"),
                                  ("free", "free_ms"))]
    comm = [_delta("communication (ms)", _per_rank(a, lambda r: r.communication.ms),
                   _per_rank(c, lambda r: r.communication.ms)),
            _delta("communication not overlapped (ms)",
                   _per_rank(a, lambda r: r.communication.not_overlapped_ms),
                   _per_rank(c, lambda r: r.communication.not_overlapped_ms))]
    before, after = _ops_by_name(a), _ops_by_name(c)
    comm += [_delta(f"{name} (ms)", round(before[name], 3) if name in before else None,
                    round(after[name], 3) if name in after else None)
             for name in sorted(set(before) | set(after),
                                key=lambda n: -max(before.get(n, 0.0), after.get(n, 0.0)))]
    copies = [_delta(f"{d} {what}", _copies(a, d, what), _copies(c, d, what))
              for d in ("H2D", "D2H", "D2D", "other") for what in ("ms", "MiB", "count")
              if any(x.direction == d for r in a + c for x in r.copies.directions)]
    memory = []
    for figure in ("allocated_peak", "reserved_peak", "active_peak"):
        def peak(r: RankProfile, figure: str = figure) -> float | None:
            found = [m.bytes for m in r.memory if m.figure == figure]
            return max(found) / MIB if found else None
        if any(peak(r) is not None for r in a + c):
            memory.append(_delta(f"{figure} (MiB, the rank's largest)",
                                 _per_rank(a, peak), _per_rank(c, peak)))
    return ArmComparison(
        baseline=b0.arm, candidate=candidate.arm, ranks_compared=common,
        basis=f"a rank's mean over rank(s) {', '.join(map(str, common))}, profiled by both",
        step_time=step_time, operators=_operators(a, c), communication=comm, copies=copies,
        memory=memory, notes=notes)
