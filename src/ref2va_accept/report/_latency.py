"""The report's latency section: per candidate, the instances as they ran and the interval.

For each latency comparison a reviewer sees the unit of replication the interval used, every
instance in the order it was started (its warm-ups, whether they reached the steady state, its
measured and distinct requests, its one value), the interval against the target, B0's spread
between instances next to its spread within an instance, and B0's drift. Everything is read from
the latency check the runner recorded (judging/_latency.py), through its typed record
(records.LatencyRatioCheck); nothing is decided here.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from ref2va_accept.core import ArmRole, DecisionRule, Unit
from ref2va_accept.evidence import (
    Bundle,
    EvidenceBundle,
    LatencyData,
    LatencyInstance,
    LatencyRatioCheck,
    LatencyStopped,
    LatencySummary,
    Spread,
)
from ref2va_accept.report._cells import TABLE, VERDICT_COLOURS, cells, number, ratio_text

LatencyRecord = LatencyData | LatencyStopped


def _seconds(values: Iterable[float | None]) -> str:
    shown = [f"{v:.3f}" for v in values if isinstance(v, (int, float))]
    return ", ".join(shown) or "-"


def _unit_text(data: LatencyRecord) -> str:
    if isinstance(data, LatencyData) and data.unit == Unit.INSTANCE:
        shared = data.baseline_shared_with
        b0 = f"; B0's instances shared with {', '.join(shared)}" if shared else ""
        tracks = data.baseline_tracks
        if tracks is not None and len(tracks) > 1:
            b0 += (f" (one B0 for the tracks {' + '.join(tracks)}: the same server "
                   "asked the same timed request)")
        return (f"unit: server instance ({data.instances_per_arm} fresh instances per "
                f"arm, one value each: the median of its measured requests{b0})")
    if isinstance(data, LatencyData) and data.unit == Unit.REQUEST:
        return (f"unit: request ({data.design}; every measured request a sample, so the "
                "interval speaks of variation inside an instance only)")
    return "unit: not recorded"


def _instances_table(instances: Sequence[LatencyInstance], candidate: str) -> str:
    rows = []
    for i in instances:
        steady = "yes" if i.steady else "NO"
        rows.append(
            "<tr" + (" style='background:#f6f8fa'" if i.arm == ArmRole.B0 else "") + ">"
            + cells((i.position, "B0" if i.arm == ArmRole.B0 else candidate + (
                " (its quality gate first)" if i.hosted_gate else ""),
                     _seconds(i.warmups_s), steady, _seconds(i.measured_s),
                     _seconds(i.distinct_s), number(i.value_s, ".3f")))
            + "</tr>")
    return (f"<table class='ref2va-instances' {TABLE}><tr>"
            + cells((
                "#", "arm", "warm-ups s", "steady", "measured s", "distinct s (caching probe)",
                "value s"), "th")
            + "</tr>" + "".join(rows) + "</table>")


ARM_COLOURS = {ArmRole.B0: "#57606a", "candidate": "#bc4c00"}


def latency_svg(instances: Sequence[LatencyInstance], candidate: str) -> str:
    """Every request of the comparison as a point: x is the instance's position in the order it
    was started (B0's before and after the candidate's show), y its latency; warm-ups hollow,
    measured requests filled, caching-probe requests as crosses. Inline SVG, no script."""
    points: list[tuple[float, float, str, str]] = []  # x, seconds, arm, kind
    offsets = {"warm-up": -0.3, "measured": 0.0, "distinct": 0.25}
    positions: list[float] = []
    for instance in instances:
        x = float(instance.position)
        arm = ArmRole.B0 if instance.arm == ArmRole.B0 else "candidate"
        positions.append(x)
        for kind, values in (("warm-up", instance.warmups_s), ("measured", instance.measured_s),
                             ("distinct", instance.distinct_s)):
            for j, value in enumerate(values):
                points.append((x + offsets[kind] + j * 0.1, float(value), arm, kind))
    if not points:
        return ""
    width, height, left, bottom, top = 440, 180, 44, 30, 8
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs) - 0.5, max(xs) + 0.5
    y1 = max(ys) * 1.08
    sx = (width - left - 8) / ((x1 - x0) or 1.0)
    sy = (height - bottom - top) / (y1 or 1.0)

    def at(x: float, y: float) -> tuple[float, float]:
        return left + (x - x0) * sx, height - bottom - y * sy

    marks = []
    for x, y, arm, kind in points:
        px, py = at(x, y)
        colour = ARM_COLOURS[arm]
        who = "B0" if arm == ArmRole.B0 else candidate
        title = f"<title>{html.escape(who)} {kind} {y:.3f} s</title>"
        if kind == "distinct":
            marks.append(f"<path d='M{px - 3:.1f},{py - 3:.1f}l6,6m0,-6l-6,6' stroke='{colour}'>"
                         f"{title}</path>")
        else:
            fill = colour if kind == "measured" else "none"
            marks.append(f"<circle cx='{px:.1f}' cy='{py:.1f}' r='3' stroke='{colour}' "
                         f"fill='{fill}'>{title}</circle>")
    ticks = []
    for fraction in (0.0, 0.5, 1.0):
        value = y1 / 1.08 * fraction
        _, py = at(x0, value)
        ticks.append(f"<text x='{left - 4}' y='{py + 3:.1f}' text-anchor='end' "
                     f"font-size='9'>{value:.1f}</text>")
    base_y = height - bottom
    for x in positions:
        px, _ = at(x, 0.0)
        ticks.append(f"<text x='{px:.1f}' y='{base_y + 10}' text-anchor='middle' "
                     f"font-size='9'>{x:g}</text>")
    label = f"latency per request of B0 and {candidate}, by instance in start order"
    return (f"<svg class='ref2va-latency-chart' width='{width}' height='{height}' role='img' "
            f"aria-label='{html.escape(label)}' style='border:1px solid #ccc'>"
            f"<line x1='{left}' y1='{base_y}' x2='{width - 8}' y2='{base_y}' stroke='#999'/>"
            f"<line x1='{left}' y1='{top}' x2='{left}' y2='{base_y}' stroke='#999'/>"
            + "".join(ticks) + "".join(marks)
            + f"<text x='{left}' y='{height - 6}' font-size='9'>instances in start order; s; "
            f"<tspan fill='{ARM_COLOURS[ArmRole.B0]}'>B0</tspan> / "
            f"<tspan fill='{ARM_COLOURS['candidate']}'>{html.escape(candidate)}</tspan>; "
            "hollow warm-up, filled measured, x caching probe</text></svg>")


def latency_cell(check: LatencyRatioCheck | None) -> str:
    """The verdict table's latency cell: ratio of medians, interval and target, or why none."""
    if check is None:
        return "-"
    summary = LatencySummary.of(check)
    data = check.data
    if summary is None and isinstance(data, LatencyStopped) and data.stopped_on:
        # a quality check stopped it before any instance started
        return (f"<span style='color:#9a6700'>not measured: stopped on "
                f"{html.escape(data.stopped_on)}</span>")
    if summary is None:
        return ("<span style='color:#9a6700'>not decided: "
                f"{html.escape(check.reason or 'no interval')}</span>")
    colour = VERDICT_COLOURS.get(str(summary.verdict), "#000")
    return f"<span style='color:{colour}'>{html.escape(ratio_text(summary))}</span>"


def _spread_text(data: LatencyRecord) -> str:
    none = Spread(between_instances=None, within_instance=None, instances=0)
    b0 = data.b0_spread if isinstance(data, LatencyData) else none
    cand = data.candidate_spread if isinstance(data, LatencyData) else none
    drift = data.drift if isinstance(data, LatencyData) else None
    return ("B0 spread (sd / mean): between instances "
            f"{number(b0.between_instances, '.2%')}, within an instance "
            f"{number(b0.within_instance, '.2%')} "
            f"({b0.instances} instances); candidate: between "
            f"{number(cand.between_instances, '.2%')}, within "
            f"{number(cand.within_instance, '.2%')}. B0 drift, first to last: "
            + number(drift, ".2%"))


def _interval_text(data: LatencyRecord) -> str:
    latency = data.interval if isinstance(data, LatencyData) else None
    if latency is None:
        return "no interval: the protocol ended before a decision (see the check's reason)"
    interval = latency.interval
    verdict = str(latency.verdict)
    colour = VERDICT_COLOURS.get(verdict, "#000")

    def bound(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    if interval.rule == DecisionRule.WELCH:
        how = (f"Welch interval on log values [{bound(interval.lower)}, "
               f"{bound(interval.upper)}] at {interval.confidence} per end (df "
               f"{number(interval.df, '.2f')}, {interval.n_baseline} B0 and "
               f"{interval.n_candidate} candidate values)")
    else:
        how = (f"ratio interval [{bound(interval.lower)}, {bound(interval.upper)}] at "
               f"{interval.confidence} per end (k = {interval.k}, "
               f"{interval.n_baseline} B0 and {interval.n_candidate} candidate "
               "values)")
    reasons = ", ".join(str(r) for r in latency.reasons)
    futile = data.futility if isinstance(data, LatencyData) else None
    stop = (f"; stopped after instance #{futile.stopped_after_position}, "
            f"{futile.own_instances_not_started} of its instances not started: "
            "supported was out of reach" if futile is not None else "")
    return (f"<b style='color:{colour}'>{html.escape(verdict.upper())}</b>: {how} against "
            f"target {latency.target}; ratio of medians "
            f"{latency.ratio_of_medians:.3f}; p-value of ratio &gt;= target "
            f"{number(latency.p_value, '.4f')}; {html.escape(reasons)}"
            f"{html.escape(stop)}")


def latency_tables_html(bundle: EvidenceBundle | Bundle) -> str:
    record = bundle.record if isinstance(bundle, EvidenceBundle) else bundle
    parts = []
    for check in record.checks_of(LatencyRatioCheck):
        data = check.data
        rule = data.warmup_rule if isinstance(data, LatencyData) else None
        steady = None if rule is None else rule.steady_fraction
        warm = (f"warm-ups: {rule.min} to {rule.max}, until the last two agree "
                f"within {steady:.0%}" if rule is not None and steady is not None
                else f"warm-ups: {None if rule is None else rule.min} (a fixed count)")
        reason = check.reason
        parts.append(
            f"<h4>{html.escape(check.track)} / {html.escape(check.arm)}: latency "
            + (f"<span style='color:#9a6700'>not decided: {html.escape(str(reason))}</span>"
               if reason else "")
            + f"</h4><p>{_interval_text(data)}<br><small>{html.escape(_unit_text(data))}; "
            f"{html.escape(warm)}</small><br>{html.escape(_spread_text(data))}</p>"
            f"<p>{html.escape(check.detail)}</p>"
            + latency_svg(data.instances if isinstance(data, LatencyData) else [], check.arm)
            + _instances_table(data.instances if isinstance(data, LatencyData) else [],
                               check.arm))
    return ("<h3>Latency: instances and intervals</h3>" + "".join(parts)) if parts else ""
