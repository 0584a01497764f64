"""`ref2va-accept merge RUN...`: several runs read side by side, never added up.

Each run is judged against its own matched B0, measured in that run under the frozen protocol;
a speed-up from one run and one from another are two findings, not one. So the merged report is
a table per track with one column of verdicts per run, each cell that run's verdict, its latency
ratio of medians and interval against the target and its reasons, and no number that combines
runs. Runs of different frozen campaigns, or from hosts whose identity differs, are refused unless
the caller says so (and the report then says it too): their verdicts answer different questions.

Lanes (``--lanes``) are the sessions of one campaign run that `./ref2va campaign` runs at once,
each judging other tracks (planning/_lanes.py): the same rules, and besides, no track judged by two
of them; each track's table then has the one column of the lane that judged it.

Reads only the runs' ``evidence.json`` (already sanitized: no host names, users or paths) and
writes ``report.html`` and ``merge.json`` into a folder of its own.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ref2va_accept.campaign import track_rank
from ref2va_accept.core import Ref2VAError, atomic_write
from ref2va_accept.evidence import (
    Bundle,
    LatencyRatioCheck,
    LatencySummary,
    TrackVerdict,
    read_bundle_file,
    stand_in_label,
)
from ref2va_accept.report import TABLE, VERDICT_COLOURS, latency_cell

__all__ = ["MergeInputError", "MergeRefused", "Run", "load_run", "merge", "merged_html"]

class MergeInputError(Ref2VAError):
    """A run that cannot be read: no evidence.json, not JSON, not a run's bundle."""


class MergeRefused(Ref2VAError):
    """Runs that may not be read side by side without being told to (exit 1)."""


@dataclass(frozen=True)
class Run:
    label: str  # the run folder's name (its run id), as the caller named it
    bundle: Bundle
    folder: Path | None = None  # where its evidence.json (and report.html) lie

    @property
    def tracks(self) -> set[str]:
        return {v.track for v in self.bundle.verdicts}

    @property
    def run_id(self) -> str:
        return self.bundle.run_id

    @property
    def campaign(self) -> str:
        """The frozen campaign it ran: its name and lock hash, or, unfrozen, its canonical
        content's hash (two unfrozen runs of the same file still match)."""
        campaign = self.bundle.campaign
        if campaign is None:  # no campaign scenario asked for the evidence
            name, state, lock, canonical = None, None, None, None
        else:
            name, state, lock = campaign.name, campaign.freeze.state, campaign.freeze.lock_sha256
            canonical = campaign.canonical
        if state == "frozen" and lock:
            return f"{name} (lock {lock[:12]})"
        content = json.dumps(canonical, sort_keys=True).encode()
        return (f"{name} (not frozen: {state}, content "
                f"{hashlib.sha256(content).hexdigest()[:12]})")

    @property
    def host(self) -> str:
        """What the run read of its host: the engine identity against the pin, and the judge's
        interpreter and platform."""
        identity = self.bundle.host_identity
        fields = ", ".join(f"{row.field}={row.host}"
                           for row in ([] if identity is None else identity.rows))
        env = self.bundle.environment
        return (f"{fields or 'no engine identity recorded'}; python {env.python} on "
                f"{env.system} {env.machine}")


def load_run(path: Path) -> Run:
    """A run folder (evidence/<run-id>) or its evidence.json."""
    return Run(*read_bundle_file(path, MergeInputError))


def check_mergeable(runs: Sequence[Run], *, allow_campaigns: bool = False,
                    allow_hosts: bool = False, lanes: bool = False) -> list[str]:
    """Refuses what may not be merged; returns the notes the report carries for what was
    merged only because the caller allowed it."""
    if len(runs) < 2:
        raise MergeRefused("merge needs at least two runs")
    seen: dict[str, str] = {}
    for run in runs:
        if run.run_id in seen:
            raise MergeRefused(f"{run.label}: run {run.run_id} is given twice "
                               f"({seen[run.run_id]} is the same run)")
        seen[run.run_id] = run.label
    notes = []
    first = runs[0]
    identities: tuple[tuple[str, bool, str, Callable[[Run], str]], ...] = (
        ("campaign", allow_campaigns, "--allow-different-campaigns", lambda r: r.campaign),
        ("host identity", allow_hosts, "--allow-different-hosts", lambda r: r.host))
    for what, allowed, flag, key in identities:
        differ = [r for r in runs[1:] if key(r) != key(first)]
        if not differ:
            continue
        line = "; ".join(f"{r.label}: {key(r)}" for r in differ)
        if not allowed:
            raise MergeRefused(f"different {what}: {first.label}: {key(first)}; {line} (their "
                               f"verdicts answer different questions; {flag} to merge anyway)")
        notes.append(f"Merged although the {what} differs ({flag}): {first.label}: "
                     f"{key(first)}; {line}.")
    if lanes:
        judged: dict[str, str] = {}
        for run in runs:
            for track in sorted(run.tracks):
                if track in judged:
                    raise MergeRefused(f"{run.label}: track {track} was also judged by "
                                       f"{judged[track]}; lanes of one run judge other tracks "
                                       "each (without --lanes, runs are read side by side)")
                judged[track] = run.label
    return notes


Key = tuple[str, str]  # (track, candidate)


def _latency_checks(run: Run) -> dict[Key, LatencyRatioCheck]:
    return {(c.track, c.arm): c for c in run.bundle.checks_of(LatencyRatioCheck)}


def _verdicts(run: Run) -> dict[Key, TrackVerdict]:
    return {(v.track, str(v.candidate)): v for v in run.bundle.verdicts}


def _cell(verdict: TrackVerdict | None, latency: LatencyRatioCheck | None) -> str:
    if verdict is None:
        return "<td style='color:#57606a'>not in this run</td>"
    name = verdict.verdict.value
    colour = VERDICT_COLOURS.get(name, "#000")
    reasons = ", ".join(verdict.reasons)
    opened = ", ".join(verdict.open_checks)
    label = stand_in_label(verdict.stand_in_weights)
    cell = latency_cell(latency) if latency is not None else "no latency check"
    return (f"<td><b style='color:{colour}'>{html.escape(name.upper())}</b>"
            + (f" <span class='ref2va-stand-in' style='color:#9a6700'>{html.escape(label)}"
               "</span>" if label else "") + "<br>"
            f"{cell}<br>"
            f"<small>{html.escape(reasons)}"
            + (f"; open: {html.escape(opened)}" if opened else "") + "</small></td>")


def _tracks(runs: Sequence[Run]) -> dict[str, list[str]]:
    """Every track in any run, with every candidate any run judged on it: the tracks in the
    campaign's order (5 s before 15 s, lossless before lossy), candidates as first seen."""
    tracks: dict[str, list[str]] = {}
    for run in runs:
        for v in run.bundle.verdicts:
            candidates = tracks.setdefault(v.track, [])
            if str(v.candidate) not in candidates:
                candidates.append(str(v.candidate))
    return {track: tracks[track] for track in sorted(tracks, key=track_rank)}


def merged_json(runs: Sequence[Run], notes: Sequence[str], *, lanes: bool = False
                ) -> dict[str, Any]:
    verdicts = {run.label: _verdicts(run) for run in runs}
    latency = {run.label: _latency_checks(run) for run in runs}
    rows = []
    for track, candidates in _tracks(runs).items():
        for candidate in candidates:
            per_run = {}
            for run in runs:
                if lanes and track not in run.tracks:
                    continue
                found = verdicts[run.label].get((track, candidate))
                summary = LatencySummary.of(latency[run.label].get((track, candidate)))
                per_run[run.label] = None if found is None else {
                    "verdict": found.verdict.value, "reasons": [r.value for r in found.reasons],
                    "open_checks": [c.value for c in found.open_checks],
                    "stand_in_weights": list(found.stand_in_weights),
                    "latency": None if summary is None else summary.json_dict()}
            rows.append({"track": track, "candidate": candidate, "runs": per_run})
    return {"schema": "ref2va-merge/1",
            "lanes": lanes,
            "runs": [{"label": r.label, "run_id": r.run_id, "status": r.bundle.status,
                      "started_at": r.bundle.started_at, "campaign": r.campaign,
                      "host": r.host, "harness_version": r.bundle.harness_version}
                     for r in runs],
            "notes": list(notes),
            "combined": None,  # never: each run's ratios stand against its own B0
            "rows": rows}


def _reports(runs: Sequence[Run], output: Path | None) -> dict[str, str]:
    """Each run's own report, as a link relative to the merged report's folder."""
    links = {}
    for run in runs:
        if output is not None and run.folder is not None and (run.folder / "report.html").is_file():
            links[run.label] = os.path.relpath(run.folder / "report.html", output)
    return links


def merged_html(runs: Sequence[Run], notes: Sequence[str], *, lanes: bool = False,
                output: Path | None = None) -> str:
    verdicts = {run.label: _verdicts(run) for run in runs}
    latency = {run.label: _latency_checks(run) for run in runs}

    def head(shown: Sequence[Run]) -> str:
        return "".join(f"<th>{html.escape(r.label)}<br><small>"
                       f"{html.escape(r.bundle.status)}, started "
                       f"{html.escape(r.bundle.started_at)}</small></th>" for r in shown)

    sections = []
    for track, candidates in _tracks(runs).items():
        shown = [r for r in runs if track in r.tracks] if lanes else list(runs)
        rows = "".join(
            f"<tr><td>{html.escape(candidate)}</td>"
            + "".join(_cell(verdicts[r.label].get((track, candidate)),
                            latency[r.label].get((track, candidate))) for r in shown)
            + "</tr>" for candidate in candidates)
        sections.append(f"<h3>{html.escape(track)}</h3><table class='ref2va-merged' {TABLE}>"
                        f"<tr><th>candidate</th>{head(shown)}</tr>{rows}</table>")
    links = _reports(runs, output)
    runs_table = "".join(
        f"<tr><td>{html.escape(r.label)}</td>"
        + (f"<td>{html.escape(', '.join(t for t in _tracks([r]) if t in r.tracks))}</td>"
           if lanes else "")
        + f"<td>{html.escape(r.campaign)}</td>"
        f"<td>{html.escape(r.host)}</td><td>{html.escape(r.bundle.harness_version)}"
        "</td><td>" + (f"<a href='{html.escape(links[r.label])}'>report</a>"
                       if r.label in links else "not found") + "</td></tr>" for r in runs)
    if lanes:
        title = f"Ref2VA campaign run in {len(runs)} lanes"
        intro = ("<p>One campaign run, its tracks split into lanes that ran at the same time, "
                 "each a session of its own on CPUs of its own. Each track was judged whole in "
                 "one lane: every verdict, ratio of medians and interval is that lane's, against "
                 "the B0 it measured itself under the frozen protocol; no ratio is added, "
                 "multiplied or averaged across lanes.</p>")
    else:
        title = "Ref2VA runs side by side"
        intro = ("<p>One column per run. Each verdict, ratio of medians and interval is that "
                 "run's, against the B0 it measured itself under the frozen protocol; no ratio "
                 "is added, multiplied or averaged across runs.</p>")
    what = "lane" if lanes else "run"
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}"
            f"</title></head><body><h1>{title}</h1>" + intro
            + "".join(f"<p style='color:#9a6700'>{html.escape(n)}</p>" for n in notes)
            + "".join(sections)
            + f"<h2>{what.capitalize()}s</h2><table {TABLE}><tr><th>{what}</th>"
            + ("<th>tracks</th>" if lanes else "")
            + "<th>campaign</th><th>host identity</th><th>harness</th><th>its own report</th>"
            "</tr>" + runs_table
            + f"</table><p>Each {what}'s own report (samples, charts, fidelity, evidence) and "
            "evidence.json stay in its folder.</p></body></html>\n")


def merge(paths: Sequence[Path], output: Path, *, allow_campaigns: bool = False,
          allow_hosts: bool = False, lanes: bool = False) -> Path:
    """Read the runs, refuse what may not be merged, write report.html and merge.json into
    ``output`` (created); returns the report's path."""
    runs = [load_run(Path(p)) for p in paths]
    notes = check_mergeable(runs, allow_campaigns=allow_campaigns, allow_hosts=allow_hosts,
                            lanes=lanes)
    output.mkdir(parents=True, exist_ok=True)
    atomic_write(output / "merge.json",
                 json.dumps(merged_json(runs, notes, lanes=lanes), indent=2) + "\n")
    report = output / "report.html"
    atomic_write(report, merged_html(runs, notes, lanes=lanes, output=output.resolve()))
    return report
