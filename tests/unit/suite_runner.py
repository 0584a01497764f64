"""Running the suite itself as a user would, in a subprocess, on copies of the campaign."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.unit.evidence_schema import read_bundle

ROOT = Path(__file__).resolve().parents[2]


def run_pytest(*args: str, cwd: Path = ROOT, timeout: float = 300,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})})


def campaign_copy(folder: Path, **changes: object) -> Path:
    """The reference campaign moved to folder, with its inputs and a B0 profile of our own."""
    (folder / "inputs").mkdir(parents=True)
    for name in ("prompt.txt", "reference.png", "reference.wav"):
        shutil.copy(ROOT / "fixtures/inputs" / name, folder / "inputs" / name)
    data = yaml.safe_load((ROOT / "fixtures/campaigns/reference.yaml").read_text())
    profile = yaml.safe_load((ROOT / "engine/profiles/reference/b0.yaml").read_text())
    profile["args"].update(changes.pop("profile_args", {}))  # type: ignore[call-overload]
    (folder / "b0.yaml").write_text(yaml.safe_dump(profile))
    data["baseline"]["profile"] = "b0.yaml"
    for candidate in data["candidates"]:
        # Candidates keep the repository's profiles, reached from the copy's folder.
        source = (ROOT / "fixtures/campaigns" / candidate["profile"]).resolve()
        candidate["profile"] = os.path.relpath(source, folder)
    data["engine"]["workdir"] = os.path.relpath(ROOT, folder)
    for track in data["tracks"].values():
        for pinned in track["inputs"].values():
            pinned["path"] = "inputs/" + Path(pinned["path"]).name
    data.update(changes)
    path = folder / "campaign.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def tagged(run_id: str) -> list[int]:
    """Processes carrying this run's instance tag in their environment (found by tag, not name)."""
    found = []
    needle = f"REF2VA_INSTANCE={run_id}/".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def only_run(evidence: Path) -> Path:
    """The one run folder a suite run wrote under `evidence`."""
    runs = [p for p in evidence.iterdir() if not p.is_symlink()]
    assert len(runs) == 1, runs
    return runs[0]


def bundle(evidence: Path) -> dict[str, Any]:
    """The one run's evidence.json, validated against the published schema."""
    return read_bundle(only_run(evidence))
