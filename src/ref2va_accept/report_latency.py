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
from .report_cells import TABLE, VERDICT_COLOURS, cells, number


def _seconds(values: Iterable[Any]) -> str:
    shown = [f"{v:.3f}" for v in values if isinstance(v, (int, float))]
    return ", ".join(shown) or "-"


def _unit_text(data: Mapping[str, Any]) -> str:
    if data.get("unit") == "instance":
        shared = data.get("baseline_shared_with")
        b0 = (f"; B0's instances shared with {', '.join(map(str, shared))}"
              if isinstance(shared, list) and shared else "")
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
            + cells((i.get("position"), "B0" if arm == "b0" else candidate,
                     _seconds(i.get("warmups_s") or []), steady,
                     _seconds(i.get("measured_s") or []), _seconds(i.get("distinct_s") or []),
                     number(i.get("value_s"), ".3f")))
            + "</tr>")
    return (f"<table class='ref2va-instances' {TABLE}><tr>"
            + cells((
                "#", "arm", "warm-ups s", "steady", "measured s", "distinct s (caching probe)",
                "value s"), "th")
            + "</tr>" + "".join(rows) + "</table>")


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

    return (f"<b style='color:{colour}'>{html.escape(verdict.upper())}</b>: ratio interval "
            f"[{bound('lower')}, {bound('upper')}] at {interval.get('confidence')} per end "
            f"(k = {interval.get('k')}, {interval.get('n_baseline')} B0 and "
            f"{interval.get('n_candidate')} candidate values) against target "
            f"{latency.get('target')}; ratio of medians "
            f"{latency.get('ratio_of_medians', 0):.3f}")


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
            + _instances_table(data.get("instances") or [], check["arm"]))
    return ("<h3>Latency: instances and intervals</h3>" + "".join(parts)) if parts else ""
