"""The bring-up's page, JSON and patch, written into its run folder (sanitized like every
evidence file: no host names, user names, addresses or absolute paths)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ref2va_accept.bringup._records import PatchSummary
from ref2va_accept.bringup._rows import ROW_STATUSES
from ref2va_accept.campaign import LoadedCampaign
from ref2va_accept.core import atomic_write
from ref2va_accept.evidence import EvidenceBundle

if TYPE_CHECKING:
    from ref2va_accept.bringup._records import PolicyRecord
    from ref2va_accept.bringup._runner import BringupResult

PAGE_FILE = "bringup.html"
JSON_FILE = "bringup.json"
PATCH_FILE = "bringup.patch"

_COLOURS = {"confirmed": "#1b7f3b", "measured": "#1f5fa8", "contradicted": "#b3261e",
            "not_checked": "#8a6d00"}
_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem;max-width:80rem;color:#1d1d1f}
table{border-collapse:collapse;width:100%;margin:.5rem 0 1.5rem}
th,td{border:1px solid #ccc;padding:.3rem .5rem;text-align:left;vertical-align:top;font-size:.9rem}
th{background:#f2f2f2}.status{font-weight:700;white-space:nowrap}
pre{background:#f6f6f6;padding:.75rem;overflow-x:auto;font-size:.8rem}
.summary span{margin-right:1rem;font-weight:700}
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _rows_table(result: BringupResult) -> str:
    out = ["<table><tr><th>status</th><th>question</th><th>kind</th><th>seen on the host"
           "</th><th>detail</th></tr>"]
    # What needs the operator first: contradicted, then open, then measured, then confirmed.
    for row in sorted(result.rows, key=lambda r: ROW_STATUSES.index(r.status)):
        colour = _COLOURS[row.status]
        out.append(f"<tr id='{_e(row.id)}'><td class='status' style='color:{colour}'>"
                   f"{_e(row.status.replace('_', ' '))}</td><td><b>{_e(row.id)}</b><br>"
                   f"{_e(row.question)}</td><td>{_e(row.kind)}</td>"
                   f"<td>{_e(row.seen)}</td><td>{_e(row.detail)}</td></tr>")
    out.append("</table>")
    return "".join(out)


def _policies_table(runs: list[PolicyRecord]) -> str:
    if not runs:
        return "<p>No B0 memory-policy profile was started.</p>"
    out = ["<table><tr><th>profile</th><th>start</th><th>HBM over idle while loaded (MB)</th>"
           "<th>5 s request</th><th>stop</th><th>memory release (s since stop: MB per device)"
           "</th></tr>"]
    for run in runs:
        start = (f"{run.start_s:.1f} s" if run.start_s is not None
                 else f"did not start: {run.start_error}")
        hbm = run.hbm_loaded_mb or run.hbm_problem or "-"
        request = run.request
        said = (f"{request.latency_s:.1f} s, {request.explain}" if request is not None
                else "not sent")
        steps = ", ".join(f"{s.action} +{s.waited_s:.1f} s ({s.alive_after} alive)"
                          for s in (run.stop.steps if run.stop is not None else []))
        curve = "; ".join(f"{p.at_s:.0f}: " + ", ".join(
            f"{d}={mb:.0f}" for d, mb in p.used_mb.items())
            for p in (run.release.polls if run.release is not None else [])) or "-"
        out.append(f"<tr><td>{_e(run.profile)}</td><td>{_e(start)}</td><td>{_e(hbm)}</td>"
                   f"<td>{_e(said)}</td><td>{_e(steps or '-')}</td><td>{_e(curve)}</td></tr>")
    out.append("</table>")
    return "".join(out)


def _unfinished(result: BringupResult) -> str:
    """Where a bring-up that did not finish stopped, and what that leaves open."""
    return (f"<p id='unfinished'><b>The bring-up did not finish:</b> {_e(result.failure)}. Its "
            "engines were stopped in upstream's order; every row it had not reached is not "
            f"checked. Exit {result.exit_code}: run it again.</p>")


def write_page(result: BringupResult, campaign: LoadedCampaign, bundle: EvidenceBundle,
               patch_base: Path) -> None:
    """bringup.json (result.data, the patch's summary added), bringup.patch (when anything
    changes) and bringup.html."""
    folder = result.folder
    sanitizer = bundle.sanitizer
    data = result.data
    patch = result.patch
    diff = patch.diff(patch_base) if patch is not None else ""
    if diff:
        result.patch_file = folder / PATCH_FILE
        atomic_write(result.patch_file, sanitizer.text(diff))
    apply_in = ("the checkout's root" if patch_base == campaign.engine_workdir()
                else "the campaign's folder")
    data.patch = None if patch is None else PatchSummary(
        file=PATCH_FILE if diff else None, apply_in=apply_in, changes=patch.changes,
        skipped=patch.skipped)
    atomic_write(folder / JSON_FILE, json.dumps(sanitizer.value(data.json_dict()), indent=2,
                                                sort_keys=True) + "\n")
    counts = result.counts()
    summary = "".join(f"<span style='color:{_COLOURS[s]}'>{counts.get(s, 0)} "
                      f"{_e(s.replace('_', ' '))}</span>" for s in _COLOURS)
    changes = "".join(f"<li>{_e(c)}</li>" for c in (patch.changes if patch else []))
    skipped = "".join(f"<li>{_e(c)}</li>" for c in (patch.skipped if patch else []))
    failure = result.failure
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Bring-up: {_e(campaign.model.name)}</title><style>{_STYLE}</style></head><body>
<h1>Host bring-up: {_e(campaign.model.name)}</h1>
<p class="summary">{summary}</p>
{_unfinished(result) if failure else ""}
<p>Every guess made without the host and every risk found in upstream's code, answered on this
host before anything is frozen. A row not checked is open, never confirmed.</p>
{_rows_table(result)}
<h2>B0 per memory-policy profile</h2>
{_policies_table(data.policies or [])}
<h2>The patch ({_e(PATCH_FILE) if diff else "nothing to change"})</h2>
<p>Review, then apply in {_e(apply_in)} (<code>git apply {_e(PATCH_FILE)}</code> or
<code>patch -p1 &lt; {_e(PATCH_FILE)}</code>) before freezing.</p>
<ul>{changes}</ul>{f"<p>Not patched:</p><ul>{skipped}</ul>" if skipped else ""}
<pre>{_e(diff) or "(empty)"}</pre>
<h2>Cost</h2><p>{_e(data.plan)}; this run took {_e(data.elapsed_s)} s.</p>
<p>Every start, request, log and dump is in this run's <a href="evidence.json">evidence.json</a>
and <code>logs/</code>; the rows with their data in <a href="{JSON_FILE}">{JSON_FILE}</a>.</p>
</body></html>
"""
    atomic_write(folder / PAGE_FILE, sanitizer.text(page))
