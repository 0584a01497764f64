"""The HTML report's own sections, above pytest-html's results table.

A reviewer reads them top down: the verdict per track and candidate first (with its latency
ratio, interval and target), the campaign's record of attempts and its budget, the environment,
then the evidence each gate decided on (the latency protocol's instances and intervals, from
report_latency.py; B0's spread and every lossy score, fidelity and audio figure; every lossless
comparison point), then every timed request. Everything shown is read from the evidence
bundle, so the report and ``evidence.json`` cannot disagree; a gate's decisions are rendered as
the gate recorded them, never decided here a second time.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .check_records import stand_in_label
from .evidence import EvidenceBundle
from .report_cells import TABLE, VERDICT_COLOURS, cells, number, ratio_text
from .report_latency import latency_cell_transitional, latency_tables_html
from .report_localize import localization_html
from .report_profiles import profiles_html

__all__ = ["audio_comparison_text", "number", "summary_html"]



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


def ledger_html(bundle: EvidenceBundle) -> str:
    """The campaign's record from its ledger: every attempt of every run, newest first, the
    rejected and inconclusive beside the supported (this run's rows marked)."""
    record = bundle.data.get("ledger")
    if not isinstance(record, Mapping):
        return ""
    history = [e for e in record.get("history") or [] if e.get("kind", "attempt") == "attempt"]
    rows = []
    for e in reversed(history):
        verdict = str(e.get("verdict"))
        latency = e.get("latency") or {}
        ratio = "-" if latency.get("ratio_of_medians") is None else ratio_text(latency)
        this = e.get("run_id") == bundle.run_id
        rows.append(
            "<tr" + (" style='background:#f6f8fa'" if this else "") + ">"
            + cells((e.get("at"), f"{e.get('run_id')}{' (this run)' if this else ''}",
                     e.get("run_status"), e.get("track"), e.get("candidate"),
                     e.get("change_class") or "not declared"))
            + f"<td style='color:{VERDICT_COLOURS.get(verdict, '#000')};font-weight:bold'>"
            f"{html.escape(verdict.upper())}"
            f"{_stand_in_mark(stand_in_label(e.get('stand_in_weights')))}</td>"
            + cells((ratio, ", ".join(e.get("reasons") or []))) + "</tr>")
    torn = (" Its last line was cut short (a run killed while appending) and is left as it is."
            if record.get("torn_tail") else "")
    return (f"<h3>Campaign record ({html.escape(str(record.get('file')))})</h3>"
            f"<p>Every candidate attempt of every run of this campaign, newest first: "
            f"{len(history)} attempts, "
            f"{sum(1 for e in history if e.get('run_id') == bundle.run_id)} from this run. "
            f"`ref2va-accept ledger` prints it.{torn}</p>"
            f"<table class='ref2va-ledger' {TABLE}><tr>"
            + cells(("at", "run", "run status", "track", "candidate", "class", "verdict",
                     "latency", "reasons"), "th") + "</tr>" + "".join(rows) + "</table>")


def budget_html(bundle: EvidenceBundle) -> str:
    """Spent, planned and left against the campaign's ceilings (budget.py; hours)."""
    check = bundle.data.get("budget")
    if not isinstance(check, Mapping):
        return ""
    before = check.get("spent_before") or {}
    this = next((e for e in (bundle.data.get("ledger") or {}).get("history") or []
                 if e.get("kind") == "run" and e.get("run_id") == bundle.run_id), None)

    def hours(seconds: Any) -> str:
        return "-" if not isinstance(seconds, (int, float)) else f"{seconds / 3600:.2f}"

    def pair(values: Any) -> str:
        return "not estimated" if not values else f"{hours(values[0])} - {hours(values[1])}"

    spent_wall = float(before.get("wall_s") or 0) + float((this or {}).get("wall_s") or 0)
    spent_device = float(before.get("device_s") or 0) + float((this or {}).get("device_s") or 0)
    rows = [("ceiling (with authorizations)", f"{check.get('wall_ceiling_h'):g}",
             f"{check.get('device_ceiling_h'):g}"),
            (f"spent by {before.get('runs', 0)} earlier run(s)", hours(before.get("wall_s")),
             hours(before.get("device_s"))),
            ("planned for this run (at the target ratio - upper bound)",
             pair(check.get("planned_wall_s")), pair(check.get("planned_device_s"))),
            ("this run, measured", hours((this or {}).get("wall_s")),
             hours((this or {}).get("device_s"))),
            ("left after this run",
             f"{float(check.get('wall_ceiling_h') or 0) - spent_wall / 3600:.2f}",
             f"{float(check.get('device_ceiling_h') or 0) - spent_device / 3600:.2f}")]
    over = "".join(f"<p style='color:#cf222e'>over: {html.escape(str(o))}</p>"
                   for o in check.get("over") or [])
    return (f"<h3>Budget</h3><p>{check.get('devices')} logical device(s) per instance; "
            f"{len(check.get('authorizations') or [])} authorization(s) recorded.</p>{over}"
            f"<table class='ref2va-budget' {TABLE}><tr>"
            + cells(("", "wall-hours", "logical-device-hours"), "th") + "</tr>"
            + "".join(f"<tr>{cells(row)}</tr>" for row in rows) + "</table>")


def environment_html(bundle: EvidenceBundle) -> str:
    """The judge's environment as the evidence recorded it (no host names, no paths)."""
    env = bundle.data.get("environment") or {}
    packages = env.get("packages") or {}
    rows = [("Python", f"{env.get('python')} ({env.get('implementation')})"),
            ("Platform", f"{env.get('system')} {env.get('machine')}"),
            ("Packages", ", ".join(f"{k} {v}" for k, v in sorted(packages.items()) if v) or "-"),
            ("ref2va-accept", str(bundle.data.get("harness_version")))]
    return ("<h3>Environment</h3>"
            f"<table class='ref2va-environment' {TABLE}>"
            + "".join(f"<tr>{cells(row)}</tr>" for row in rows) + "</table>")


def host_html(bundle: EvidenceBundle) -> str:
    """The host the run measured: its identity against the pin, and the device-memory waits."""
    parts: list[str] = []
    identity = bundle.data.get("host_identity") or {}
    rows = "".join(
        "<tr>" + cells((r.get("field"), r.get("frozen"), r.get("host"), r.get("source")))
        + (f"<td style='color:#cf222e;font-weight:bold'>{html.escape(str(r.get('status')))}</td>"
           if r.get("status") != "match" else "<td>match</td>") + "</tr>"
        for r in identity.get("rows", []))
    if rows:
        parts.append(
            f"<p>engine identity against <code>engine.source_pin</code> "
            f"({'all match' if identity.get('ok') else 'DIFFERS: every verdict is capped'})</p>"
            f"<table class='ref2va-identity' {TABLE}><tr>"
            + cells(("field", "frozen", "host", "read from", "status"), "th") + "</tr>"
            + rows + "</table>")
    memory = bundle.data.get("device_memory") or {}
    if memory.get("status") == "not_applicable":
        parts.append(f"<p>device memory between instances: not applicable "
                     f"({html.escape(str(memory.get('reason')))})</p>")
    elif memory.get("status") == "measured":
        waits = memory.get("waits") or []
        held = [w for w in waits if not w.get("released")]
        idle = (memory.get("idle") or {}).get("used_mb")
        parts.append(html.escape(
            f"device memory between instances: idle level {idle} MB on devices "
            f"{memory.get('devices')}; {len(waits)} stop(s) waited for, "
            f"{len(waits) - len(held)} released within {memory.get('tolerance_mb')} MB in "
            f"{memory.get('timeout_s')} s")
            .join(("<p>", "</p>"))
            + "".join(f"<p style='color:#cf222e'>{html.escape(str(w.get('instance')))}: still "
                      f"held {html.escape(str(w.get('held_mb')))} MB above idle "
                      f"{html.escape(str(w.get('problem') or ''))}</p>" for w in held))
    return ("<h3>Host</h3>" + "".join(parts)) if parts else ""


def not_applicable(checks: Mapping[Any, str]) -> list[str]:
    """The checks a verdict counted as not applicable: shown as such, never as passed."""
    return [str(name) for name, status in checks.items() if status == "not_applicable"]




def _attempt_cell(v: Any) -> str:
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
    campaign = bundle.data.get("campaign") or {}
    freeze = campaign.get("freeze", {})
    latency = {(c["track"], c["arm"]): c for c in bundle.data["checks"]
               if c["name"] == "latency_ratio"}
    rows = []
    for v in bundle.verdicts:
        colour = VERDICT_COLOURS[v.verdict]
        rows.append(
            "<tr>"
            f"<td>{html.escape(v.track)}</td><td>{html.escape(v.candidate or '(none)')}</td>"
            f"<td style='color:{colour};font-weight:bold'>{v.verdict.upper()}"
            f"{_stand_in_mark(v.stand_in_label)}</td>"
            f"<td>{latency_cell_transitional(latency.get((v.track, v.candidate)))}</td>"
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
        f"protocol: {freeze.get('state')}"
        + (f"; verdicts capped at inconclusive ({freeze.get('verdict_cap')})"
           if freeze.get("verdict_cap") else "")
        + (f"; unfilled: {', '.join(freeze.get('unfilled', []))}" if freeze.get("unfilled")
           else "")
    )
    return (
        "<h2>Verdicts per track</h2>"
        f"<p>campaign <b>{html.escape(str(campaign.get('name')))}</b> "
        f"({html.escape(str(campaign.get('file')))}), engine "
        f"{html.escape(str(campaign.get('engine_kind')))}, run {html.escape(bundle.run_id)}, "
        f"status {html.escape(str(bundle.data.get('status')))}</p>"
        f"<p>{freeze_line}</p>"
        + "".join(f"<p class='ref2va-note'>{html.escape(str(n))}</p>"
                  for n in bundle.data.get("notes", []))
        + "<table class='ref2va-verdicts' border='1' cellpadding='4' "
        "style='border-collapse:collapse'>"
        "<tr><th>track</th><th>candidate</th><th>verdict</th>"
        "<th>latency: ratio of medians [interval] vs target</th>"
        "<th>family-wise (Holm, the track's candidates)</th><th>attempt</th><th>reasons</th>"
        "<th>open checks</th><th>not applicable</th><th>note</th></tr>"
        + "".join(rows)
        + "</table><p>Evidence: evidence.json beside this report.</p>"
    )


def comparison_tables_html(bundle: EvidenceBundle) -> str:
    """Per lossless comparison: every point, equal or how it differs."""
    parts = []
    for check in bundle.data["checks"]:
        points = check.get("data", {}).get("points")
        if not points:
            continue
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in (
                p["name"], p["status"], p.get("differing", "-"), p.get("elements", "-"),
                p.get("first_index") if p.get("first_index") is not None else "-",
                p.get("max_abs_diff") if p.get("max_abs_diff") is not None else "-",
                p.get("max_ulp") if p.get("max_ulp") is not None else "-")) + "</tr>"
            for p in points)
        seed = check.get("data", {}).get("seed")
        parts.append(
            f"<h4>{html.escape(check['track'])} / {html.escape(check['arm'])}: "
            f"{html.escape(check['name'])} {check['status'].upper()}"
            + ("" if seed is None else f" (seed {html.escape(str(seed))})") + "</h4>"
            f"<p>{html.escape(check.get('detail') or '')}</p>"
            "<table class='ref2va-points' border='1' cellpadding='3' "
            "style='border-collapse:collapse'><tr><th>point</th><th>status</th>"
            "<th>differing</th><th>elements</th><th>first index</th><th>max |diff|</th>"
            "<th>max ULP</th></tr>" + rows + "</table>")
    return ("<h3>Comparison points</h3>" + "".join(parts)) if parts else ""


def samples_table_html(bundle: EvidenceBundle) -> str:
    """Every timed request of the run, failed ones included, with its media verdict."""
    problems = {m["sample_id"]: m["problems"] for m in bundle.data["media"]}
    rows = []
    for s in bundle.data["samples"]:
        latency = f"{s['latency_s']:.3f}" if s.get("latency_s") is not None else "-"
        server = f"{s['inference_time_s']:.3f}" if s.get("inference_time_s") is not None else "-"
        found = problems.get(s["sample_id"])
        media = "-" if found is None else ("complete" if not found else "; ".join(
            f"{p['code']}: {p['message']}" for p in found))
        outcome = "ok" if s["ok"] else f"{s['failure']}: {s.get('detail') or ''}"
        rows.append(
            "<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in (
                s["track"], s["arm"], s["kind"], s["index"], s["seed"], s["status"], latency,
                server, outcome, media, s.get("media_file") or "-")) + "</tr>"
        )
    return (
        "<h3>Timed requests</h3>"
        "<table class='ref2va-samples' border='1' cellpadding='3' "
        "style='border-collapse:collapse'>"
        "<tr><th>track</th><th>arm</th><th>kind</th><th>#</th><th>seed</th><th>HTTP</th>"
        "<th>latency s</th><th>server s</th><th>outcome</th><th>media</th><th>file</th></tr>"
        + "".join(rows) + "</table>"
    )



def audio_comparison_text(audio: Mapping[str, Any]) -> str:
    """One line of an AudioComparison's dict (the CLI prints it too)."""
    return (f"lag {number(audio.get('lag_ms'), '.2f')} ms, "
            f"SNR {number(audio.get('snr_db'), '.2f')} dB, "
            f"SI-SDR {number(audio.get('si_sdr_db'), '.2f')} dB, "
            f"LSD {number(audio.get('lsd_db'), '.3f')} dB, "
            f"MR-STFT {number(audio.get('mrstft'), '.4f')}, "
            f"loudness {number(audio.get('loudness_diff_lu'), '+.2f')} LU, "
            f"length difference {audio.get('length_mismatch_samples')} samples")


def _curve_svg(values: Sequence[Any], *, cap: float, label: str) -> str:
    """A small inline line chart of a per-frame curve (identical frames drawn at ``cap``)."""
    points = [min(cap, float(v)) if isinstance(v, (int, float)) else cap for v in values]
    finite = [p for p in points if math.isfinite(p)]
    if len(finite) < 2:
        return ""
    low, high = min(finite), max(finite)
    span = (high - low) or 1.0
    width, height = 360, 60
    step = width / (len(points) - 1)
    path = " ".join(f"{i * step:.1f},{height - (p - low) / span * (height - 4) - 2:.1f}"
                    for i, p in enumerate(points))
    return (f"<svg width='{width}' height='{height}' role='img' aria-label='{html.escape(label)}'"
            " style='border:1px solid #ccc;vertical-align:middle'>"
            f"<polyline fill='none' stroke='#0969da' stroke-width='1' points='{path}'/></svg>"
            f" <small>{html.escape(label)}: {low:.2f} .. {high:.2f}</small>")


def _variability_html(check: dict[str, Any]) -> str:
    data = check.get("data") or {}
    same = data.get("same_seed_spread") or {}
    other = data.get("different_seed_spread") or {}
    limit = data.get("limit")
    gated = set(data.get("gated") or [])
    below = data.get("below_limit") or {}  # as the gate decided it, for the gated scorers

    def decided(scorer: str) -> str:
        if scorer not in gated:
            return "-"  # the limit decides gated ones only
        return "yes" if below.get(scorer) is True else "no"

    rows = "".join(
        "<tr>" + cells((scorer, "gated" if scorer in gated else "reported",
                         number(same.get(scorer), ".4%"), number(other.get(scorer), ".4%"),
                         decided(scorer))) + "</tr>"
        for scorer in sorted(set(same) | set(other), key=lambda k: (k not in gated, k)))
    return (f"<h4>{html.escape(check['track'])} / B0: baseline variability "
            f"{check['status'].upper()}</h4><p>{html.escape(check.get('detail') or '')}</p>"
            + (f"<table class='ref2va-variability' {TABLE}><tr>"
               + cells(("scorer", "role", "same-seed spread", "different-seed spread",
                         f"below the limit {number(limit, '.4%')}"), "th") + "</tr>" + rows
               + "</table>" if rows else ""))


# How each recorded lossy decision is shown: broken in red, the others plain.
_GATE_CELLS = {"within": "<td>within</td>", "open": "<td>open</td>",
               "broken": "<td style='color:#cf222e;font-weight:bold'>BROKEN</td>"}


def _gate_cell(decision: Any) -> str:
    return _GATE_CELLS.get(str(decision)) or cells((decision,))


def _scorer_label(error: dict[str, Any]) -> str:
    """The scorer's id, and for a model-based one the weights it ran on (stand-ins said so)."""
    weights = error.get("weights") or []
    if not weights:
        return str(error["scorer"])
    files = ", ".join(f"{w.get('name')} {str(w.get('sha256'))[:12]}" for w in weights)
    stand_in = " STAND-IN weights (seeded random, not VBench's)" if any(
        w.get("stand_in") for w in weights) else ""
    return f"{error['scorer']} [{files}]{stand_in}"


def _seed_html(seed: dict[str, Any]) -> str:
    rows = "".join(
        "<tr>" + cells((_scorer_label(e), e["kind"], number(e.get("baseline"), ".6f"),
                         number(e.get("candidate"), ".6f"), number(e.get("error"), ".4%")))
        + _gate_cell(e.get("gate")) + cells((e.get("detail") or "",)) + "</tr>"
        for e in seed.get("errors", []))
    parts = [f"<p><b>seed {html.escape(str(seed.get('seed')))}</b></p>",
             f"<table class='ref2va-lossy' {TABLE}><tr>"
             + cells(("scorer", "kind", "B0", "candidate", "relative error", "gate", "detail"),
                      "th") + "</tr>" + rows + "</table>"]
    fidelity = seed.get("fidelity") or {}
    if "error" in fidelity:
        parts.append(f"<p>fidelity to B0: error: {html.escape(str(fidelity['error']))}</p>")
    elif fidelity:
        parts.append(
            "<p>fidelity to B0: PSNR " + html.escape(
                f"{number(fidelity.get('psnr_db'), '.2f')} dB (min frame "
                f"{number(fidelity.get('psnr_min_db'), '.2f')} dB), SSIM "
                f"{number(fidelity.get('ssim_mean'), '.4f')} (min frame "
                f"{number(fidelity.get('ssim_min'), '.4f')}), "
                f"{fidelity.get('identical_frames')}/{fidelity.get('frames')} frames identical")
            + "<br>" + _curve_svg(fidelity.get("psnr_per_frame") or [], cap=100.0,
                                  label="PSNR per frame, dB")
            + "<br>" + _curve_svg(fidelity.get("ssim_per_frame") or [], cap=1.0,
                                  label="SSIM per frame") + "</p>")
    audio = seed.get("audio") or {}
    if "error" in audio:
        parts.append(f"<p>audio against B0: error: {html.escape(str(audio['error']))}</p>")
    elif audio:
        parts.append("<p>audio against B0: " + html.escape(audio_comparison_text(audio))
                     + "</p>")
    return "".join(parts)


def lossy_tables_html(bundle: EvidenceBundle) -> str:
    """Per lossy track: B0's spread, then per candidate and seed every score against B0."""
    parts = []
    for check in bundle.data["checks"]:
        if check["name"] == "baseline_variability":
            parts.append(_variability_html(check))
        elif check["name"] == "lossy_gate":
            data = check.get("data") or {}
            gate = (f"threshold {number(data.get('threshold'), '.2%')}, "
                    f"{'normalized' if data.get('normalized') else 'raw'} scores"
                    + "".join(f", {name} at least {data[key]}" for key, name in
                              (("min_psnr_db", "PSNR dB"), ("min_ssim", "SSIM"))
                              if data.get(key) is not None))
            parts.append(
                f"<h4>{html.escape(check['track'])} / {html.escape(check['arm'])}: lossy gate "
                f"{check['status'].upper()}</h4><p>{html.escape(check.get('detail') or '')}"
                f"<br><small>{html.escape(gate)}</small></p>"
                + "".join(_seed_html(seed) for seed in data.get("per_seed", [])))
    return ("<h3>Lossy gates</h3>" + "".join(parts)) if parts else ""
