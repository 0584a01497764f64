"""The campaign's ledger: every candidate attempt of every run, kept beside the campaign.

One JSON line per candidate and track a run judged (``<campaign>.ledger.jsonl``), appended under
a lock and fsynced when the run ends, whatever its status (complete, stopped, interrupted,
failed_write): failed, inconclusive and abandoned attempts stay on record and nothing is ever
rewritten. Each entry carries the candidate record the campaign declares (hypothesis,
attribution, change class, scope decision), what ran (the enabled path the audit saw, the launch
profile's difference from B0's, the instances), and what was found (verdict, reasons, open checks,
the latency ratio and interval against the target, a quality summary). ``ref2va-accept ledger``
prints it; the report lists the campaign's attempts, rejected and inconclusive beside supported.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from . import budget
from .campaign import LoadedCampaign
from .check_records import TrackVerdict, stand_in_label
from .errors import Ref2VAError
from .evidence import EvidenceBundle
from .evidence_log import utc_now
from .report_cells import latency_summary, ratio_text
from .safe_write import WriteFailed

__all__ = ["LEDGER_ENV", "LEDGER_SCHEMA", "LedgerError", "append", "attempts", "entries",
           "ledger_path", "read_ledger", "run_entry", "table_lines"]

LEDGER_SCHEMA = "ref2va-ledger/1"
# A ledger elsewhere than beside the campaign, for every run that inherits it (pytest's --ledger
# wins over it).
LEDGER_ENV = "REF2VA_LEDGER"


class LedgerError(Ref2VAError):
    """A ledger that cannot be read (a line that is not an entry)."""


def ledger_path(campaign_path: str | os.PathLike[str]) -> Path:
    path = Path(campaign_path)
    return path.with_name(f"{path.stem}.ledger.jsonl")


def _profile_diff(campaign: LoadedCampaign, arm_id: str) -> dict[str, Any]:
    """The candidate's launch profile and request against B0's: what it changes."""
    arms = {a.id: a for a in campaign.model.arms()}
    base, cand = campaign.profile(arms["b0"]), campaign.profile(arms[arm_id])
    diff: dict[str, Any] = {}
    for part, b, c in (("args", base.args, cand.args), ("env", base.env, cand.env)):
        changed = {k: {"b0": b.get(k), "candidate": c.get(k)}
                   for k in sorted(set(b) | set(c)) if b.get(k) != c.get(k)}
        if changed:
            diff[part] = changed
    if arms[arm_id].request:
        diff["request"] = dict(arms[arm_id].request)
    diff["declared"] = cand.declared
    return diff


def _check(bundle: EvidenceBundle, track: str, arm: str, name: str) -> Mapping[str, Any] | None:
    return next((c for c in bundle.data["checks"] if c["track"] == track and c["arm"] == arm
                 and c["name"] == name), None)


def _quality(bundle: EvidenceBundle, track: str, arm: str) -> dict[str, Any] | None:
    for name in ("lossless_gate", "lossy_gate"):
        check = _check(bundle, track, arm, name)
        if check is None:
            continue
        data = check.get("data") or {}
        summary: dict[str, Any] = {"gate": name, "status": check.get("status"),
                                   "reason": check.get("reason"), "detail": check.get("detail")}
        if name == "lossless_gate":
            summary["first_divergence"] = data.get("first_divergence")
        else:
            summary["worst"] = data.get("worst")
        return summary
    return None


def entries(bundle: EvidenceBundle, campaign: LoadedCampaign, *,
            campaign_lock: str | None) -> list[dict[str, Any]]:
    """One entry per candidate verdict of this run (track-only rows judge no candidate)."""
    arms = {a.id: a for a in campaign.model.candidates}
    found = []
    for verdict in bundle.verdicts:
        arm = arms.get(verdict.candidate or "")
        if arm is None:
            continue
        audit = _check(bundle, verdict.track, arm.id, "enabled_path_audit")
        instances = bundle.instances_where(track=verdict.track, arm=arm.id)
        found.append({
            "schema": LEDGER_SCHEMA, "kind": "attempt", "at": utc_now(), "run_id": bundle.run_id,
            "run_status": bundle.status, "campaign": campaign.model.name,
            "campaign_lock": campaign_lock, "track": verdict.track, "candidate": arm.id,
            "description": arm.description, "hypothesis": arm.hypothesis,
            "attribution": arm.attribution.model_dump() if arm.attribution else None,
            "change_class": arm.change_class,
            "scope_decision": arm.scope_decision.model_dump() if arm.scope_decision else None,
            "enabled_path": None if audit is None else {
                "status": audit.get("status"), "detail": audit.get("detail"),
                **dict(audit.get("data") or {})},
            "profile_diff": _profile_diff(campaign, arm.id),
            "instances": len(instances),
            "verdict": verdict.verdict, "reasons": list(verdict.reasons),
            "open_checks": list(verdict.open_checks),
            "attempt": verdict.attempt, "earlier": list(verdict.earlier),
            "holm": verdict.holm, "p_value": verdict.p_value,
            "stand_in_weights": list(verdict.stand_in_weights),
            # where a bit-exact failure first parted from B0 (the localization pass), or ""
            "localized": verdict.localized,
            "latency": latency_summary(_check(bundle, verdict.track, arm.id, "latency_ratio")),
            "quality": _quality(bundle, verdict.track, arm.id)})
    return found


def run_entry(bundle: EvidenceBundle, campaign: LoadedCampaign, *,
              campaign_lock: str | None) -> dict[str, Any]:
    """The run's own entry: what it cost, charged to the budget whatever its status."""
    started, finished = bundle.data.get("started_at"), bundle.data.get("finished_at")
    wall = 0.0
    with contextlib.suppress(TypeError, ValueError):
        wall = (datetime.fromisoformat(str(finished))
                - datetime.fromisoformat(str(started))).total_seconds()
    return {"schema": LEDGER_SCHEMA, "at": utc_now(), "run_id": bundle.run_id,
            "run_status": bundle.status, "campaign": campaign.model.name,
            "campaign_lock": campaign_lock, "wall_s": round(max(wall, 0.0), 3),
            **budget.run_entry(bundle.data, budget.device_count(campaign))}


def attempts(ledger: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The candidate attempts (entries without a kind are attempts too)."""
    return [e for e in ledger if e.get("kind", "attempt") == "attempt"]


def with_attempt(row: TrackVerdict, campaign: str, ledger: Iterable[Mapping[str, Any]]
                 ) -> TrackVerdict:
    """The row with its attempt number and the earlier attempts' verdicts in `campaign`'s
    ledger (a row without a candidate has no attempts)."""
    if row.candidate is None:
        return row
    earlier = [e for e in attempts(ledger) if e.get("campaign") == campaign
               and e.get("track") == row.track and e.get("candidate") == row.candidate]
    said = tuple(f"{e.get('run_id')}: {e.get('verdict')}"
                 + (f" ({', '.join(e.get('reasons') or [])})" if e.get("reasons") else "")
                 for e in earlier)
    return replace(row, attempt=len(earlier) + 1, earlier=said)


def append(path: Path, new: Sequence[Mapping[str, Any]]) -> None:
    """Append entries, one line each, under an exclusive lock, then fsync. Never rewrites."""
    if not new:
        return
    body = "".join(json.dumps(e, sort_keys=True, ensure_ascii=False) + "\n" for e in new)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            view = memoryview(body.encode("utf-8"))
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
    except OSError as exc:
        raise WriteFailed(path, exc) from exc


@dataclass(frozen=True)
class Ledger:
    entries: tuple[dict[str, Any], ...]
    torn_tail: bool  # the last line was cut short (a run killed mid-append): left as it is


def read_ledger(path: Path) -> Ledger:
    """Every entry in order; a cut-short last line is reported, not an error; any other line
    that is not an entry names the file and line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    except FileNotFoundError:
        return Ledger((), False)
    except (OSError, UnicodeDecodeError) as exc:
        raise LedgerError(f"{path.name}: cannot read: {exc}") from None
    found: list[dict[str, Any]] = []
    torn = False
    for number, line in enumerate(lines, start=1):
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict) or entry.get("schema") != LEDGER_SCHEMA:
                raise ValueError("not a ledger entry")
        except ValueError as exc:
            if number == len(lines) and not line.endswith("\n"):
                torn = True
                break
            raise LedgerError(f"{path.name}: line {number}: {exc}") from None
        found.append(entry)
    return Ledger(tuple(found), torn)


def table_lines(ledger: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ledger as a plain table, oldest first."""
    rows = [("at", "run", "status", "track", "candidate", "class", "verdict", "attempt",
             "Holm", "latency", "reasons")]
    for e in attempts(ledger):
        rows.append((str(e.get("at")), str(e.get("run_id")), str(e.get("run_status")),
                     str(e.get("track")), str(e.get("candidate")),
                     str(e.get("change_class") or "not declared"),
                     " ".join(filter(None, (str(e.get("verdict")).upper(),
                                            stand_in_label(e.get("stand_in_weights"))))),
                     str(e.get("attempt") or "-"),
                     str(e.get("holm") or "-"),
                     ratio_text(e["latency"]) if e.get("latency") else "-",
                     ", ".join(e.get("reasons") or [])
                     + (f" (first divergence: {e['localized']})" if e.get("localized")
                        else "")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(r[i].ljust(widths[i]) for i in range(len(widths))) + "  " + r[-1]
            for r in rows]
