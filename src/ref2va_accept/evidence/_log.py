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

The projection is typed (records.Bundle): every event's payload is read into its record model
(``payload``), so that an event whose payload does not match its model (a misspelt key, a value
of the wrong kind) is an error naming the event and the field, never a silently different
bundle. evidence.json is the bundle's JSON (records.bundle_text).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import ValidationError

from ref2va_accept.core import Ref2VAError, append_line
from ref2va_accept.evidence._bundle_records import (
    EVENT_MODELS,
    SECTION_KEYS,
    Bundle,
    Event,
    SectionEvent,
    looks_like_bundle,
    section_value,
)
from ref2va_accept.evidence._host_records import Instance

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
SECTIONS = frozenset(SECTION_KEYS)
# The keys a `start` event must give: the bundle's header and its empty collections.
HEADER_KEYS = ("schema", "run_id", "status", "started_at", "finished_at", "harness_version",
               "environment", "campaign", "verdicts", "checks", "instances", "samples", "media",
               "notes")


class EvidenceLogError(Ref2VAError):
    """An events.jsonl that cannot be read back into a bundle, or an event whose payload is not
    its record."""


class EventLog:
    """The append side of one run's `events.jsonl` (the suite runs serially: no locking)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seq = 0

    def append(self, kind: EventKind, data: Any, at: str) -> Event:
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
        return Event.model_validate_json(line)


def _errors(exc: ValidationError) -> str:
    shown = [f"{'.'.join(map(str, e['loc'])) or '<payload>'}: {e['msg']}"
             for e in exc.errors()[:5]]
    more = len(exc.errors()) - len(shown)
    return "; ".join(shown) + (f" (and {more} more)" if more > 0 else "")


def payload(kind: str, data: Any, where: str = "event") -> Any:
    """An event's payload read into its record model (a section: (key, typed value));
    EvidenceLogError naming the event, and each field that does not match, otherwise."""
    what = f"{kind} event"
    try:
        if kind == "start":
            missing = [k for k in HEADER_KEYS if not isinstance(data, Mapping) or k not in data]
            if missing:
                raise EvidenceLogError(f"{where}: start event lacks {', '.join(missing)}")
            return Bundle.model_validate(data)
        if kind == "section":
            section = SectionEvent.model_validate(data)
            if section.key not in SECTIONS:
                raise EvidenceLogError(f"{where}: unknown section {section.key!r}")
            what = f"section {section.key!r}"
            return section.key, section_value(section.key, section.value)
        model = EVENT_MODELS.get(kind)
        if model is None:
            raise EvidenceLogError(f"{where}: unknown evidence event {kind!r}")
        return model(data)
    except ValidationError as exc:
        raise EvidenceLogError(f"{where}: the {what} does not match its record: "
                               f"{_errors(exc)}") from None


def apply_payload(bundle: Bundle | None, kind: str, value: Any, where: str = "event") -> Bundle:
    """The projection after one more event whose payload is already typed (``payload``);
    ``bundle`` is changed in place and returned."""
    if kind == "start":
        if bundle is not None:
            raise EvidenceLogError(f"{where}: a second start event")
        started: Bundle = value
        return started
    if bundle is None:
        raise EvidenceLogError(f"{where}: {kind!r} before the start event")
    if kind == "campaign":
        bundle.campaign = value
    elif kind == "instance":
        bundle.instances.append(value)
    elif kind == "audit":
        for entry in bundle.instances:
            if entry.instance == value.instance:
                entry.cleanup = value
                break
        else:
            # An audit of an instance this log never launched: the instance and its audit alone.
            bundle.instances.append(Instance(instance=value.instance, cleanup=value))
    elif kind == "sample":
        bundle.samples.append(value)
    elif kind == "media":
        bundle.media.append(value)
    elif kind == "check":
        bundle.checks.append(value)
    elif kind == "note":
        bundle.notes.append(value)
    elif kind == "section":
        key, typed = value
        setattr(bundle, key, typed)
    elif kind == "verdicts":
        bundle.verdicts = value
    elif kind == "status":
        bundle.status, bundle.finished_at = value.status, value.finished_at
    else:
        raise EvidenceLogError(f"{where}: unknown evidence event {kind!r}")
    return bundle


def apply(bundle: Bundle | None, event: Event) -> Bundle:
    """The projection after one more event (``bundle`` is changed in place and returned)."""
    where = f"event {event.seq}"
    return apply_payload(bundle, event.event, payload(event.event, event.data, where), where)


def project(events: Iterable[Event]) -> Bundle:
    """The bundle (evidence.json's content) that a sequence of events makes."""
    bundle: Bundle | None = None
    for event in events:
        bundle = apply(bundle, event)
    if bundle is None:
        raise EvidenceLogError("no start event: the log is empty")
    return bundle


def read_events(path: Path) -> Iterator[Event]:
    """The events of a log in order. A last line cut short (the process killed mid-write) is
    left out; any other line that is not an event is an error naming it."""
    lines = path.read_text(encoding="utf-8").split("\n")
    complete = lines[:-1]  # every event ends with a newline; what follows the last is partial
    for number, line in enumerate(complete, 1):
        try:
            parsed = json.loads(line)
        except json.JSONDecodeError as exc:
            raise EvidenceLogError(f"{path}:{number}: not a JSON event ({exc})") from None
        try:
            event = Event.model_validate(parsed)
        except ValidationError:
            event = None
        if event is None or event.seq != number:
            raise EvidenceLogError(f"{path}:{number}: expected event seq {number}, got "
                                   f"{str(parsed)[:80]}")
        yield event


def _read_json(path: Path, error: type[Ref2VAError]) -> tuple[str, dict[str, Any], Path]:
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
    if not looks_like_bundle(data):
        raise error(f"{label}: {file.name} is not a ref2va evidence bundle")
    found: dict[str, Any] = data
    return label, found, file.parent


def read_bundle_file(path: Path, error: type[Ref2VAError]) -> tuple[str, Bundle, Path]:
    """A finished run's evidence.json, given its run folder or the file: (the run's label, the
    bundle, its folder). What cannot be read, or does not match the records, is one line in
    ``error``, naming the run."""
    label, data, folder = _read_json(path, error)
    try:
        bundle = Bundle.model_validate(data)
    except ValidationError as exc:
        raise error(f"{label}: {EVIDENCE_FILE} does not match the evidence records: "
                    f"{_errors(exc)}") from None
    return label, bundle, folder


def rebuild(folder: Path) -> Bundle:
    """A run's bundle rebuilt from its events.jsonl alone."""
    path = folder / EVENTS_FILE
    if not path.is_file():
        raise EvidenceLogError(f"{path}: no event log")
    return project(read_events(path))
