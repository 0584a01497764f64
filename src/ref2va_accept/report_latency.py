"""The report's latency section: per candidate, the instances as they ran and the interval.

For each latency comparison a reviewer sees the unit of replication the interval used, every
instance in the order it was started (its warm-ups, whether they reached the steady state, its
measured and distinct requests, its one value), the interval against the target, B0's spread
between instances next to its spread within an instance, and B0's drift. Everything is read from
the latency check the runner recorded (latency.py); nothing is decided here.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .evidence import EvidenceBundle
from .report_cells import TABLE, VERDICT_COLOURS, cells, latency_summary, number, ratio_text


def _seconds(values: Iterable[Any]) -> str:
    shown = [f"{v:.3f}" for v in values if isinstance(v, (int, float))]
    return ", ".join(shown) or "-"


def _unit_text(data: Mapping[str, Any]) -> str:
    if data.get("unit") == "instance":
        shared = data.get("baseline_shared_with")
        b0 = (f"; B0's instances shared with {', '.join(map(str, shared))}"
              if isinstance(shared, list) and shared else "")
        tracks = data.get("baseline_tracks")
        if isinstance(tracks, list) and len(tracks) > 1:
            b0 += (f" (one B0 for the tracks {' + '.join(map(str, tracks))}: the same server "
                   "asked the same timed request)")
        return (f"unit: server instance ({data.get('instances_per_arm')} fresh instances per "
                f"arm, one value each: the median of its measured requests{b0})")
    if data.get("unit") == "request":
        return (f"unit: request ({data.get('design')}; every measured request a sample, so the "
                "interval speaks of variation inside an instance only)")
    return "unit: not recorded"


def _instances_table(instances: Sequence[Mapping[str, Any]], candidate: str) -> str:
    rows = []
    for i in instances:
        arm = str(i.get("arm"))
        steady = "yes" if i.get("steady") else "NO"
        rows.append(
            "<tr" + (" style='background:#f6f8fa'" if arm == "b0" else "") + ">"
            + cells((i.get("position"), "B0" if arm == "b0" else candidate + (
                " (its quality gate first)" if i.get("hosted_gate") else ""),
                     _seconds(i.get("warmups_s") or []), steady,
                     _seconds(i.get("measured_s") or []), _seconds(i.get("distinct_s") or []),
                     number(i.get("value_s"), ".3f")))
            + "</tr>")
    return (f"<table class='ref2va-instances' {TABLE}><tr>"
            + cells((
                "#", "arm", "warm-ups s", "steady", "measured s", "distinct s (caching probe)",
                "value s"), "th")
            + "</tr>" + "".join(rows) + "</table>")


ARM_COLOURS = {"b0": "#57606a", "candidate": "#bc4c00"}


def latency_svg(instances: Sequence[Mapping[str, Any]], candidate: str) -> str:
    """Every request of the comparison as a point: x is the instance's position in the order it
    was started (B0's before and after the candidate's show), y its latency; warm-ups hollow,
    measured requests filled, caching-probe requests as crosses. Inline SVG, no script."""
    points: list[tuple[float, float, str, str]] = []  # x, seconds, arm, kind
    offsets = {"warm-up": -0.3, "measured": 0.0, "distinct": 0.25}
    positions: list[float] = []
    for index, instance in enumerate(instances):
        position = instance.get("position")
        x = float(position) if isinstance(position, (int, float)) else float(index)
        arm = "b0" if instance.get("arm") == "b0" else "candidate"
        positions.append(x)
        for kind, key in (("warm-up", "warmups_s"), ("measured", "measured_s"),
                          ("distinct", "distinct_s")):
            values = [v for v in instance.get(key) or [] if isinstance(v, (int, float))]
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
        title = f"<title>{html.escape('B0' if arm == 'b0' else candidate)} {kind} {y:.3f} s</title>"
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
            f"<tspan fill='{ARM_COLOURS['b0']}'>B0</tspan> / "
            f"<tspan fill='{ARM_COLOURS['candidate']}'>{html.escape(candidate)}</tspan>; "
            "hollow warm-up, filled measured, x caching probe</text></svg>")


def latency_cell(check: Mapping[str, Any] | None) -> str:
    """The verdict table's latency cell: ratio of medians, interval and target, or why none."""
    if check is None:
        return "-"
    summary = latency_summary(check)
    stopped = (check.get("data") or {}).get("stopped_on")
    if summary is None and stopped:  # a quality check stopped it before any instance started
        return (f"<span style='color:#9a6700'>not measured: stopped on "
                f"{html.escape(str(stopped))}</span>")
    if summary is None:
        reason = check.get("reason") or "no interval"
        return f"<span style='color:#9a6700'>not decided: {html.escape(str(reason))}</span>"
    colour = VERDICT_COLOURS.get(str(summary.get("verdict")), "#000")
    return f"<span style='color:{colour}'>{html.escape(ratio_text(summary))}</span>"


def _spread_text(data: Mapping[str, Any]) -> str:
    b0 = data.get("b0_spread") or {}
    cand = data.get("candidate_spread") or {}
    drift = data.get("drift")
    return ("B0 spread (sd / mean): between instances "
            f"{number(b0.get('between_instances'), '.2%')}, within an instance "
            f"{number(b0.get('within_instance'), '.2%')} "
            f"({b0.get('instances', 0)} instances); candidate: between "
            f"{number(cand.get('between_instances'), '.2%')}, within "
            f"{number(cand.get('within_instance'), '.2%')}. B0 drift, first to last: "
            + number(drift, ".2%"))


def _interval_text(data: Mapping[str, Any]) -> str:
    latency = data.get("interval")
    if not isinstance(latency, Mapping):
        return "no interval: the protocol ended before a decision (see the check's reason)"
    interval = latency.get("interval") or {}
    verdict = str(latency.get("verdict"))
    colour = VERDICT_COLOURS.get(verdict, "#000")

    def bound(key: str) -> str:
        value = interval.get(key)
        return "-" if value is None else f"{value:.3f}"

    if interval.get("rule") == "welch-log/1":
        how = (f"Welch interval on log values [{bound('lower')}, {bound('upper')}] at "
               f"{interval.get('confidence')} per end (df {number(interval.get('df'), '.2f')}, "
               f"{interval.get('n_baseline')} B0 and {interval.get('n_candidate')} candidate "
               "values)")
    else:
        how = (f"ratio interval [{bound('lower')}, {bound('upper')}] at "
               f"{interval.get('confidence')} per end (k = {interval.get('k')}, "
               f"{interval.get('n_baseline')} B0 and {interval.get('n_candidate')} candidate "
               "values)")
    reasons = ", ".join(str(r) for r in latency.get("reasons") or [])
    futile = data.get("futility")
    stop = (f"; stopped after instance #{futile.get('stopped_after_position')}, "
            f"{futile.get('own_instances_not_started')} of its instances not started: "
            "supported was out of reach" if isinstance(futile, Mapping) else "")
    return (f"<b style='color:{colour}'>{html.escape(verdict.upper())}</b>: {how} against "
            f"target {latency.get('target')}; ratio of medians "
            f"{latency.get('ratio_of_medians', 0):.3f}; p-value of ratio &gt;= target "
            f"{number(latency.get('p_value'), '.4f')}; {html.escape(reasons)}"
            f"{html.escape(stop)}")


def latency_tables_html(bundle: EvidenceBundle) -> str:
    parts = []
    for check in bundle.data["checks"]:
        if check["name"] != "latency_ratio":
            continue
        data = check.get("data") or {}
        rule = data.get("warmup_rule") or {}
        steady = rule.get("steady_fraction")
        warm = (f"warm-ups: {rule.get('min')} to {rule.get('max')}, until the last two agree "
                f"within {steady:.0%}" if isinstance(steady, (int, float))
                else f"warm-ups: {rule.get('min')} (a fixed count)")
        reason = check.get("reason")
        parts.append(
            f"<h4>{html.escape(check['track'])} / {html.escape(check['arm'])}: latency "
            + (f"<span style='color:#9a6700'>not decided: {html.escape(str(reason))}</span>"
               if reason else "")
            + f"</h4><p>{_interval_text(data)}<br><small>{html.escape(_unit_text(data))}; "
            f"{html.escape(warm)}</small><br>{html.escape(_spread_text(data))}</p>"
            f"<p>{html.escape(check.get('detail') or '')}</p>"
            + latency_svg(data.get("instances") or [], check["arm"])
            + _instances_table(data.get("instances") or [], check["arm"]))
    return ("<h3>Latency: instances and intervals</h3>" + "".join(parts)) if parts else ""
