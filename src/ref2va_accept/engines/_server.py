"""Start, health-check, stop and audit one engine instance.

The judge knows an engine only as a process tree and an HTTP port. Every instance runs in its own
process group with an instance tag in its environment, so that teardown can find every process it
started (also one that left the group) and the audit can prove that none survived.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx
import psutil

from ref2va_accept.core import EngineStartError, ForeignServerError, tls_context
from ref2va_accept.engines._leftovers import die_with_parent, judge_identity, tagged_processes
from ref2va_accept.engines._ownership import foreign_server_problem
from ref2va_accept.engines._ports import LOOPBACK, free_port, port_is_free
from ref2va_accept.evidence import Cleanup, Instance, ProcessRecord, StopStep
from ref2va_contract.api import HEALTH_ROUTE
from ref2va_contract.launch import (
    INSTANCE_NONCE_ENV,
    INSTANCE_TAG_ENV,
    JUDGE_ENV,
    PROJECT_ENV_PREFIX,
)

log = logging.getLogger(__name__)

__all__ = ["LOOPBACK", "EngineInstance", "LaunchSpec", "engine_environment",
           "free_port", "port_is_free"]
_KILL_WAIT_S = 10.0
# After the main process has exited (or its grace ran out), how long the rest of the group has
# after its own SIGTERM: at most this, and at most the campaign's grace.
_GROUP_GRACE_S = 5.0
# Search-path variables a launch prepends to the inherited value instead of replacing it:
# whatever the host's environment script put there (CANN's set_env.sh puts its Python
# packages on PYTHONPATH) stays reachable in the server.
PREPENDED_PATHS = ("PYTHONPATH", "LD_LIBRARY_PATH", "PATH")
_LOG_TAIL_LINES = 20


@dataclass(frozen=True)
class LaunchSpec:
    """Everything needed to start one instance; recorded in the evidence (sanitized) as its
    `instance_record`."""

    arm_id: str
    instance_id: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    port: int
    startup_timeout_s: float
    shutdown_grace_s: float
    log_path: Path
    # Unique across runs (the run id is part of it); every process of the instance inherits it.
    tag: str = ""
    # Given to the engine (INSTANCE_NONCE_ENV) when its kind echoes it; None: the socket's owner
    # alone shows that the server answering is the instance.
    nonce: str | None = None

    @property
    def process_tag(self) -> str:
        return self.tag or self.instance_id

    def instance_record(self, track: str, run: str) -> Instance:
        """The evidence's record of this launch in `track` of `run` (an `instance` event), its
        log by file name; its cleanup is recorded when it stops."""
        return Instance(arm=self.arm_id, instance=self.instance_id, argv=list(self.argv),
                        env=dict(self.env), port=self.port,
                        startup_timeout_s=self.startup_timeout_s,
                        shutdown_grace_s=self.shutdown_grace_s, log=self.log_path.name,
                        track=track, run=run)


def _alive(proc: psutil.Process) -> bool:
    try:
        # is_running() also checks the creation time, so a recycled pid is not mistaken for ours.
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _record(proc: psutil.Process) -> ProcessRecord:
    try:
        return ProcessRecord(pid=proc.pid, name=proc.name(), status=proc.status())
    except psutil.Error:
        return ProcessRecord(pid=proc.pid, name="?", status="gone")


def engine_environment(spec: LaunchSpec, inherited: Mapping[str, str]) -> dict[str, str]:
    """The engine's environment: the caller's, less the project's own variables (those reach an
    engine only as the campaign, the profile or the judge sets them), plus the launch's; a
    launch's search path (PREPENDED_PATHS) goes ahead of the inherited one."""
    env = {k: v for k, v in inherited.items() if not k.startswith(PROJECT_ENV_PREFIX)}
    for name, value in spec.env.items():
        before = env.get(name)
        if name in PREPENDED_PATHS and before and before != value:
            env[name] = os.pathsep.join((value, before))
        else:
            env[name] = value
    env[INSTANCE_TAG_ENV] = spec.process_tag
    env[JUDGE_ENV] = judge_identity()
    if spec.nonce is not None:
        env[INSTANCE_NONCE_ENV] = spec.nonce
    return env


class EngineInstance:
    """One freshly started engine. Use as a context manager or call start() and stop()."""

    def __init__(self, spec: LaunchSpec) -> None:
        self.spec = spec
        self._popen: subprocess.Popen[bytes] | None = None
        self._spawned: float | None = None  # monotonic, just before the process is started
        self._known: dict[int, psutil.Process] = {}
        self.audit: Cleanup | None = None
        # Set when another server answered on the port: the port was never ours to free.
        self.foreign = False
        # Set on a repeated interrupt: no grace, SIGKILL at once (see InstanceRegistry.hurry).
        self.hurry = False

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.spec.port}"

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    @property
    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def exit_code(self, wait_s: float = 0.0) -> int | None:
        """The main process's exit status (negative: the signal that ended it), waiting up to
        `wait_s` for it to exit; None while it runs, or when it never started."""
        if self._popen is None:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self._popen.wait(timeout=wait_s) if wait_s > 0 else self._popen.poll()
        return None

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        try:
            text = self.spec.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> None:
        spec = self.spec
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = engine_environment(spec, os.environ)
        log.info("starting %s on port %d: %s", spec.instance_id, spec.port, " ".join(spec.argv))
        with open(spec.log_path, "ab") as log_file:
            try:
                self._spawned = time.monotonic()
                self._popen = subprocess.Popen(
                    list(spec.argv),
                    cwd=spec.cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    # Only prctl runs before exec; the harness starts engines from one thread.
                    preexec_fn=die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
                )
            except OSError as exc:
                raise EngineStartError(
                    f"engine {spec.instance_id}: cannot execute {spec.argv[0]!r}: {exc.strerror}"
                ) from None
        self._remember(self._popen.pid)
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        spec = self.spec
        deadline = time.monotonic() + spec.startup_timeout_s
        delay = 0.05
        with httpx.Client(timeout=httpx.Timeout(5.0), verify=tls_context()) as client:
            while True:
                code = self._popen.poll() if self._popen else None
                if code is not None:
                    raise EngineStartError(
                        f"engine {spec.instance_id} exited with code {code} during start-up "
                        f"(before {HEALTH_ROUTE} answered)", exit_code=code,
                        log_tail=self.log_tail())
                with contextlib.suppress(httpx.HTTPError):
                    answer = client.get(f"{self.base_url}{HEALTH_ROUTE}")
                    if answer.status_code == 200:
                        self.snapshot_tree()
                        self._check_owner(answer.headers)
                        log.info("%s healthy", spec.instance_id)
                        return
                self.snapshot_tree()
                if time.monotonic() >= deadline:
                    raise EngineStartError(
                        f"engine {spec.instance_id} did not answer GET {HEALTH_ROUTE} with 200 "
                        f"within {spec.startup_timeout_s:g} s", log_tail=self.log_tail())
                time.sleep(delay)
                # Capped low: a reference engine is healthy within a few seconds, and a 1 s step
                # cost about half a second of waiting on each of a campaign's ~70 starts.
                delay = min(delay * 1.5, 0.25)

    def _check_owner(self, headers: httpx.Headers) -> None:
        """The server that answered must be this instance, before anything is sent to it."""
        problem = foreign_server_problem(self.spec.port, self._living(), headers, self.spec.nonce)
        if problem is not None:
            self.foreign = True
            raise ForeignServerError(f"engine {self.spec.instance_id}: {problem}; no request "
                                     "was sent to it")

    # -- bookkeeping -----------------------------------------------------------------------------
    def _remember(self, pid: int) -> None:
        with contextlib.suppress(psutil.Error):
            if pid not in self._known:
                self._known[pid] = psutil.Process(pid)

    def snapshot_tree(self) -> None:
        """Remember every descendant now, so one that later leaves the group is still found."""
        if self._popen is None:
            return
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self._popen.pid).children(recursive=True):
                self._remember(child.pid)
        for proc in tagged_processes(self.spec.process_tag):
            self._remember(proc.pid)

    def known_pids(self) -> set[int]:
        """Every process of this instance seen so far (the engine's own, for device probes)."""
        return set(self._known)

    def _living(self) -> list[psutil.Process]:
        for proc in tagged_processes(self.spec.process_tag):
            self._remember(proc.pid)
        return [p for p in self._known.values() if _alive(p)]

    # -- stop ------------------------------------------------------------------------------------
    def stop(self) -> Cleanup:
        """Upstream's order (its test launcher's): SIGTERM to the server's main process, which
        shuts its workers down itself, and a wait of up to the grace for it to exit; then SIGTERM
        to the group and every process of the instance found outside it, and a short wait;
        SIGKILL to whatever is left; then audit, every step in it. Idempotent."""
        if self.audit is not None:
            return self.audit
        spec = self.spec
        started = time.monotonic()
        problems: list[str] = []
        if self._popen is None:
            # Never got as far as a process (the executable could not be run): nothing to stop.
            self.audit = Cleanup(
                arm=spec.arm_id, instance=spec.instance_id, pid=0, exit_code=None,
                processes_seen=0, needed_sigkill=[], survivors=[],
                port_free=port_is_free(spec.port), stop_s=0.0, lifetime_s=None, clean=True,
                problems=[], steps=[])
            return self.audit
        self.snapshot_tree()
        pgid = self._popen.pid
        steps: list[StopStep] = []

        def step(action: Literal["SIGTERM main", "SIGTERM group", "SIGKILL"], at: float) -> None:
            now = time.monotonic()
            steps.append(StopStep(action=action, at_s=round(at - started, 3),
                                  waited_s=round(now - at, 3), alive_after=len(self._living())))

        at = time.monotonic()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            self._popen.send_signal(signal.SIGTERM)
        self._wait_main(spec.shutdown_grace_s)
        step("SIGTERM main", at)
        if self._living():
            at = time.monotonic()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
            for proc in self._living():
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(signal.SIGTERM)
            self._wait_gone(min(_GROUP_GRACE_S, spec.shutdown_grace_s), interruptible=True)
            step("SIGTERM group", at)
        if self.hurry:
            problems.append("stopped at once with SIGKILL on a repeated interrupt")
        stubborn = self._living()
        needed_kill = [_record(p) for p in stubborn]
        main_exited = self._popen.poll() is not None
        if stubborn and main_exited and not self.foreign and not port_is_free(spec.port):
            # The server is gone but something it started still listens: the next instance
            # could not bind, or would share the port with a ghost.
            problems.append(
                f"port {spec.port} still held after the main process exited, by one of: "
                + ", ".join(f"{r.name}[{r.pid}]" for r in needed_kill)
            )
        if stubborn and not self.hurry:
            problems.append(
                f"{len(stubborn)} process(es) still alive {time.monotonic() - started:.1f} s "
                f"after SIGTERM, killed: " + ", ".join(f"{r.name}[{r.pid}]" for r in needed_kill)
            )
        if stubborn:
            at = time.monotonic()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            for proc in stubborn:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            self._wait_gone(_KILL_WAIT_S)
            step("SIGKILL", at)
        exit_code = self._reap()
        survivors = [_record(p) for p in self._living()]
        if survivors:
            problems.append(
                "process(es) alive after SIGKILL: "
                + ", ".join(f"{r.name}[{r.pid}]" for r in survivors)
            )
        port_free = self._wait_port_free(0.0 if self.foreign else 2.0)
        if not port_free and not self.foreign:
            problems.append(f"port {spec.port} still held after the engine stopped")
        # Spawn to stopped: what the instance cost in wall time (the budget charges it times the
        # campaign's logical devices). None when no process was ever started.
        stop_s = round(time.monotonic() - started, 3)
        lifetime_s = None if self._spawned is None else round(time.monotonic() - self._spawned, 3)
        self.audit = Cleanup(
            arm=spec.arm_id,
            instance=spec.instance_id,
            pid=pgid,
            exit_code=exit_code,
            processes_seen=len(self._known),
            needed_sigkill=needed_kill,
            survivors=survivors,
            port_free=port_free,
            stop_s=stop_s,
            lifetime_s=lifetime_s,
            clean=not problems,
            problems=problems,
            steps=steps,
        )
        log.info("stopped %s: %s", spec.instance_id, "clean" if not problems else problems)
        return self.audit

    def _wait_main(self, timeout_s: float) -> None:
        """Until the main process has exited (reaped), the grace is out, or a repeated
        interrupt asks for haste."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self.hurry:
            if self._popen is None or self._popen.poll() is not None:
                return
            time.sleep(0.05)

    def _wait_gone(self, timeout_s: float, *, interruptible: bool = False) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not (interruptible and self.hurry):
            if self._popen is not None:
                self._popen.poll()  # reap the main process so it is not a zombie we wait on
            if not self._living():
                return
            time.sleep(0.05)

    def _reap(self) -> int | None:
        if self._popen is None:
            return None
        try:
            return self._popen.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return None

    def _wait_port_free(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            if port_is_free(self.spec.port):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def __enter__(self) -> EngineInstance:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
