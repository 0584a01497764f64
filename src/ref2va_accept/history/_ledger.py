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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ref2va_accept.campaign import LoadedCampaign
from ref2va_accept.core import ArmRole, Ref2VAError, WriteFailed
from ref2va_accept.evidence import (
    EnabledPathAuditCheck,
    EvidenceBundle,
    LatencyRatioCheck,
    LatencySummary,
    LedgerEntry,
    LosslessGateCheck,
    LosslessGateData,
    LossyGateCheck,
    LossyGateData,
    TrackVerdict,
    stand_in_label,
    utc_now,
)
from ref2va_accept.planning import budget_entry, device_count
from ref2va_accept.report import ratio_text

__all__ = ["LEDGER_ENV", "LEDGER_SCHEMA", "LedgerError", "append", "attempts", "candidate_entries",
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
    base, cand = campaign.profile(arms[ArmRole.B0]), campaign.profile(arms[arm_id])
    diff: dict[str, Any] = {}
    for part, b, c in (("args", base.args, cand.args), ("env", base.env, cand.env)):
        changed = {k: {ArmRole.B0.value: b.get(k), "candidate": c.get(k)}
                   for k in sorted(set(b) | set(c)) if b.get(k) != c.get(k)}
        if changed:
            diff[part] = changed
    if arms[arm_id].request:
        diff["request"] = dict(arms[arm_id].request)
    diff["declared"] = cand.declared
    return diff


def _quality(bundle: EvidenceBundle, track: str, arm: str) -> dict[str, Any] | None:
    """The candidate's quality gate in brief (the lossless one, else the lossy one)."""
    record = bundle.record
    lossless = record.check_of(LosslessGateCheck, track, arm)
    gate = lossless or record.check_of(LossyGateCheck, track, arm)
    if gate is None:
        return None
    summary: dict[str, Any] = {
        "gate": gate.name.value, "status": gate.status.value,
        "reason": None if gate.reason is None else gate.reason.value, "detail": gate.detail}
    if isinstance(gate, LosslessGateCheck):
        summary["first_divergence"] = (gate.data.first_divergence
                                       if isinstance(gate.data, LosslessGateData) else None)
    else:
        summary["worst"] = gate.data.worst if isinstance(gate.data, LossyGateData) else None
    return summary


def candidate_entries(bundle: EvidenceBundle, campaign: LoadedCampaign, *,
                      campaign_lock: str | None) -> list[LedgerEntry]:
    """One entry per candidate verdict of this run (track-only rows judge no candidate)."""
    arms = {a.id: a for a in campaign.model.candidates}
    record = bundle.record
    found = []
    for verdict in bundle.verdicts:
        arm = arms.get(verdict.candidate or "")
        if arm is None:
            continue
        audit = record.check_of(EnabledPathAuditCheck, verdict.track, arm.id)
        instances = bundle.instances_where(track=verdict.track, arm=arm.id)
        found.append(LedgerEntry.model_validate({
            "schema": LEDGER_SCHEMA, "kind": "attempt", "at": utc_now(), "run_id": bundle.run_id,
            "run_status": bundle.status, "campaign": campaign.model.name,
            "campaign_lock": campaign_lock, "track": verdict.track, "candidate": arm.id,
            "description": arm.description, "hypothesis": arm.hypothesis,
            "attribution": arm.attribution.model_dump() if arm.attribution else None,
            "change_class": arm.change_class,
            "scope_decision": arm.scope_decision.model_dump() if arm.scope_decision else None,
            "enabled_path": None if audit is None else {
                "status": audit.status.value, "detail": audit.detail, **audit.data.json_dict()},
            "profile_diff": _profile_diff(campaign, arm.id),
            "instances": len(instances),
            "verdict": verdict.verdict, "reasons": list(verdict.reasons),
            "open_checks": list(verdict.open_checks),
            "attempt": verdict.attempt, "earlier": list(verdict.earlier),
            "holm": verdict.holm, "p_value": verdict.p_value,
            "stand_in_weights": list(verdict.stand_in_weights),
            # where a bit-exact failure first parted from B0 (the localization pass), or ""
            "localized": verdict.localized,
            "latency": LatencySummary.of(record.check_of(LatencyRatioCheck, verdict.track,
                                                         arm.id)),
            "quality": _quality(bundle, verdict.track, arm.id)}))
    return found


def run_entry(bundle: EvidenceBundle, campaign: LoadedCampaign, *,
              campaign_lock: str | None) -> LedgerEntry:
    """The run's own entry: what it cost, charged to the budget whatever its status."""
    record = bundle.record
    wall = 0.0
    with contextlib.suppress(TypeError, ValueError):
        wall = (datetime.fromisoformat(str(record.finished_at))
                - datetime.fromisoformat(str(record.started_at))).total_seconds()
    return LedgerEntry.model_validate({
        "schema": LEDGER_SCHEMA, "at": utc_now(), "run_id": bundle.run_id,
        "run_status": bundle.status, "campaign": campaign.model.name,
        "campaign_lock": campaign_lock, "wall_s": round(max(wall, 0.0), 3),
        **budget_entry(record, device_count(campaign))})


def attempts(ledger: Iterable[LedgerEntry]) -> list[LedgerEntry]:
    """The candidate attempts (entries without a kind are attempts too)."""
    return [e for e in ledger if e.kind == "attempt"]


def with_attempt(row: TrackVerdict, campaign: str, ledger: Iterable[LedgerEntry]
                 ) -> TrackVerdict:
    """The row with its attempt number and the earlier attempts' verdicts in `campaign`'s
    ledger (a row without a candidate has no attempts)."""
    if row.candidate is None:
        return row
    earlier = [e for e in attempts(ledger) if e.campaign == campaign
               and e.track == row.track and e.candidate == row.candidate]
    said = tuple(f"{e.run_id}: {e.verdict}"
                 + (f" ({', '.join(e.reasons)})" if e.reasons else "")
                 for e in earlier)
    return row.model_copy(update={"attempt": len(earlier) + 1, "earlier": said})


def entry_json(entry: LedgerEntry) -> dict[str, Any]:
    """An entry as its ledger line holds it (keys sorted, as `append` writes them)."""
    line: dict[str, Any] = json.loads(json.dumps(entry.json_dict(), sort_keys=True))
    return line


def append(path: Path, new: Sequence[LedgerEntry]) -> None:
    """Append entries, one line each, under an exclusive lock, then fsync. Never rewrites."""
    if not new:
        return
    body = "".join(json.dumps(e.json_dict(), sort_keys=True, ensure_ascii=False) + "\n"
                   for e in new)
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
    entries: tuple[LedgerEntry, ...]
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
    found: list[LedgerEntry] = []
    torn = False
    for number, line in enumerate(lines, start=1):
        try:
            entry = LedgerEntry.model_validate_json(line)
        except ValidationError as exc:
            if number == len(lines) and not line.endswith("\n"):
                torn = True
                break
            raise LedgerError(f"{path.name}: line {number}: {_not_an_entry(exc)}") from None
        found.append(entry)
    return Ledger(tuple(found), torn)


def _not_an_entry(exc: ValidationError) -> str:
    """Why a line is not an entry, in one line: its first problem (records.LedgerEntry)."""
    first = exc.errors()[0]
    where = ".".join(map(str, first["loc"]))
    return f"not a ledger entry ({where + ': ' if where else ''}{first['msg']})"


def table_lines(ledger: Iterable[LedgerEntry]) -> list[str]:
    """The ledger as a plain table, oldest first."""
    rows = [("at", "run", "status", "track", "candidate", "class", "verdict", "attempt",
             "Holm", "latency", "reasons")]
    for e in attempts(ledger):
        rows.append((str(e.at), str(e.run_id), str(e.run_status),
                     str(e.track), str(e.candidate),
                     str(e.change_class or "not declared"),
                     " ".join(filter(None, (str(e.verdict).upper(),
                                            stand_in_label(e.stand_in_weights)))),
                     str(e.attempt or "-"),
                     str(e.holm or "-"),
                     ratio_text(e.latency) if e.latency is not None else "-",
                     ", ".join(e.reasons or [])
                     + (f" (first divergence: {e.localized})" if e.localized else "")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(r[i].ljust(widths[i]) for i in range(len(widths))) + "  " + r[-1]
            for r in rows]
