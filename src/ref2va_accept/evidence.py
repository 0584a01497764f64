"""The evidence bundle of one run: everything seen, written as soon as it is seen.

Layout of `evidence/<run-id>/`:
  evidence.json   the whole bundle, rewritten atomically after every addition
  samples.jsonl   one line per timed request, appended and flushed as each sample is taken
  report.html     the pytest-html report (self-contained), verdict table first
  logs/           one log per engine instance
  media/          the MP4s that came back, per track and arm
  dumps/          request-owned comparison points (safetensors + enabled_path.json)
An interrupted run keeps everything written so far; its status says `interrupted`.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from . import __version__
from .sanitize import Sanitizer
from .verdicts import CheckResult, TrackVerdict

SCHEMA = "ref2va-evidence/1"
_PACKAGES = ("pytest", "pytest-html", "httpx", "av", "numpy", "pydantic", "psutil", "torch")


def new_run_id() -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _packages() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


@dataclass
class EvidenceBundle:
    """Collects and persists one run's evidence. Not thread-safe: the suite runs serially."""

    folder: Path
    run_id: str
    sanitizer: Sanitizer
    data: dict[str, Any] = field(default_factory=dict)
    checks: list[CheckResult] = field(default_factory=list)
    verdicts: list[TrackVerdict] = field(default_factory=list)

    @classmethod
    def create(cls, root: Path, run_id: str, sanitizer: Sanitizer) -> EvidenceBundle:
        folder = root / run_id
        (folder / "logs").mkdir(parents=True, exist_ok=True)
        (folder / "media").mkdir(exist_ok=True)
        bundle = cls(folder=folder, run_id=run_id, sanitizer=sanitizer)
        bundle.data = {
            "schema": SCHEMA,
            "run_id": run_id,
            "status": "running",
            "started_at": _now(),
            "finished_at": None,
            "harness_version": __version__,
            "environment": {
                "python": platform.python_version(),
                "implementation": sys.implementation.name,
                "machine": platform.machine(),
                "system": platform.system(),
                "packages": _packages(),
            },
            "campaign": None,
            "verdicts": [],
            "checks": [],
            "instances": [],
            "samples": [],
            "media": [],
            "notes": [],
        }
        bundle.write()
        return bundle

    # -- paths -----------------------------------------------------------------------------------
    def log_path(self, instance_id: str) -> Path:
        return self.folder / "logs" / f"{instance_id}.log"

    def media_path(self, track: str, arm: str, name: str) -> Path:
        folder = self.folder / "media" / track / arm
        folder.mkdir(parents=True, exist_ok=True)
        return folder / name

    @property
    def dumps_root(self) -> Path:
        return self.folder / "dumps"

    def dump_dir(self, track: str, instance: str, request: str) -> Path:
        """A fresh folder for one request's comparison points (the engine creates it)."""
        return self.dumps_root / track / instance / request

    def relative(self, path: Path) -> str:
        return path.relative_to(self.folder).as_posix()

    # -- additions (each persisted at once) ------------------------------------------------------
    def set_campaign(self, info: dict[str, Any]) -> None:
        self.data["campaign"] = self.sanitizer.value(info)
        self.write()

    def add_instance(self, launch: dict[str, Any]) -> None:
        self.data["instances"].append(self.sanitizer.value(launch))
        self.write()

    def add_audit(self, audit: dict[str, Any]) -> None:
        for entry in self.data["instances"]:
            if entry.get("instance") == audit.get("instance"):
                entry["cleanup"] = self.sanitizer.value(audit)
                break
        else:
            self.data["instances"].append({"instance": audit.get("instance"),
                                           "cleanup": self.sanitizer.value(audit)})
        self.write()

    def add_sample(self, sample: dict[str, Any]) -> None:
        clean = self.sanitizer.value(sample)
        with open(self.folder / "samples.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(clean, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self.data["samples"].append(clean)
        self.write()

    def add_media(self, record: dict[str, Any]) -> None:
        self.data["media"].append(self.sanitizer.value(record))
        self.write()

    def add_check(self, check: CheckResult) -> None:
        self.checks.append(check)
        self.data["checks"].append(self.sanitizer.value(check.to_dict()))
        self.write()

    def note(self, text: str) -> None:
        self.data["notes"].append(self.sanitizer.text(text))
        self.write()

    def write(self) -> None:
        _atomic_write(self.folder / "evidence.json",
                      json.dumps(self.data, indent=2, sort_keys=False) + "\n")

    # -- end of run ------------------------------------------------------------------------------
    def finish(self, status: str, judge: Callable[[list[CheckResult]], list[TrackVerdict]]) -> None:
        self.verdicts = judge(self.checks)
        self.data["verdicts"] = [self.sanitizer.value(v.to_dict()) for v in self.verdicts]
        self.data["status"] = status
        self.data["finished_at"] = _now()
        self.write()

    def sanitize_files(self) -> int:
        """Scrub every text file of the run (logs, report) once the run is over."""
        changed = self.sanitizer.files(self.folder)
        self.data["sanitized_files"] = changed
        self.write()
        return changed
