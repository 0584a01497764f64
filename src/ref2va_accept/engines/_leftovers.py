"""Engine processes that must not outlive the judge, found by their tag, never by name.

Every process of an instance carries the instance tag (``INSTANCE_TAG_ENV``, ``<run id>/<id>``)
and the judge's own identity (``JUDGE_ENV``, ``<pid>:<start time>``) in its environment. Three
guards use them:
- ``die_with_parent`` (in the engine's child before exec): the engine's main process gets SIGTERM
  when the judge dies, and starts with SIGINT/SIGTERM as a fresh process has them;
- a reaper per session (``start_reaper``): a small process outside the engines' trees that waits
  on a pipe from the judge; when the judge is gone (SIGKILL, OOM) the pipe closes and it stops
  every process carrying the run's tag, workers that left the group or ignore SIGTERM included;
- ``stop_leftovers`` at the start of a run: processes whose judge is dead (a reaper that died
  too), stopped by pid and recorded in the evidence.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Final

import psutil

from ref2va_accept.evidence import Leftover, RunStatus
from ref2va_contract.launch import INSTANCE_TAG_ENV, JUDGE_ENV

_REAP_WAIT_S = 10.0


def die_with_parent() -> None:
    """Runs in the engine's child before exec (the harness starts engines from one thread)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    # A judge started as a shell's background job has SIGINT ignored; an engine must not inherit
    # that (nor a blocked SIGTERM), or its stop would wait out the grace.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM))
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def judge_identity(pid: int | None = None) -> str:
    """``<pid>:<start time>`` of a process (this one by default): a recycled pid does not match."""
    proc = psutil.Process(pid)
    return f"{proc.pid}:{proc.create_time():.2f}"


def _environ(pid: int) -> dict[bytes, bytes]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if b"=" in item)
    return {key: value for key, _, value in pairs}


def tagged_processes(tag: str, *, prefix: bool = False) -> list[psutil.Process]:
    """Processes whose instance tag is `tag` (or starts with it); never this process."""
    wanted = tag.encode()
    found: list[psutil.Process] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        value = _environ(int(entry.name)).get(INSTANCE_TAG_ENV.encode())
        if value is not None and (value.startswith(wanted) if prefix else value == wanted):
            with contextlib.suppress(psutil.Error):
                found.append(psutil.Process(int(entry.name)))
    return found


def _judge_alive(identity: str) -> bool:
    pid, _, _ = identity.partition(":")
    try:
        return judge_identity(int(pid)) == identity
    except (ValueError, psutil.Error):
        return False


def find_leftovers() -> list[tuple[psutil.Process, str]]:
    """Tagged processes whose judge is gone (processes without a judge identity are left alone:
    nothing says whose they are)."""
    found: list[tuple[psutil.Process, str]] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        env = _environ(int(entry.name))
        tag, judge = env.get(INSTANCE_TAG_ENV.encode()), env.get(JUDGE_ENV.encode())
        if tag is None or judge is None or _judge_alive(judge.decode(errors="replace")):
            continue
        with contextlib.suppress(psutil.Error):
            found.append((psutil.Process(int(entry.name)), tag.decode(errors="replace")))
    return found


def _stop(procs: list[tuple[psutil.Process, str]], grace_s: float) -> list[Leftover]:
    names = {}
    for proc, _ in procs:
        with contextlib.suppress(psutil.Error):
            names[proc.pid] = proc.name()
            proc.terminate()
    _, alive = psutil.wait_procs([p for p, _ in procs], timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    _, survived = psutil.wait_procs(alive, timeout=_REAP_WAIT_S)
    killed = {p.pid for p in alive}
    gone = {p.pid for p in survived}
    return [Leftover(pid=p.pid, name=names.get(p.pid, "?"), tag=tag,
                     stopped_by="survived" if p.pid in gone
                     else "SIGKILL" if p.pid in killed else "SIGTERM")
            for p, tag in procs]


def stop_leftovers(grace_s: float) -> list[Leftover]:
    """Stop every engine process left by a dead judge: SIGTERM, `grace_s`, SIGKILL; by pid."""
    return _stop(find_leftovers(), grace_s)


def stopped_line(found: Sequence[Leftover]) -> str:
    """What was stopped, in one line for the evidence's notes and the terminal."""
    listed = ", ".join(f"{f.name}[{f.pid}] ({f.tag}, {f.stopped_by})" for f in found)
    return f"stopped {len(found)} engine process(es) left by a dead run: {listed}"


# -- the reaper ------------------------------------------------------------------------------------
def start_reaper(run_id: str, grace_s: float, folder: Path | None = None,
                 repo: Path | None = None, evidence_root: Path | None = None
                 ) -> subprocess.Popen[bytes]:
    """A process that stops every engine of `run_id` once the judge (this process) is gone.

    It reads a pipe the judge holds open; EOF means the judge exited, however it ended. A judge
    that ends normally writes `DONE` first (after its evidence is final and scrubbed). Without it,
    the judge died (SIGKILL, a crash, an OOM kill), and the reaper also finishes the run's folder
    (`finish_dead_run`). Its own session, so a Ctrl-C or a group kill aimed at the judge leaves it
    to do its work.
    """
    package_root = str(Path(__file__).resolve().parents[2])  # src/, above the package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, (package_root, os.environ.get("PYTHONPATH"))))}
    folders = [str(p) for p in (folder, repo, evidence_root) if p is not None]
    return subprocess.Popen(
        [sys.executable, "-m", "ref2va_accept.engines._leftovers", f"{run_id}/", f"{grace_s:g}",
         *(folders if len(folders) == 3 else [])],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=env, start_new_session=True)


DONE = b"done\n"  # what a judge that ends normally writes to its reaper before closing the pipe
KILLED: Final[RunStatus] = "killed"  # the final status of a run whose judge died


def finish_dead_run(folder: Path, repo: Path, evidence_root: Path) -> bool:
    """A run whose judge died: scrub its files as the judge would have at its end (engine logs
    are copied raw while the run goes on), record a note and the final status `killed`, and
    rewrite evidence.json from the events. False when the run had already ended."""
    # Imported here: the reaper needs them only once its judge is dead.
    from ref2va_accept.core import atomic_write  # noqa: PLC0415
    from ref2va_accept.evidence import (  # noqa: PLC0415
        EVENTS_FILE,
        EVIDENCE_FILE,
        EventLog,
        project,
        read_events,
        utc_now,
    )
    from ref2va_accept.evidence.sanitize import Sanitizer  # noqa: PLC0415

    path = folder / EVENTS_FILE
    if not path.is_file():
        return False
    events = list(read_events(path))
    if project(events).status != "running":
        return False
    log = EventLog(path)
    log.seq = max((e.seq for e in events), default=0)
    now = utc_now()
    events.append(log.append(
        "note", "the judge died before the run ended (killed outright or crashed); its reaper "
        "stopped the run's engines and scrubbed its files", now))
    events.append(log.append("status", {"status": KILLED, "finished_at": now}, now))
    sanitizer = Sanitizer.for_this_host(repo=repo, evidence=evidence_root)
    sanitizer.files(folder)
    # Last, so that a reader who sees the final status finds the folder already scrubbed.
    atomic_write(folder / EVIDENCE_FILE,
                 json.dumps(sanitizer.value(project(events).json_dict()), indent=2,
                            sort_keys=True) + "\n")
    return True


def _reap(tag_prefix: str, grace_s: float, pipe: IO[bytes],
          folders: Sequence[str] = ()) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    received = b""
    while chunk := pipe.read(4096):
        received += chunk  # the judge writes only DONE; read returns b"" once it is gone
    procs = [(p, tag_prefix) for p in tagged_processes(tag_prefix, prefix=True)]
    if procs:
        _stop(procs, grace_s)
    if DONE not in received and len(folders) == 3:
        folder, repo, evidence_root = (Path(f) for f in folders)
        finish_dead_run(folder, repo, evidence_root)


if __name__ == "__main__":
    _reap(sys.argv[1], float(sys.argv[2]), sys.stdin.buffer, sys.argv[3:6])
