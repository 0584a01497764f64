"""What stopping one engine instance took and what it left behind (the cleanup audit)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ref2va_accept.core import Check, CheckStatus, Reason
from ref2va_accept.evidence import CheckResult


@dataclass(frozen=True)
class ProcessRecord:
    pid: int
    name: str
    status: str

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "name": self.name, "status": self.status}


@dataclass(frozen=True)
class StopStep:
    """One step of stopping an instance, in order: what was signalled (the server's main
    process, then its group and every process of it found outside, then whatever is left), when
    (seconds since the stop began) and how many of its processes were alive when the step's
    wait ended (`waited_s`: how long that wait was)."""

    action: str  # "SIGTERM main", "SIGTERM group", "SIGKILL"
    at_s: float
    waited_s: float
    alive_after: int

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "at_s": round(self.at_s, 3),
                "waited_s": round(self.waited_s, 3), "alive_after": self.alive_after}


@dataclass(frozen=True)
class CleanupAudit:
    """What stopping one instance took and what it left behind."""

    arm_id: str
    instance_id: str
    pid: int
    exit_code: int | None
    processes_seen: int
    needed_sigkill: tuple[ProcessRecord, ...]
    survivors: tuple[ProcessRecord, ...]
    port_free: bool
    stop_s: float
    problems: tuple[str, ...]
    # Spawn to stopped: what the instance cost in wall time (the budget charges it times the
    # campaign's logical devices). None when no process was ever started.
    lifetime_s: float | None = None
    steps: tuple[StopStep, ...] = ()

    @property
    def clean(self) -> bool:
        return not self.problems

    def check(self) -> CheckResult:
        """The instance's `cleanup` check: a pass, or a failure (`incomplete_cleanup`) naming
        what the stop left behind."""
        track = self.instance_id.split(".", 1)[0]
        return CheckResult(
            track, self.arm_id, Check.CLEANUP,
            CheckStatus.PASS if self.clean else CheckStatus.FAIL,
            None if self.clean else Reason.INCOMPLETE_CLEANUP, "; ".join(self.problems),
            {"instance": self.instance_id, "stop_s": round(self.stop_s, 3)})

    def to_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm_id,
            "instance": self.instance_id,
            "pid": self.pid,
            "exit_code": self.exit_code,
            "processes_seen": self.processes_seen,
            "needed_sigkill": [p.to_dict() for p in self.needed_sigkill],
            "survivors": [p.to_dict() for p in self.survivors],
            "port_free": self.port_free,
            "stop_s": round(self.stop_s, 3),
            "lifetime_s": None if self.lifetime_s is None else round(self.lifetime_s, 3),
            "clean": self.clean,
            "problems": list(self.problems),
            "steps": [step.to_dict() for step in self.steps],
        }
