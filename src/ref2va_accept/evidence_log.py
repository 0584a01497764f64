"""The run's evidence as an append-only event log, and the projection that evidence.json holds.

Every addition to a run's evidence is one event, one JSON line of `events.jsonl`:

    {"seq": 7, "at": "2026-...Z", "event": "check", "data": {...}}

appended and fsynced before it counts. `evidence.json` is never the source: it is the projection
of the events (``project``), written at checkpoints, and can always be rebuilt from the log alone
(``rebuild``). The events, and what each does to the projection:

  start      the bundle's header (schema, run id, start time, harness and environment)
  campaign   sets `campaign` (identity and freeze state)
  instance   appends an engine instance's launch record to `instances`
  audit      sets the matching instance's `cleanup` (or appends an instance with only its audit)
  sample     appends a timed request to `samples`
  media      appends a media probe to `media`
  check      appends a check to `checks`
  note       appends a text to `notes`
  section    sets one of the optional top-level sections (SECTIONS) to its value (after the
             run, `ref2va-accept review --ingest` appends one: `human_evaluation`)
  verdicts   sets `verdicts`
  status     sets `status` and `finished_at`

An event whose append fails (a full disk) is not in the log and not applied: the log stays
readable (safe_write.append_line undoes a line cut short).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from .errors import Ref2VAError
from .safe_write import append_line

EVENTS_FILE = "events.jsonl"
EVIDENCE_FILE = "evidence.json"
SAMPLES_FILE = "samples.jsonl"


def utc_now() -> str:
    """An event's time stamp: UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")

EventKind = Literal["start", "campaign", "instance", "audit", "sample", "media", "check", "note",
                    "section", "verdicts", "status"]
EVENT_KINDS: frozenset[str] = frozenset(get_args(EventKind))
# Top-level keys set whole by a `section` event; absent from the bundle until one is recorded.
SECTIONS = frozenset({"bringup", "host_identity", "device_memory", "sanitized_files", "leftovers",
                      "disk", "ledger", "budget", "human_evaluation", "profiles"})
# The keys a `start` event must give: the bundle's header and its empty collections.
HEADER_KEYS = ("schema", "run_id", "status", "started_at", "finished_at", "harness_version",
               "environment", "campaign", "verdicts", "checks", "instances", "samples", "media",
               "notes")


class EvidenceLogError(Ref2VAError):
    """An events.jsonl that cannot be read back into a bundle."""


class EventLog:
    """The append side of one run's `events.jsonl` (the suite runs serially: no locking)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seq = 0

    def append(self, kind: EventKind, data: Any, at: str) -> dict[str, Any]:
        """Persist one event and return it as it reads back from the file."""
        if kind not in EVENT_KINDS:
            raise EvidenceLogError(f"{self.path}: unknown evidence event {kind!r}")
        line = json.dumps({"seq": self.seq + 1, "at": at, "event": kind, "data": data},
                          sort_keys=True)
        # A failed append is undone (WriteFailed): the log keeps its valid events and the next
        # event takes the same number.
        append_line(self.path, line)
        self.seq += 1
        # What the projection applies is what a rebuild will read: the JSON round trip, not the
        # caller's objects (tuples become lists, keys become strings).
        event: dict[str, Any] = json.loads(line)
        return event


def apply(bundle: dict[str, Any] | None, event: Mapping[str, Any]) -> dict[str, Any]:
    """The projection after one more event (``bundle`` is changed in place and returned)."""
    kind, where = event.get("event"), f"event {event.get('seq')}"
    data: Any = event.get("data")
    if kind == "start":
        if bundle is not None:
            raise EvidenceLogError(f"{where}: a second start event")
        missing = [k for k in HEADER_KEYS if k not in data]
        if missing:
            raise EvidenceLogError(f"{where}: start event lacks {', '.join(missing)}")
        return copy.deepcopy(dict(data))
    if bundle is None:
        raise EvidenceLogError(f"{where}: {kind!r} before the start event")
    if kind == "campaign":
        bundle["campaign"] = data
    elif kind == "instance":
        bundle["instances"].append(data)
    elif kind == "audit":
        for entry in bundle["instances"]:
            if entry.get("instance") == data.get("instance"):
                entry["cleanup"] = data
                break
        else:
            bundle["instances"].append({"instance": data.get("instance"), "cleanup": data})
    elif kind in ("sample", "media", "check"):
        bundle[{"sample": "samples", "media": "media", "check": "checks"}[kind]].append(data)
    elif kind == "note":
        bundle["notes"].append(data)
    elif kind == "section":
        if data.get("key") not in SECTIONS:
            raise EvidenceLogError(f"{where}: unknown section {data.get('key')!r}")
        bundle[data["key"]] = data["value"]
    elif kind == "verdicts":
        bundle["verdicts"] = data
    elif kind == "status":
        bundle["status"], bundle["finished_at"] = data["status"], data["finished_at"]
    else:
        raise EvidenceLogError(f"{where}: unknown evidence event {kind!r}")
    return bundle


def project(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The bundle (evidence.json's content) that a sequence of events makes."""
    bundle: dict[str, Any] | None = None
    for event in events:
        bundle = apply(bundle, event)
    if bundle is None:
        raise EvidenceLogError("no start event: the log is empty")
    return bundle


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """The events of a log in order. A last line cut short (the process killed mid-write) is
    left out; any other line that is not an event is an error naming it."""
    lines = path.read_text(encoding="utf-8").split("\n")
    complete = lines[:-1]  # every event ends with a newline; what follows the last is partial
    for number, line in enumerate(complete, 1):
        try:
            event = json.loads(line)
        except json.JSONDecodeError as exc:
            raise EvidenceLogError(f"{path}:{number}: not a JSON event ({exc})") from None
        if not isinstance(event, dict) or event.get("seq") != number:
            raise EvidenceLogError(f"{path}:{number}: expected event seq {number}, got "
                                   f"{str(event)[:80]}")
        yield event


def read_bundle_file(path: Path, error: type[Ref2VAError]) -> tuple[str, dict[str, Any], Path]:
    """A finished run's evidence.json, given its run folder or the file: (the run's label, the
    bundle, its folder). What cannot be read is one line in ``error``, naming the run."""
    file = path / EVIDENCE_FILE if path.is_dir() else path
    label = file.parent.name if file.name == EVIDENCE_FILE else file.name
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{label}: no {EVIDENCE_FILE} (not a run folder)") from None
    except OSError as exc:
        raise error(f"{label}: cannot read {file.name}: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"{label}: {file.name} is not JSON ({exc})") from None
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith(
            "ref2va-evidence/"):
        raise error(f"{label}: {file.name} is not a ref2va evidence bundle")
    return label, data, file.parent


def rebuild(folder: Path) -> dict[str, Any]:
    """A run's bundle rebuilt from its events.jsonl alone."""
    path = folder / EVENTS_FILE
    if not path.is_file():
        raise EvidenceLogError(f"{path}: no event log")
    return project(read_events(path))
