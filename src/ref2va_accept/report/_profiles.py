"""The report's "Profiles" section: per track and arm, the profiled request's summary (top
operators with shapes, communication, host-device copies, memory with its definitions, ranks)
and a link to each raw trace (Perfetto opens them). Profiles are evidence, not gates."""

from __future__ import annotations

import html

from ref2va_accept.evidence import Bundle, EvidenceBundle, Trace
from ref2va_accept.report._cells import TABLE


def _trace_html(trace: Trace) -> str:
    summary = trace.summary
    link = (f"<a href='{html.escape(str(trace.file))}'>trace_rank{trace.rank}</a> "
            f"({trace.bytes / 1e6:.1f} MB)")
    if summary is None:
        return f"<p>{link}: could not be read</p>"
    rows = "".join(
        f"<tr><td>{html.escape(o.kind)}</td><td><code>{html.escape(o.name)}</code></td>"
        f"<td><code>{html.escape(o.input_dims)}</code></td><td>{o.calls}</td>"
        f"<td>{o.self_ms:.1f}</td><td>{o.total_ms:.1f}</td></tr>"
        for o in summary.top_operators)
    copies = summary.host_device_copies
    copy_text = (f"{copies.ms:.1f} ms in {copies.count} copies"
                 if copies.status == "measured" else f"not applicable: {copies.note}")
    memory = "".join(f"<li>{html.escape(m.figure)} on {html.escape(m.device)}: "
                     f"{m.bytes / 2**20:.1f} MiB <small>({html.escape(m.definition)})"
                     "</small></li>" for m in summary.memory)
    return (f"<p>{link}: {summary.operators} operators in a {summary.window_ms:.0f} ms "
            f"window; communication {summary.communication.ms:.1f} ms; host-device "
            f"copies {html.escape(copy_text)}.</p><ul>{memory}</ul>"
            f"<table class='ref2va-profile' {TABLE}><tr><th>kind</th><th>operator</th>"
            "<th>input shapes</th><th>calls</th><th>self ms</th><th>total ms</th></tr>"
            f"{rows}</table>")


def profiles_html(bundle: EvidenceBundle | Bundle) -> str:
    record = bundle.record if isinstance(bundle, EvidenceBundle) else bundle
    entries = record.profiles or []
    if not entries:
        return ""
    parts = ["<h2>Profiles (one steady-state request per arm, never timed)</h2><p>Each arm "
             "profiled on an instance of its own after the protocol's warm-ups, under the torch "
             "profiler: operators by self time (their own, less what they called), with their "
             "input shapes. Open a trace in Perfetto (ui.perfetto.dev, Open trace file).</p>"]
    for entry in entries:
        profiled = entry.profiled
        peak = None if profiled is None else profiled.server_peak_memory_mb
        latency = (None if profiled is None else profiled.latency_s) or 0
        problems = "".join(f"<li>{html.escape(p)}</li>" for p in entry.problems)
        parts.append(
            f"<h3>{html.escape(entry.track)} {html.escape(entry.arm)}: "
            f"{html.escape(entry.status)}</h3><p>instance {html.escape(entry.instance)}; "
            f"ranks expected {entry.ranks_expected}, with a trace {entry.ranks_found}; "
            f"profiled request {latency:.2f} s (warm-ups "
            + ", ".join(f"{w:.2f}" for w in entry.warmups if w is not None)
            + f" s); server peak memory {None if peak is None else peak.value} MB <small>"
            f"({html.escape(str(None if peak is None else peak.definition))})</small></p>"
            + (f"<ul>{problems}</ul>" if problems else "")
            + "".join(_trace_html(t) for t in entry.traces))
    return "".join(parts)
