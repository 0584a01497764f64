"""The report's "Profiles" section: per track and arm, which ranks profiled which steps, where
each step's time went (a stacked bar per rank and step: computing, communication not
overlapped, free, with the copies beneath), the top operators with shapes per rank, communication
and host-device copies, memory with its definitions, and a candidate beside B0. Profiles are
evidence, not gates."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

from ref2va_accept.evidence import (
    MEMORY_DEFINITIONS,
    ArmComparison,
    Bundle,
    EvidenceBundle,
    FigureDelta,
    Profile,
    RankProfile,
    StepTime,
)
from ref2va_accept.report._cells import TABLE, cells, number

__all__ = ["profile_html", "profiles_html", "step_bars_svg"]

SEGMENTS = (("computing", "#4c72b0"), ("communication not overlapped", "#dd8452"),
            ("free", "#cccccc"))
COPIES = "#55a868"
CHANGE_COLOURS = {"faster": "#1a7f37", "slower": "#cf222e", "gone": "#1a7f37", "new": "#9a6700",
                  "same": "#57606a"}


def _e(value: Any) -> str:
    return html.escape(str(value))


def _table(head: Sequence[str], rows: Iterable[Sequence[Any]], css: str = "") -> str:
    body = "".join(f"<tr>{cells(row)}</tr>" for row in rows)
    return (f"<table class='ref2va-profile{css}' {TABLE}><tr>{cells(head, 'th')}</tr>"
            f"{body}</table>")


def _share(value: Any) -> str:
    return "-" if value is None else f"{float(value):.1%}"


def step_bars_svg(ranks: Sequence[RankProfile]) -> str:
    """One horizontal bar per rank and step, to one scale: computing, communication not
    overlapped and free (which add up to the step), the copies' time as a thin bar beneath."""
    bars: list[tuple[str, StepTime]] = [
        (f"rank {r.rank}" + ("" if s.step == "window" else f" step {s.step}"), s)
        for r in ranks for s in r.step_times]
    if not bars:
        return "<p>No step split: the profile holds no step times.</p>"
    longest = max(float(s.total_ms) for _, s in bars) or 1.0
    width, label_w, row_h = 640, 150, 22
    parts = []
    for index, (label, step) in enumerate(bars):
        y = index * row_h + 4
        x = float(label_w)
        parts.append(f"<text x='0' y='{y + 12}' font-size='11'>{_e(label)}</text>")
        for (name, colour), value in zip(
                SEGMENTS, (step.computing_ms, step.communication_not_overlapped_ms,
                           step.free_ms), strict=True):
            w = float(value) / longest * width
            parts.append(f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='12' "
                         f"fill='{colour}'><title>{_e(label)}: {_e(name)} "
                         f"{float(value):.1f} ms</title></rect>")
            x += w
        if step.copies_ms:
            w = float(step.copies_ms) / longest * width
            parts.append(f"<rect x='{label_w}' y='{y + 13}' width='{w:.1f}' height='4' "
                         f"fill='{COPIES}'><title>{_e(label)}: host-device copies "
                         f"{float(step.copies_ms):.1f} ms</title></rect>")
        parts.append(f"<text x='{x + 4:.1f}' y='{y + 11}' font-size='10'>"
                     f"{float(step.total_ms):.0f} ms</text>")
    legend_y = len(bars) * row_h + 14
    legend = "".join(
        f"<rect x='{label_w + i * 190}' y='{legend_y - 9}' width='10' height='10' "
        f"fill='{colour}'/><text x='{label_w + 14 + i * 190}' y='{legend_y}' "
        f"font-size='11'>{_e(name)}</text>"
        for i, (name, colour) in enumerate([*SEGMENTS, ("host-device copies", COPIES)]))
    height = legend_y + 8
    return (f"<svg class='ref2va-step-bars' xmlns='http://www.w3.org/2000/svg' "
            f"width='{label_w + width + 60}' height='{height}' role='img' "
            f"aria-label='where each step went, per rank'>{''.join(parts)}{legend}</svg>")


def _coverage_html(entry: Profile) -> str:
    return _table(("rank", "status", "steps", "note"),
                  ((c.rank, c.status, ", ".join(c.steps) or "-", c.note or "")
                   for c in entry.coverage))


def _ranks_html(ranks: Sequence[RankProfile]) -> str:
    rows = []
    for r in ranks:
        comm, copies = r.communication, r.copies
        link = comm.slowest_link
        rows.append((
            r.rank, r.source, f"{float(r.window_ms):.1f}", len(r.steps),
            "-" if comm.ms is None else f"{float(comm.ms):.1f}",
            _share(comm.share_not_overlapped),
            "-" if link is None else (f"{link.link} {link.transport} "
                                      f"{float(link.bandwidth_gb_s):.1f} GB/s"),
            ("-" if copies.ms is None else f"{float(copies.ms):.1f}") + f" ({copies.status})",
            _share(copies.share)))
    return _table(("rank", "source", "window ms", "steps", "communication ms",
                   "not overlapped (of the step)", "slowest link", "copies ms", "copies share"),
                  rows)


def _rank_detail(r: RankProfile) -> str:
    top = _table(("kind", "operator", "core", "input shapes", "input dtypes", "calls", "ms",
                  "share", "kernels"),
                 ((o.kind, o.name, o.core or "-", o.input_shapes or "-", o.input_dtypes or "-",
                   o.calls, f"{float(o.ms):.2f}", _share(o.share), ", ".join(o.kernels[:3]))
                  for o in r.top_operators))
    framework = "" if not r.framework_operators else (
        "<p>Framework operators by device self time:</p>" + _table(
            ("operator", "input shapes", "calls", "device self ms"),
            ((o.name, o.input_shapes or "-", o.calls, f"{float(o.ms):.2f}")
             for o in r.framework_operators)))
    comm = r.communication
    comm_html = (_table(("operation", "calls", "elapse ms", "transit ms", "wait ms",
                         "synchronization ms"),
                        ((o.name, o.calls, number(o.elapse_ms, ".2f"), number(o.transit_ms, ".2f"),
                          number(o.wait_ms, ".2f"), number(o.synchronization_ms, ".2f"))
                         for o in comm.ops))
                 if comm.ops else f"<p>Communication: {_e(comm.status)}.</p>")
    copies = r.copies
    copies_html = (_table(("direction", "count", "bytes", "ms"),
                          ((d.direction, d.count, "-" if d.bytes is None else d.bytes,
                            f"{float(d.ms):.2f}") for d in copies.directions))
                   if copies.directions else "")
    notes = [n for n in (comm.note, copies.note) if n] + r.notes
    memory = _table(("figure", "device", "MiB"),
                    ((m.figure, m.device, f"{m.bytes / 2**20:.1f}") for m in r.memory))
    allocations = "" if not r.largest_allocations else (
        "<p>Largest allocations by an operator:</p>" + _table(
            ("operator", "MiB", "held ms"),
            ((a.name, f"{a.bytes / 2**20:.1f}", number(a.duration_ms, ".1f"))
             for a in r.largest_allocations)))
    problems = "".join(f"<li class='ref2va-open'>{_e(p)}</li>" for p in r.problems)
    files = ", ".join(f"<a href='{_e(f.file)}'>{_e(f.file.rsplit('/', 1)[-1])}</a>"
                      for f in r.files)
    return (f"<details{' open' if r.problems else ''}><summary>rank {r.rank}: {r.operators} "
            f"operator calls over {float(r.window_ms):.1f} ms, steps {_e(', '.join(r.steps))}"
            f"</summary><p>Read from {files}.</p>"
            + (f"<ul>{problems}</ul>" if problems else "")
            + "<p>Top operators:</p>" + top + framework + "<p>Communication:</p>" + comm_html
            + f"<p>Host-device copies: {_e(copies.status)}.</p>" + copies_html
            + "<p>Memory:</p>" + memory + allocations
            + "".join(f"<p><small>{_e(n)}</small></p>" for n in notes) + "</details>")


def _deltas(title: str, deltas: Sequence[FigureDelta]) -> str:
    if not deltas:
        return ""
    return f"<p>{_e(title)}:</p>" + _table(
        ("figure", "B0", "candidate", "difference"),
        ((d.figure, number(d.b0, ".2f"), number(d.candidate, ".2f"), number(d.delta, "+.2f"))
         for d in deltas))


def _comparison_html(c: ArmComparison) -> str:
    rows = "".join(
        f"<tr><td><code>{_e(o.name)}</code></td><td>{_e(o.core or '-')}</td>"
        f"<td>{number(o.b0_ms, '.2f')}</td><td>{number(o.candidate_ms, '.2f')}</td>"
        f"<td>{number(o.delta_ms, '+.2f')}</td><td>{number(o.ratio, '.3f')}</td>"
        f"<td style='color:{CHANGE_COLOURS[o.change]}'>{_e(o.change)}</td>"
        f"<td>{_e('; '.join(o.b0_shapes[:1]) or '-')}</td>"
        f"<td>{_e('; '.join(o.candidate_shapes[:1]) or '-')}</td></tr>"
        for o in c.operators)
    notes = "".join(f"<li>{_e(n)}</li>" for n in c.notes)
    return (f"<h4>{_e(c.candidate)} beside {_e(c.baseline)}</h4><p>{_e(c.basis)}. Evidence "
            "for the candidate's mechanism, not a verdict.</p>"
            + (f"<ul>{notes}</ul>" if notes else "")
            + _deltas("Where the step went", c.step_time)
            + "<p>Operators that moved most (device time per rank over the window):</p>"
            + f"<table class='ref2va-profile ref2va-compare' {TABLE}><tr>"
            + cells(("operator", "core", "B0 ms", "candidate ms", "difference", "ratio",
                     "change", "B0 shape", "candidate shape"), "th")
            + f"</tr>{rows}</table>"
            + _deltas("Communication", c.communication) + _deltas("Host-device copies", c.copies)
            + _deltas("Memory", c.memory))


def profile_html(entry: Profile, heading: str = "h3") -> str:
    """One arm's profile: coverage, step split, per-rank summary and detail, comparison."""
    profiled = entry.profiled
    request = "" if profiled is None else (
        f" Profiled request {number(profiled.latency_s, '.2f')} s; server peak memory "
        f"{number(profiled.server_peak_memory_mb.value, 'g')} MB <small>"
        f"({_e(profiled.server_peak_memory_mb.definition)})</small>.")
    warmups = ", ".join(number(w, ".2f") for w in entry.warmups if w is not None)
    problems = "".join(f"<li class='ref2va-open'>{_e(p)}</li>" for p in entry.problems)
    return (f"<{heading}>{_e(entry.track)} {_e(entry.arm)}: {_e(entry.status)}</{heading}>"
            f"<p>Instance {_e(entry.instance)}; ranks expected {entry.ranks_expected}, "
            f"profiled {entry.ranks_found}."
            + (f" Warm-ups {warmups} s." if warmups else "") + request + "</p>"
            + (f"<ul>{problems}</ul>" if problems else "")
            + _coverage_html(entry)
            + step_bars_svg(entry.ranks)
            + (_ranks_html(entry.ranks) if entry.ranks else "")
            + "".join(_rank_detail(r) for r in entry.ranks)
            + (_comparison_html(entry.comparison) if entry.comparison is not None else
               "<p>No B0 profile of this track in this run to set it beside.</p>"
               if entry.arm != "b0" else ""))


def _definitions() -> str:
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>"
                            for k, v in MEMORY_DEFINITIONS.items()) + "</dl>"


def profiles_html(bundle: EvidenceBundle | Bundle) -> str:
    record = bundle.record if isinstance(bundle, EvidenceBundle) else bundle
    entries = record.profiles or []
    if not entries:
        return ""
    return ("<h2>Profiles (one steady-state request per arm, never timed)</h2><p>Each arm "
            "profiled on an instance of its own after the protocol's warm-ups. Operators by "
            "device time (a Chrome trace's host operators by self time: their own, less what "
            "they called), with their shapes; a step's time split as torch_npu's overlap "
            "analysis splits it. A rank expected but not profiled is open, never averaged "
            "away. Open a Chrome trace in Perfetto (ui.perfetto.dev, Open trace file), a "
            "torch_npu folder in MindStudio Insight.</p><p>Memory figures:</p>"
            + _definitions() + "".join(profile_html(e) for e in entries))
