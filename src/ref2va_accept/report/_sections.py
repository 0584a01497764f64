"""The HTML report's own sections, above pytest-html's results table.

A reviewer reads them top down: the verdict per track and candidate first (with its latency
ratio, interval and target), the campaign's record of attempts and its budget, the environment,
then the evidence each gate decided on (the latency protocol's instances and intervals, from
report/_latency.py; B0's spread and every lossy score, fidelity and audio figure, from
report/_lossy.py; every lossless comparison point), then every timed request. Everything shown
is read from the evidence bundle, so the report and ``evidence.json`` cannot disagree; a gate's
decisions are rendered as the gate recorded them, never decided here a second time.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from ref2va_accept.core import Check, CheckStatus
from ref2va_accept.evidence import (
    BaselineDeterminismData,
    Bundle,
    DeviceMemoryMeasured,
    DeviceMemoryNotApplicable,
    EvidenceBundle,
    LatencyRatioCheck,
    LosslessGateData,
    TrackVerdict,
    stand_in_label,
)
from ref2va_accept.report._cells import TABLE, VERDICT_COLOURS, cells, number, ratio_text
from ref2va_accept.report._latency import latency_cell, latency_tables_html
from ref2va_accept.report._localize import localization_html
from ref2va_accept.report._lossy import lossy_tables_html
from ref2va_accept.report._profiles import profiles_html

__all__ = ["number", "summary_html"]


# pytest-html draws its environment table above everything else; the report puts the verdicts
# first and the environment after them (environment_html), so that one is hidden.
FIRST = "<style>#environment-header, #environment { display: none; }</style>"


def summary_html(bundle: EvidenceBundle) -> str:
    return (FIRST + verdict_table_html(bundle) + localization_html(bundle) + ledger_html(bundle)
            + budget_html(bundle)
            + environment_html(bundle)
            + host_html(bundle)
            + latency_tables_html(bundle) + lossy_tables_html(bundle)
            + comparison_tables_html(bundle) + profiles_html(bundle)
            + samples_table_html(bundle))


def _record(bundle: EvidenceBundle | Bundle) -> Bundle:
    return bundle.record if isinstance(bundle, EvidenceBundle) else bundle


def ledger_html(bundle: EvidenceBundle | Bundle) -> str:
    """The campaign's record from its ledger: every attempt of every run, newest first, the
    rejected and inconclusive beside the supported (this run's rows marked)."""
    record = _record(bundle)
    ledger = record.ledger
    if ledger is None:
        return ""
    history = [e for e in ledger.history if e.kind == "attempt"]
    rows = []
    for e in reversed(history):
        verdict = str(e.verdict)
        latency = e.latency
        ratio = ("-" if latency is None or latency.ratio_of_medians is None
                 else ratio_text(latency))
        this = e.run_id == record.run_id
        rows.append(
            "<tr" + (" style='background:#f6f8fa'" if this else "") + ">"
            + cells((e.at, f"{e.run_id}{' (this run)' if this else ''}",
                     e.run_status, e.track, e.candidate, e.change_class or "not declared"))
            + f"<td style='color:{VERDICT_COLOURS.get(verdict, '#000')};font-weight:bold'>"
            f"{html.escape(verdict.upper())}"
            f"{_stand_in_mark(stand_in_label(e.stand_in_weights))}</td>"
            + cells((ratio, ", ".join(e.reasons or []))) + "</tr>")
    torn = (" Its last line was cut short (a run killed while appending) and is left as it is."
            if ledger.torn_tail else "")
    return (f"<h3>Campaign record ({html.escape(str(ledger.file))})</h3>"
            f"<p>Every candidate attempt of every run of this campaign, newest first: "
            f"{len(history)} attempts, "
            f"{sum(1 for e in history if e.run_id == record.run_id)} from this run. "
            f"`ref2va-accept ledger` prints it.{torn}</p>"
            f"<table class='ref2va-ledger' {TABLE}><tr>"
            + cells(("at", "run", "run status", "track", "candidate", "class", "verdict",
                     "latency", "reasons"), "th") + "</tr>" + "".join(rows) + "</table>")


def _hours(seconds: float | None) -> str:
    return "-" if not isinstance(seconds, (int, float)) else f"{seconds / 3600:.2f}"


def _hours_range(values: Sequence[float] | None) -> str:
    return "not estimated" if not values else f"{_hours(values[0])} - {_hours(values[1])}"


def budget_html(bundle: EvidenceBundle | Bundle) -> str:
    """Spent, planned and left against the campaign's ceilings (planning/_budget.py; hours)."""
    record = _record(bundle)
    check = record.budget
    if check is None:
        return ""
    before = check.spent_before
    history = [] if record.ledger is None else record.ledger.history
    this = next((e for e in history if e.kind == "run" and e.run_id == record.run_id), None)
    this_wall = None if this is None else this.wall_s
    this_device = None if this is None else this.device_s
    spent_wall = float(before.wall_s or 0) + float(this_wall or 0)
    spent_device = float(before.device_s or 0) + float(this_device or 0)
    rows = [("ceiling (with authorizations)", f"{check.wall_ceiling_h:g}",
             f"{check.device_ceiling_h:g}"),
            (f"spent by {before.runs} earlier run(s)", _hours(before.wall_s),
             _hours(before.device_s)),
            ("planned for this run (at the target ratio - upper bound)",
             _hours_range(check.planned_wall_s), _hours_range(check.planned_device_s)),
            ("this run, measured", _hours(this_wall), _hours(this_device)),
            ("left after this run",
             f"{float(check.wall_ceiling_h or 0) - spent_wall / 3600:.2f}",
             f"{float(check.device_ceiling_h or 0) - spent_device / 3600:.2f}")]
    over = "".join(f"<p style='color:#cf222e'>over: {html.escape(str(o))}</p>"
                   for o in check.over)
    return (f"<h3>Budget</h3><p>{check.devices} logical device(s) per instance; "
            f"{len(check.authorizations)} authorization(s) recorded.</p>{over}"
            f"<table class='ref2va-budget' {TABLE}><tr>"
            + cells(("", "wall-hours", "logical-device-hours"), "th") + "</tr>"
            + "".join(f"<tr>{cells(row)}</tr>" for row in rows) + "</table>")


def environment_html(bundle: EvidenceBundle | Bundle) -> str:
    """The judge's environment as the evidence recorded it (no host names, no paths)."""
    record = _record(bundle)
    env = record.environment
    rows = [("Python", f"{env.python} ({env.implementation})"),
            ("Platform", f"{env.system} {env.machine}"),
            ("Packages", ", ".join(f"{k} {v}" for k, v in sorted(env.packages.items()) if v)
             or "-"),
            ("ref2va-accept", str(record.harness_version))]
    return ("<h3>Environment</h3>"
            f"<table class='ref2va-environment' {TABLE}>"
            + "".join(f"<tr>{cells(row)}</tr>" for row in rows) + "</table>")


def _memory_html(memory: DeviceMemoryMeasured | DeviceMemoryNotApplicable | None) -> str:
    """The device-memory waits between instances (engines/_device_memory.py), or why none were."""
    if isinstance(memory, DeviceMemoryNotApplicable):
        return (f"<p>device memory between instances: not applicable "
                f"({html.escape(str(memory.reason))})</p>")
    if memory is None:
        return ""
    waits = memory.waits
    held = [w for w in waits if not w.released]
    idle = None if memory.idle is None else memory.idle.used_mb
    return (html.escape(
        f"device memory between instances: idle level {idle} MB on devices "
        f"{memory.devices}; {len(waits)} stop(s) waited for, "
        f"{len(waits) - len(held)} released within {memory.tolerance_mb} MB in "
        f"{memory.timeout_s} s").join(("<p>", "</p>"))
        + "".join(f"<p style='color:#cf222e'>{html.escape(str(w.instance))}: still "
                  f"held {html.escape(str(w.held_mb))} MB above idle "
                  f"{html.escape(str(w.problem or ''))}</p>" for w in held))


def host_html(bundle: EvidenceBundle | Bundle) -> str:
    """The host the run measured: its identity against the pin, and the device-memory waits."""
    record = _record(bundle)
    parts: list[str] = []
    identity = record.host_identity
    rows = "".join(
        "<tr>" + cells((r.field, r.frozen, r.host, r.source))
        + (f"<td style='color:#cf222e;font-weight:bold'>{html.escape(str(r.status))}</td>"
           if r.status != "match" else "<td>match</td>") + "</tr>"
        for r in ([] if identity is None else identity.rows))
    if identity is not None and rows:
        parts.append(
            f"<p>engine identity against <code>engine.source_pin</code> "
            f"({'all match' if identity.ok else 'DIFFERS: every verdict is capped'})</p>"
            f"<table class='ref2va-identity' {TABLE}><tr>"
            + cells(("field", "frozen", "host", "read from", "status"), "th") + "</tr>"
            + rows + "</table>")
    memory = _memory_html(record.device_memory)
    if memory:
        parts.append(memory)
    return ("<h3>Host</h3>" + "".join(parts)) if parts else ""


def not_applicable(checks: Mapping[Check, CheckStatus]) -> list[str]:
    """The checks a verdict counted as not applicable: shown as such, never as passed."""
    return [str(name) for name, status in checks.items()
            if status == CheckStatus.NOT_APPLICABLE]


def _attempt_cell(v: TrackVerdict) -> str:
    """Which attempt this is, and what the earlier ones gave (a rerun is a second chance at a
    false supported: the reviewer sees it)."""
    if v.attempt is None:
        return "-"
    earlier = "; ".join(v.earlier)
    return html.escape(f"{v.attempt}" + (f" (earlier: {earlier})" if earlier else ""))


def _stand_in_mark(label: str) -> str:
    """Under the verdict: its lossy scores came from stand-in weights, not VBench's."""
    return (f"<br><span class='ref2va-stand-in' style='color:#9a6700;font-weight:normal'>"
            f"{html.escape(label)}: seeded random weights, not VBench's</span>" if label else "")


def verdict_table_html(bundle: EvidenceBundle) -> str:
    record = bundle.record
    campaign = record.campaign
    freeze = None if campaign is None else campaign.freeze
    latency = {(c.track, c.arm): c for c in record.checks_of(LatencyRatioCheck)}
    rows = []
    for v in bundle.verdicts:
        colour = VERDICT_COLOURS[v.verdict]
        cell = "-" if v.candidate is None else latency_cell(latency.get((v.track, v.candidate)))
        rows.append(
            "<tr>"
            f"<td>{html.escape(v.track)}</td><td>{html.escape(v.candidate or '(none)')}</td>"
            f"<td style='color:{colour};font-weight:bold'>{v.verdict.upper()}"
            f"{_stand_in_mark(v.stand_in_label)}</td>"
            f"<td>{cell}</td>"
            f"<td>{html.escape(v.holm or '-')}</td>"
            f"<td>{_attempt_cell(v)}</td>"
            f"<td>{html.escape(', '.join(v.reasons))}</td>"
            f"<td>{html.escape(', '.join(v.open_checks)) or '-'}</td>"
            f"<td>{html.escape(', '.join(not_applicable(v.checks))) or '-'}</td>"
            f"<td>{html.escape(v.note)}"
            + (f"<br>first diverging module: <b>{html.escape(v.localized)}</b>"
               if v.localized else "") + "</td></tr>"
        )
    freeze_line = html.escape(
        f"protocol: {None if freeze is None else freeze.state}"
        + (f"; verdicts capped at inconclusive ({freeze.verdict_cap})"
           if freeze is not None and freeze.verdict_cap else "")
        + (f"; unfilled: {', '.join(freeze.unfilled)}" if freeze is not None and freeze.unfilled
           else "")
    )
    return (
        "<h2>Verdicts per track</h2>"
        f"<p>campaign <b>{html.escape(str(None if campaign is None else campaign.name))}</b> "
        f"({html.escape(str(None if campaign is None else campaign.file))}), engine "
        f"{html.escape(str(None if campaign is None else campaign.engine_kind))}, run "
        f"{html.escape(bundle.run_id)}, status {html.escape(str(record.status))}</p>"
        f"<p>{freeze_line}</p>"
        + "".join(f"<p class='ref2va-note'>{html.escape(str(n))}</p>" for n in record.notes)
        + "<table class='ref2va-verdicts' border='1' cellpadding='4' "
        "style='border-collapse:collapse'>"
        "<tr><th>track</th><th>candidate</th><th>verdict</th>"
        "<th>latency: ratio of medians [interval] vs target</th>"
        "<th>family-wise (Holm, the track's candidates)</th><th>attempt</th><th>reasons</th>"
        "<th>open checks</th><th>not applicable</th><th>note</th></tr>"
        + "".join(rows)
        + "</table><p>Evidence: evidence.json beside this report.</p>"
    )


def comparison_tables_html(bundle: EvidenceBundle | Bundle) -> str:
    """Per lossless comparison: every point, equal or how it differs."""
    parts = []
    for check in _record(bundle).checks:
        data = check.data
        if not isinstance(data, BaselineDeterminismData | LosslessGateData) or not data.points:
            continue
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in (
                p.name, p.status, p.differing, p.elements,
                p.first_index if p.first_index is not None else "-",
                p.max_abs_diff if p.max_abs_diff is not None else "-",
                p.max_ulp if p.max_ulp is not None else "-")) + "</tr>"
            for p in data.points)
        parts.append(
            f"<h4>{html.escape(check.track)} / {html.escape(check.arm)}: "
            f"{html.escape(check.name)} {check.status.upper()}"
            + ("" if data.seed is None else f" (seed {html.escape(str(data.seed))})") + "</h4>"
            f"<p>{html.escape(check.detail or '')}</p>"
            "<table class='ref2va-points' border='1' cellpadding='3' "
            "style='border-collapse:collapse'><tr><th>point</th><th>status</th>"
            "<th>differing</th><th>elements</th><th>first index</th><th>max |diff|</th>"
            "<th>max ULP</th></tr>" + rows + "</table>")
    return ("<h3>Comparison points</h3>" + "".join(parts)) if parts else ""


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def samples_table_html(bundle: EvidenceBundle | Bundle) -> str:
    """Every timed request of the run, failed ones included, with its media verdict."""
    record = _record(bundle)
    problems = {m.sample_id: m.problems for m in record.media}
    rows = []
    for s in record.samples:
        found = problems.get(s.sample_id)
        media = "-" if found is None else ("complete" if not found else "; ".join(
            f"{p.code}: {p.message}" for p in found))
        outcome = "ok" if s.ok else f"{s.failure}: {s.detail or ''}"
        rows.append(
            "<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in (
                s.track, s.arm, s.kind, s.index, s.seed, s.status, _seconds(s.latency_s),
                _seconds(s.inference_time_s), outcome, media, s.media_file or "-")) + "</tr>"
        )
    return (
        "<h3>Timed requests</h3>"
        "<table class='ref2va-samples' border='1' cellpadding='3' "
        "style='border-collapse:collapse'>"
        "<tr><th>track</th><th>arm</th><th>kind</th><th>#</th><th>seed</th><th>HTTP</th>"
        "<th>latency s</th><th>server s</th><th>outcome</th><th>media</th><th>file</th></tr>"
        + "".join(rows) + "</table>"
    )
