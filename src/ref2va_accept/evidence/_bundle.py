"""The evidence bundle of one run: everything seen, recorded as soon as it is seen.

Layout of `evidence/<run-id>/`:
  events.jsonl    every addition as one event, appended and fsynced as it happens (the source)
  evidence.json   the bundle: the events' projection, written atomically at checkpoints (each
                  test's end, each instance stop, the run's end); rebuildable from events.jsonl
  samples.jsonl   one line per timed request, appended and fsynced as each sample is taken
  report.html     the pytest-html report (self-contained), verdict table first
  logs/           one log per engine instance
  media/          the MP4s that came back, per track and arm
  dumps/          request-owned comparison points (safetensors + enabled_path.json)
An interrupted run keeps everything recorded so far; its status says `interrupted`. A file that
cannot be written (a full disk) is undone (safe_write), named once through ``on_failure``, and
the run's status becomes `failed_write`; what was recorded before stays valid. The JSON Schema
of evidence.json ships with the package (``SCHEMA_PATH``), generated from the record models
(evidence/_bundle_records.py and the record modules beside it; ``ref2va-accept schema``
writes it).

In memory the projection is typed: ``record`` is the run's records.Bundle, each event's payload
read into its model before the event is appended (a payload that does not match its model is
refused, naming the event and the field, and nothing is written). TRANSITIONAL: ``data`` is the
same projection as a plain dict, for the readers not yet converted to the models.
"""

from __future__ import annotations

import contextlib
import json
import platform
import secrets
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Final

from ref2va_accept import __version__
from ref2va_accept.core import WriteFailed, append_line, atomic_write, write_new
from ref2va_accept.evidence._bundle_records import (
    SCHEMA_VERSION,
    Bundle,
    TrackVerdict,
    bundle_text,
)
from ref2va_accept.evidence._checks_records import AnyCheck
from ref2va_accept.evidence._closed_sets import RunStatus
from ref2va_accept.evidence._host_records import Instance
from ref2va_accept.evidence._latency_records import Sample
from ref2va_accept.evidence._log import (
    EVENTS_FILE,
    EVIDENCE_FILE,
    SAMPLES_FILE,
    EventKind,
    EventLog,
    apply_payload,
    payload,
    rebuild,
    utc_now,
)
from ref2va_accept.evidence._media_records import Media
from ref2va_accept.evidence.sanitize import Sanitizer

__all__ = ["SCHEMA", "SCHEMA_PATH", "WRITE_FAILED", "EvidenceBundle", "new_run_id", "rebuild"]

SCHEMA = SCHEMA_VERSION
SCHEMA_PATH = Path(__file__).parents[1] / "schemas" / "evidence.schema.json"
# The final status of a run that could not write its evidence.
WRITE_FAILED: Final[RunStatus] = "failed_write"
_PACKAGES = ("pytest", "pytest-html", "httpx", "av", "numpy", "pydantic", "psutil", "torch")

def new_run_id() -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def package_versions() -> dict[str, str | None]:
    """The versions of the packages a run depends on (None: not installed)."""
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


@dataclass
class EvidenceBundle:
    """Records one run's evidence as events and keeps their typed projection (`record`) in
    memory.

    Every addition goes through ``_record``: its sanitized value is read into its record model,
    appended to events.jsonl and applied to `record`; ``checkpoint`` writes `record` to
    evidence.json. Not thread-safe: the suite runs serially.
    """

    folder: Path
    run_id: str
    sanitizer: Sanitizer
    projection: Bundle | None = None
    checks: list[AnyCheck] = field(default_factory=list)
    verdicts: list[TrackVerdict] = field(default_factory=list)
    log: EventLog | None = None
    # Every write that failed, in order; the first is the run's failure.
    failures: list[WriteFailed] = field(default_factory=list)
    # Told of the first failure only (the terminal's one line).
    on_failure: Callable[[WriteFailed], None] | None = None
    # Files already scrubbed during the run (sanitize_now): the run's end does not read them again.
    scrubbed: set[Path] = field(default_factory=set)
    # TRANSITIONAL: the projection as a plain dict (`data`), made once per projection state.

    @property
    def record(self) -> Bundle:
        """The run's evidence so far, typed (what evidence.json will hold)."""
        if self.projection is None:
            raise RuntimeError(f"{self.folder}: the bundle has no start event")
        return self.projection

    def _project(self, kind: EventKind, value: Any) -> None:
        self.projection = apply_payload(self.projection if kind != "start" else None, kind,
                                        value)

    @classmethod
    def create(cls, root: Path, run_id: str, sanitizer: Sanitizer,
               on_failure: Callable[[WriteFailed], None] | None = None) -> EvidenceBundle:
        folder = root / run_id
        try:
            (folder / "logs").mkdir(parents=True, exist_ok=True)
            (folder / "media").mkdir(exist_ok=True)
        except OSError as exc:
            raise WriteFailed(folder, exc) from exc
        bundle = cls(folder=folder, run_id=run_id, sanitizer=sanitizer,
                     log=EventLog(folder / EVENTS_FILE), on_failure=on_failure)
        bundle._record("start", {
            "schema": SCHEMA,
            "run_id": run_id,
            "status": "running",
            "started_at": utc_now(),
            "finished_at": None,
            "harness_version": __version__,
            "environment": {
                "python": platform.python_version(),
                "implementation": sys.implementation.name,
                "machine": platform.machine(),
                "system": platform.system(),
                "packages": package_versions(),
            },
            "campaign": None,
            "verdicts": [],
            "checks": [],
            "instances": [],
            "samples": [],
            "media": [],
            "notes": [],
        })
        bundle.checkpoint()
        return bundle

    # -- paths -----------------------------------------------------------------------------------
    def log_path(self, instance_id: str) -> Path:
        return self.folder / "logs" / f"{instance_id}.log"

    def media_path(self, track: str, arm: str, name: str) -> Path:
        folder = self.folder / "media" / track / arm
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._failed(WriteFailed(folder, exc)) from exc
        return folder / name

    def write_media(self, track: str, arm: str, name: str, body: bytes) -> Path:
        """An MP4 that came back, under media/<track>/<arm>/ (nothing of it kept on failure)."""
        path = self.media_path(track, arm, name)
        try:
            write_new(path, body)
        except WriteFailed as exc:
            raise self._failed(exc) from exc.error
        return path

    @property
    def dumps_root(self) -> Path:
        return self.folder / "dumps"

    def dump_dir(self, track: str, instance: str, request: str) -> Path:
        """A fresh folder for one request's comparison points (the engine creates it)."""
        return self.dumps_root / track / instance / request

    def relative(self, path: Path) -> str:
        return path.relative_to(self.folder).as_posix()

    # -- write failures --------------------------------------------------------------------------
    def _failed(self, failure: WriteFailed) -> WriteFailed:
        """Remember a write that failed (the first one is said through on_failure)."""
        self.failures.append(failure)
        if len(self.failures) == 1 and self.on_failure is not None:
            self.on_failure(failure)
        return failure

    # -- additions (each an event, persisted at once) --------------------------------------------
    def _typed(self, kind: EventKind, clean: Any) -> Any:
        """The sanitized payload as a rebuild will read it (the JSON round trip), typed;
        EvidenceLogError naming the event and the field when it is not its record."""
        return payload(kind, json.loads(json.dumps(clean)), f"{self.folder.name}: {kind}")

    def _record(self, kind: EventKind, value: Any) -> Any:
        """Append one sanitized event and apply it; returns the value as recorded. An event
        whose payload is not its record is refused before anything is written
        (EvidenceLogError); one that cannot be appended is not applied either (WriteFailed)."""
        if self.log is None:
            raise RuntimeError(f"{self.folder}: a bundle read back from its log records nothing")
        clean = self.sanitizer.value(value)
        typed = self._typed(kind, clean)
        try:
            event = self.log.append(kind, clean, utc_now())
        except WriteFailed as exc:
            raise self._failed(exc) from exc.error
        self._project(kind, typed)
        return event.data

    def set_campaign(self, info: dict[str, Any]) -> None:
        self._record("campaign", info)

    def add_instance(self, launch: dict[str, Any]) -> None:
        self._record("instance", launch)

    def add_audit(self, audit: dict[str, Any]) -> None:
        self._record("audit", audit)

    def add_sample(self, sample: dict[str, Any]) -> None:
        clean = self._record("sample", sample)
        # samples.jsonl stays: one line per timed request, the sample alone (published).
        try:
            append_line(self.folder / SAMPLES_FILE, json.dumps(clean, sort_keys=True))
        except WriteFailed as exc:
            raise self._failed(exc) from exc.error

    def add_media(self, record: dict[str, Any]) -> None:
        self._record("media", record)

    def add_check(self, check: AnyCheck) -> None:
        """One check, its JSON as its writer built it (every key it was given)."""
        self._record("check", check.json_dict())
        self.checks.append(check)

    def note(self, text: str) -> None:
        self._record("note", self.sanitizer.text(text))

    def set_section(self, key: str, value: Any) -> None:
        """One optional top-level section (host_identity, device_memory, sanitized_files)."""
        self._record("section", {"key": key, "value": value})

    def add_profile(self, entry: Mapping[str, Any]) -> None:
        """One arm's profile (arms/_profiling.py) added to the `profiles` section."""
        earlier = [p.json_dict() for p in self.record.profiles or []]
        self.set_section("profiles", [*earlier, dict(entry)])

    def checkpoint(self) -> None:
        """Write the projection to evidence.json (atomically; the old one stays on failure)."""
        try:
            atomic_write(self.folder / EVIDENCE_FILE, bundle_text(self.record))
        except WriteFailed as exc:
            raise self._failed(exc) from exc.error

    # -- queries ---------------------------------------------------------------------------------
    def checks_where(self, *, track: str | None = None, arm: str | None = None,
                     name: str | None = None) -> list[AnyCheck]:
        """The checks recorded so far (as judged, not sanitized), filtered on what is given."""
        return [c for c in self.checks if (track is None or c.track == track)
                and (arm is None or c.arm == arm) and (name is None or c.name == name)]

    def samples_where(self, *, track: str | None = None, arm: str | None = None,
                      kind: str | None = None, ok: bool | None = None) -> list[Sample]:
        """The timed requests recorded so far (as in evidence.json), filtered on what is given."""
        return self.record.samples_where(track=track, arm=arm, kind=kind, ok=ok)

    def instances_where(self, *, track: str | None = None,
                        arm: str | None = None) -> list[Instance]:
        """The engine instances (launch record and, once stopped, `cleanup`)."""
        return self.record.instances_where(track=track, arm=arm)

    def media_of(self, sample_id: str) -> Media | None:
        """The media probe of one sample, None when its body was never probed."""
        return self.record.media_of(sample_id)

    def media_file(self, sample: Sample) -> Path | None:
        """Where a sample's MP4 lies, None when it kept none."""
        return self.folder / sample.media_file if sample.media_file else None

    # -- end of run ------------------------------------------------------------------------------
    def finish(self, status: RunStatus,
               judge: Callable[[list[AnyCheck]], list[TrackVerdict]]) -> None:
        """The verdicts and the final status (`failed_write` once any write failed), recorded
        as far as the disk allows: an event that cannot be appended is still applied to the
        projection, so that evidence.json (if it can be written) and the report say it."""
        self.verdicts = judge(self.checks)
        self._settle("verdicts", [v.json_dict_full() for v in self.verdicts])
        self._settle("status", {"status": WRITE_FAILED if self.failures else status,
                                "finished_at": utc_now()})
        with contextlib.suppress(WriteFailed):
            self.checkpoint()

    def fail_late(self, failure: WriteFailed) -> None:
        """A write that failed after `finish` (the report): the status becomes failed_write."""
        self._failed(failure)
        self._settle("status", {"status": WRITE_FAILED, "finished_at": utc_now()})
        with contextlib.suppress(WriteFailed):
            self.checkpoint()

    def _settle(self, kind: EventKind, value: Any) -> None:
        try:
            self._record(kind, value)
        except WriteFailed:
            self._project(kind, self._typed(kind, self.sanitizer.value(value)))

    @property
    def status(self) -> str:
        return self.record.status

    def sanitize_now(self, folder: Path) -> None:
        """Scrub a folder of the run now rather than at its end: files whose hashes go into the
        evidence (profiler traces, which name their host and path) must be hashed as published.
        The run's end then leaves them alone (they can be hundreds of MB)."""
        try:
            self.sanitizer.files(folder)
        except WriteFailed as exc:
            raise self._failed(exc) from exc.error
        self.scrubbed.update(p.resolve() for p in folder.rglob("*") if p.is_file())

    def sanitize_files(self) -> int:
        """Scrub every text file of the run (logs, report) once the run is over. A file whose
        clean copy cannot be written stays as it was (WriteFailed, after every other file)."""
        try:
            changed = self.sanitizer.files(self.folder, skip=frozenset(self.scrubbed))
        except WriteFailed as exc:
            raise self._failed(exc) from exc.error
        self.set_section("sanitized_files", changed)
        self.checkpoint()
        return changed
