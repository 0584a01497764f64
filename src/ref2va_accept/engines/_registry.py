"""Every engine instance a session started, so that a last-resort teardown reaches them all, and
starting one instance so that a failed start is stopped and audited before its error rises."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ref2va_accept.engines._server import EngineInstance, LaunchSpec
from ref2va_accept.evidence import Cleanup

__all__ = ["InstanceRegistry", "start_instance"]


@dataclass
class InstanceRegistry:
    """Every instance started in one pytest session (kept in its stash), so that a last-resort
    teardown can reach them all; `on_audit` runs after each instance is stopped and audited.

    Subscribe with ``subscribe``: a callback is registered once, a second time is refused.
    """

    live: dict[str, EngineInstance] = field(default_factory=dict)
    on_audit: list[Callable[[Cleanup], None]] = field(default_factory=list)
    # Run-wide: every engine lifetime of the session gets its own number, so its id, log file,
    # process tag and audit are its own (a counter per test repeated them and audits overwrote).
    _serials: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _ids: set[str] = field(default_factory=set)

    def next_serial(self) -> int:
        return next(self._serials)

    def subscribe(self, callback: Callable[[Cleanup], None]) -> None:
        if callback in self.on_audit:
            raise ValueError(f"{callback!r} is already subscribed to this registry's audits")
        self.on_audit.append(callback)

    def add(self, instance: EngineInstance) -> None:
        instance_id = instance.spec.instance_id
        if instance_id in self._ids:
            raise ValueError(f"engine instance id {instance_id!r} was already used in this run")
        self._ids.add(instance_id)
        self.live[instance_id] = instance

    def stop(self, instance: EngineInstance) -> Cleanup:
        audit = instance.stop()
        if self.live.pop(instance.spec.instance_id, None) is not None:
            for hook in self.on_audit:
                hook(audit)
        return audit

    def hurry(self) -> None:
        """A repeated interrupt: every live instance is SIGKILLed now; a stop under way stops
        waiting out its grace. Safe in a signal handler (no lock, no allocation worth naming)."""
        for instance in list(self.live.values()):
            instance.hurry = True
            if instance.pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(instance.pid, signal.SIGKILL)

    def stop_all(self) -> list[Cleanup]:
        return [self.stop(inst) for inst in list(self.live.values())]


def start_instance(spec: LaunchSpec, registry: InstanceRegistry | None = None) -> EngineInstance:
    """Start an instance; on a failed start it is stopped and audited before the error rises.

    Without a registry the instance is tracked by one of its own (a script's single instance).
    """
    registry = registry if registry is not None else InstanceRegistry()
    instance = EngineInstance(spec)
    registry.add(instance)
    try:
        instance.start()
    except BaseException:
        registry.stop(instance)
        raise
    return instance
