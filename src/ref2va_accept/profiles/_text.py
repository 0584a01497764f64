"""An arm's profile as plain text, for ``ref2va-accept profile``: the same figures the report
shows (coverage, the step split, top operators with shapes, communication, copies, memory with
definitions, and B0 beside the candidate)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ref2va_accept.evidence import MEMORY_DEFINITIONS, ArmComparison, FigureDelta, Profile

__all__ = ["profile_lines"]


def _n(value: Any, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def _share(value: Any) -> str:
    return "-" if value is None else f"{float(value):.1%}"


def _deltas(title: str, deltas: Sequence[FigureDelta]) -> list[str]:
    if not deltas:
        return []
    return [f"  {title}:"] + [f"    {d.figure}: B0 {_n(d.b0)}, candidate {_n(d.candidate)}, "
                              f"difference {_n(d.delta, '+.2f')}" for d in deltas]


def _comparison(c: ArmComparison) -> list[str]:
    lines = [f"{c.candidate} beside {c.baseline} ({c.basis}; evidence, not a verdict)"]
    lines += [f"  note: {n}" for n in c.notes]
    lines += _deltas("where the step went", c.step_time)
    lines.append("  operators that moved most (ms per rank):")
    lines += [f"    {o.change:6} {o.name} [{o.core or '-'}]: B0 {_n(o.b0_ms)}, candidate "
              f"{_n(o.candidate_ms)} ({_n(o.delta_ms, '+.2f')}, ratio {_n(o.ratio, '.3f')})"
              for o in c.operators[:15]]
    lines += _deltas("communication", c.communication)
    lines += _deltas("host-device copies", c.copies)
    lines += _deltas("memory", c.memory)
    return lines


def profile_lines(entry: Profile, top: int = 10) -> list[str]:
    """The arm's profile as lines of text (no trailing newlines)."""
    lines = [f"{entry.track} {entry.arm}: {entry.status}; ranks expected "
             f"{entry.ranks_expected}, profiled {entry.ranks_found}"]
    lines += [f"  open: {p}" for p in entry.problems]
    lines += [f"  rank {c.rank}: {c.status}" + (f", steps {', '.join(c.steps)}" if c.steps else "")
              + (f" ({c.note})" if c.note else "") for c in entry.coverage]
    for r in entry.ranks:
        comm, copies = r.communication, r.copies
        lines.append(f"rank {r.rank} ({r.source}): {r.operators} operator calls over "
                     f"{_n(r.window_ms, '.1f')} ms")
        for s in r.step_times:
            lines.append(f"  step {s.step}: {_n(s.total_ms, '.1f')} ms = computing "
                         f"{_n(s.computing_ms, '.1f')} + communication not overlapped "
                         f"{_n(s.communication_not_overlapped_ms, '.1f')} + free "
                         f"{_n(s.free_ms, '.1f')} (overlapped {_n(s.overlapped_ms, '.1f')}, "
                         f"copies {_n(s.copies_ms, '.1f')})")
        lines.append("  top operators:")
        lines += [f"    {_n(o.ms, '10.2f')} ms {_share(o.share):>6} {o.calls:6}x {o.name} "
                  f"[{o.core or o.kind}] in {o.input_shapes or '-'} {o.input_dtypes or ''}"
                  .rstrip() for o in r.top_operators[:top]]
        lines += [f"  framework operator {o.name} in {o.input_shapes or '-'}: device self "
                  f"{_n(o.ms)} ms over {o.calls} calls" for o in r.framework_operators[:3]]
        link = comm.slowest_link
        lines.append(f"  communication ({comm.status}): {_n(comm.ms)} ms, not overlapped "
                     f"{_n(comm.not_overlapped_ms)} ms ({_share(comm.share_not_overlapped)} of "
                     "the step)" + ("" if link is None else
                                    f"; slowest link {link.link} {link.transport} "
                                    f"{_n(link.bandwidth_gb_s)} GB/s"))
        lines += [f"    {o.name}: {o.calls} calls, elapse {_n(o.elapse_ms)} ms, transit "
                  f"{_n(o.transit_ms)}, wait {_n(o.wait_ms)}, synchronization "
                  f"{_n(o.synchronization_ms)}" for o in comm.ops]
        lines.append(f"  host-device copies ({copies.status}): {_n(copies.ms)} ms, "
                     f"{_share(copies.share)} of the step, overlapped "
                     f"{_n(copies.overlapped_ms)} ms")
        lines += [f"    {d.direction}: {d.count} copies, "
                  f"{'-' if d.bytes is None else d.bytes} bytes, {_n(d.ms)} ms"
                  for d in copies.directions]
        lines += [f"  memory {m.figure} on {m.device}: {m.bytes / 2**20:.1f} MiB"
                  for m in r.memory]
        lines += [f"  allocation {a.name}: {a.bytes / 2**20:.1f} MiB"
                  for a in r.largest_allocations[:5]]
        lines += [f"  note: {n}" for n in (comm.note, copies.note, *r.notes) if n]
        lines += [f"  open: {p}" for p in r.problems]
    if any(r.memory for r in entry.ranks):
        lines.append("memory figures:")
        lines += [f"  {k}: {v}" for k, v in MEMORY_DEFINITIONS.items()]
    if entry.comparison is not None:
        lines += _comparison(entry.comparison)
    return lines
