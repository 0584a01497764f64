"""Waiting for device memory (HBM) to return to idle between one engine instance and the next.

An NPU worker that has exited may still hold device memory for a while (the driver frees it
asynchronously); a next instance started on such a device competes for HBM with a ghost, which
is interference. Nothing in vLLM-Omni waits for this; its own e2e tests do. So: the idle level
of every assigned device is read before the session's first instance starts, and after each
instance's stop the devices are polled until every one is back within tolerance of its idle
level, bounded by a timeout. A device that stays above it, or a probe that cannot be read (fail
closed: unreadable is never idle), is a `device_memory_not_released` check: the track is not
evaluable. With `devices.kind: none` nothing is polled and nothing is claimed (`not_applicable`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from ref2va_accept.core import Check, CheckStatus, Reason
from ref2va_accept.engines._devices import DeviceProbe, DeviceSnapshot, probe_for
from ref2va_accept.evidence import (
    AnyCheck,
    DeviceKind,
    DeviceMemoryMeasured,
    DeviceMemoryNotApplicable,
    IdleLevel,
    MemoryWait,
    Poll,
    ReleaseRecord,
    new_check,
)

log = logging.getLogger(__name__)

REASON = Reason.DEVICE_MEMORY_NOT_RELEASED


class MemoryRelease(BaseModel):
    """`devices.memory_release`: how long and how closely to wait (frozen with the campaign)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    # Bound on the wait after each stop. Upstream's e2e tests allow 120 s for device memory to
    # clear between servers; a driver that needs longer is itself a finding.
    timeout_s: float = Field(default=120, gt=0)
    # Seconds between polls; each npu-smi call takes about a second, so 5 s keeps its own load
    # negligible while adding at most 5 s to a release that has already happened.
    poll_s: float = Field(default=5, gt=0)
    # Allowed excess over the idle level per device, MB. An engine's leftovers are GBs (weights,
    # activations); idle HBM moves by far less. A default to confirm on the host.
    tolerance_mb: float = Field(default=512, ge=0)


def by_name(used_mb: dict[int, float]) -> dict[str, float]:
    """MB per device keyed as the evidence keys them: the device's number as a string."""
    return {str(d): mb for d, mb in used_mb.items()}


@dataclass(frozen=True)
class Release:
    """The outcome of one wait: released, or the MB each device still held above idle."""

    released: bool
    waited_s: float
    held_mb: dict[int, float]
    polls: tuple[Poll, ...]  # each as the evidence records it (at_s rounded to ms)
    problem: str | None

    def explain(self) -> str:
        if self.released:
            return f"every device back within tolerance of idle after {self.waited_s:.1f} s"
        parts = [f"device {d}: {mb:.0f} MB above idle" for d, mb in sorted(self.held_mb.items())]
        if self.problem:
            parts.append(self.problem)
        return (f"not released within {self.waited_s:.1f} s: " + "; ".join(parts))

    def record(self) -> ReleaseRecord:
        """The wait as the evidence records it (its time rounded to ms)."""
        return ReleaseRecord(released=self.released, waited_s=round(self.waited_s, 3),
                             held_mb=by_name(self.held_mb), problem=self.problem,
                             polls=list(self.polls))


def _used(snapshot: DeviceSnapshot, devices: Sequence[int]) -> tuple[dict[int, float], str | None]:
    if not snapshot.readable:
        return {}, f"probe unreadable: {snapshot.problem or 'no reason given'}"
    absent = [d for d in devices if d not in snapshot.memory_used_mb]
    if absent:
        return ({d: snapshot.memory_used_mb[d] for d in devices if d in snapshot.memory_used_mb},
                f"the probe reports no memory figure for device {absent[0]}")
    return {d: snapshot.memory_used_mb[d] for d in devices}, None


def read_idle(probe: DeviceProbe, devices: Sequence[int]) -> IdleLevel:
    used, problem = _used(probe.snapshot(), devices)
    if problem:
        return IdleLevel(used_mb=None, problem=problem)
    return IdleLevel(used_mb=by_name(used), problem=None)


def wait_for_release(probe: DeviceProbe, devices: Sequence[int], idle: IdleLevel,
                     spec: MemoryRelease, *, clock: Callable[[], float] = time.monotonic,
                     sleep: Callable[[float], None] = time.sleep) -> Release:
    """Poll until every device is within tolerance of its idle level, or the timeout passes."""
    start = clock()
    polls: list[Poll] = []
    if idle.used_mb is None:
        # Without an idle level there is nothing to return to: fail closed, poll once for the
        # record.
        used, problem = _used(probe.snapshot(), devices)
        polls.append(Poll(at_s=0.0, readable=problem is None, used_mb=by_name(used),
                          problem=problem))
        return Release(False, 0.0, {}, tuple(polls),
                       f"the idle level was never read ({idle.problem})")
    level = idle.used_mb
    while True:
        now = clock() - start
        used, problem = _used(probe.snapshot(), devices)
        polls.append(Poll(at_s=round(now, 3), readable=problem is None, used_mb=by_name(used),
                          problem=problem))
        held = {d: round(used[d] - level[str(d)], 1) for d in devices
                if d in used and used[d] - level[str(d)] > spec.tolerance_mb}
        if problem is None and not held:
            return Release(True, now, {}, tuple(polls), None)
        if now >= spec.timeout_s:
            return Release(False, now, held, tuple(polls), problem)
        sleep(min(spec.poll_s, spec.timeout_s - now))


@dataclass
class MemoryGuard:
    """The session's wait between instances: idle read once, a wait after every stop."""

    kind: DeviceKind
    devices: tuple[int, ...]
    spec: MemoryRelease
    probe: DeviceProbe
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    idle: IdleLevel | None = None
    waits: list[MemoryWait] = field(default_factory=list)

    @classmethod
    def for_devices(cls, kind: DeviceKind, visible: Sequence[int],
                    spec: MemoryRelease) -> MemoryGuard:
        """The guard of a campaign's devices, probing them with the tool of their kind."""
        return cls(kind, tuple(visible), spec, probe_for(kind, visible))

    @property
    def applicable(self) -> bool:
        return self.kind != "none" and bool(self.devices)

    def read_idle(self) -> None:
        """Before the first instance; later calls keep the first reading."""
        if self.applicable and self.idle is None:
            self.idle = read_idle(self.probe, self.devices)
            log.info("device idle level: %s", self.idle.json_dict())

    def after_stop(self, track: str, arm: str, instance: str) -> AnyCheck | None:
        """Wait for release after one instance; None when there is nothing to poll."""
        if not self.applicable:
            return None
        idle = self.idle if self.idle is not None else IdleLevel(
            used_mb=None, problem="no idle reading was taken before the first instance")
        release = wait_for_release(self.probe, self.devices, idle, self.spec,
                                   clock=self.clock, sleep=self.sleep)
        recorded = release.record()
        self.waits.append(MemoryWait(instance=instance, arm=arm, **dict(recorded)))
        data = {"instance": instance, "waited_s": recorded.waited_s, "held_mb": recorded.held_mb}
        if release.released:
            return new_check(track, arm, Check.DEVICE_MEMORY_RELEASE, CheckStatus.PASS, None,
                             release.explain(), data)
        return new_check(track, arm, Check.DEVICE_MEMORY_RELEASE, CheckStatus.FAIL, REASON,
                         f"after {instance}: {release.explain()}", data)

    def record(self) -> DeviceMemoryMeasured | DeviceMemoryNotApplicable:
        """The evidence's `device_memory`: the idle level and every wait, or why none."""
        if not self.applicable:
            return DeviceMemoryNotApplicable(
                status="not_applicable", kind=self.kind,
                reason="no accelerator is assigned: nothing holds device memory")
        return DeviceMemoryMeasured(status="measured", kind=self.kind, devices=list(self.devices),
                                    timeout_s=self.spec.timeout_s, poll_s=self.spec.poll_s,
                                    tolerance_mb=self.spec.tolerance_mb, idle=self.idle,
                                    waits=list(self.waits))
