"""Running the suite itself as a user would, on copies of the campaign: the copies, a session in a
subprocess (:func:`run_pytest`) and reading what a run left (its evidence, its processes)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ref2va_accept.quality._weight_names import WEIGHT_DIMENSIONS
from ref2va_contract.launch import DECLARED_TIME_ENV, DECLARED_TIME_FLAGS
from tests.unit.evidence_schema import read_bundle

ROOT = Path(__file__).resolve().parents[2]


# Hypothesis's pytest plugin imports all of hypothesis at the end of every session (its terminal
# summary), used or not: 1.3 s of CPU in each new interpreter. No scenario uses hypothesis.
NO_HYPOTHESIS = ("-p", "no:hypothesispytest")


def pytest_command(*args: str) -> list[str]:
    """The command line of a pytest session in a new interpreter, as the harness's own tests
    start one (run_pytest, or a Popen a test signals): ``python -m pytest ARGS`` without
    hypothesis's plugin (NO_HYPOTHESIS)."""
    return [sys.executable, "-m", "pytest", *NO_HYPOTHESIS, *args]


def run_pytest(*args: str, cwd: Path = ROOT, timeout: float = 300,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGS`` in a new interpreter: for the tests whose subject is that process
    (signals, exit codes, process groups, what an interpreter reads at start); the others run
    the session in their own process (plugin_sessions.run_in_checkout)."""
    return subprocess.run(pytest_command(*args), capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env={**os.environ, **(env or {})})


# Denoising steps of a cheap copy (campaign_variant(..., steps=CHEAP_STEPS)): a B0 5 s request in
# about a tenth of its 50-step compute. For the tests whose assertions do not rest on the real
# 50-step output or on real latency ratios (faults, reason codes, lifecycle, signals, ...).
CHEAP_STEPS = 4
# Every VBench dimension a model scores (campaign_variant drops those it gates by default).
MODEL_BASED = frozenset(f"vbench.{d}" for dims in WEIGHT_DIMENSIONS.values() for d in dims)
DIT_STEP_POINT = re.compile(r"^dit\.step\d{3}$")


def with_steps(data: dict[str, Any], steps: int) -> None:
    """Every track of a campaign's data denoises in `steps` steps; its frozen dit.stepNNN points
    become the first, middle and last of those steps (in order, shapes kept: a step's latent
    does not depend on how many steps there are)."""
    if steps < 3:
        raise ValueError(f"steps={steps}: three distinct dit.stepNNN points need at least 3")
    for track_id, track in data["tracks"].items():
        track["request"]["num_inference_steps"] = steps
        points = track.get("comparison_points") or []
        at_steps = [p for p in points if DIT_STEP_POINT.match(p["name"])]
        if not at_steps:
            continue
        if len(at_steps) != 3:
            raise ValueError(f"{track_id}: expected 3 dit.stepNNN points, found "
                             f"{[p['name'] for p in at_steps]}")
        for point, step in zip(at_steps, (0, steps // 2, steps - 1), strict=True):
            point["name"] = f"dit.step{step:03d}"


def campaign_variant(folder: Path, *, steps: int | None = None, models: bool = False,
                     **changes: object) -> Path:
    """A variant of the reference campaign, rewritten into folder with its inputs and a B0
    profile of its own, and ``changes`` to its top-level fields (``profile_args``: to B0's
    profile's arguments);
    with `steps`, every track denoises in that many steps (:func:`with_steps`). Without
    `models`, the lossy gates drop their model-based dimensions (and the copy names no scorer
    weights): a copy tests faults, reasons and lifecycle, and a CLIP pass over each 124-frame
    output is 20 s of CPU that pushed such runs past their timeouts under CI's load."""
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
    if not models:
        for track in data["tracks"].values():
            gate = track.get("lossy_gate")
            if gate:
                gate["gated"] = [g for g in gate["gated"] if g not in MODEL_BASED]
        data["scorer_weights"], data["scorer_weights_dir"] = {}, None
    elif data.get("scorer_weights_dir"):  # the stand-ins stay where ./ref2va wrote them
        source = (ROOT / "fixtures/campaigns" / data["scorer_weights_dir"]).resolve()
        data["scorer_weights_dir"] = os.path.relpath(source, folder)
    for track in data["tracks"].values():
        for pinned in track["inputs"].values():
            pinned["path"] = "inputs/" + Path(pinned["path"]).name
    data.update(changes)
    if steps is not None:
        with_steps(data, steps)
    # A copy whose engine sleeps declared device time (slow or exactly timed requests for the
    # harness's own tests) says so, or the judge refuses it; its verdicts are then capped.
    if (set(DECLARED_TIME_FLAGS) & set(profile["args"])
            or DECLARED_TIME_ENV in (data.get("environment") or {})):
        data["protocol"]["declared_device_time"] = True
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


def sigterm_when(process: subprocess.Popen[Any], ready: Callable[[], bool],
                 wait_s: float = 30) -> int:
    """SIGTERM to ``process`` once ``ready()`` (or after ``wait_s``), then its exit code; killed
    if it does not end within ``wait_s`` after that."""
    try:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and not ready():
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout=wait_s)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def only_run(evidence: Path) -> Path:
    """The one run folder a suite run wrote under `evidence`."""
    runs = [p for p in evidence.iterdir() if not p.is_symlink()]
    assert len(runs) == 1, runs
    return runs[0]


def bundle(evidence: Path) -> dict[str, Any]:
    """The one run's evidence.json, validated against the published schema."""
    return read_bundle(only_run(evidence))


def verdict_of(evidence: dict[str, Any], candidate: str) -> dict[str, Any]:
    """The verdict row of ``candidate`` in an evidence bundle (the first one: the runs that ask
    judge one track); one that is missing fails naming it and the run's candidates."""
    found: dict[str, Any] | None = next(
        (v for v in evidence["verdicts"] if v["candidate"] == candidate), None)
    assert found is not None, (f"no verdict for {candidate} in run {evidence.get('run_id')}: "
                               f"{sorted({v['candidate'] for v in evidence['verdicts']})}")
    return found


def main(argv: list[str]) -> int:
    """``python -m tests.unit.suite_runner cheap-copy FOLDER``: write a CHEAP_STEPS copy of the
    reference campaign into FOLDER (which must not hold one yet) and print its path. The
    selftest runs the acceptance scenarios on it: they check the engine's contract and lifecycle
    (a complete MP4, a 400, a cancelled job, a clean stop), none of which rests on the 50-step
    output, and `./ref2va campaign` runs them on the campaign itself."""
    if len(argv) != 2 or argv[0] != "cheap-copy":
        print("usage: python -m tests.unit.suite_runner cheap-copy FOLDER", file=sys.stderr)
        return 2
    print(campaign_variant(Path(argv[1]), steps=CHEAP_STEPS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
