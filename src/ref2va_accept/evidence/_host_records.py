"""The evidence's records of the host and its engines: where the judge ran, the campaign it
judged, each engine instance with the cleanup of its stop, and the sections about the host
(bring-up rows, identity preflight, device memory, leftovers of dead runs, disk estimate)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import Field

from ref2va_accept.core import Check, CheckStatus, Reason
from ref2va_accept.evidence._base import Number, Record
from ref2va_accept.evidence._closed_sets import (
    DeviceKind,
    EngineKindName,
    IdentityStatus,
    RowKind,
    RowStatus,
)

if TYPE_CHECKING:
    from ref2va_accept.evidence._checks_records import CleanupCheck

__all__ = [
    "Bringup",
    "BringupRow",
    "Campaign",
    "Cleanup",
    "DeviceMemory",
    "DeviceMemoryMeasured",
    "DeviceMemoryNotApplicable",
    "Disk",
    "Environment",
    "Freeze",
    "HostIdentity",
    "IdentityRow",
    "IdleLevel",
    "Instance",
    "Leftover",
    "MemoryWait",
    "Order",
    "Poll",
    "ProcessRecord",
    "StopStep",
    "TrackNeed",
]


# -- the run's header ----------------------------------------------------------------------------

class Environment(Record):
    """Where the judge ran (evidence.EvidenceBundle.create)."""

    python: str
    implementation: str
    machine: str
    system: str
    packages: dict[str, str | None] = Field(
        description="the versions of the packages a run depends on (null: not installed)")


class Freeze(Record):
    state: Literal["frozen", "not_frozen", "drifted"]
    lock_sha256: str | None
    problems: list[str]
    unfilled: list[str]
    verdict_cap: Reason | None = Field(
        description="the validity reason that caps every verdict of the run "
                    "(campaign.FreezeStatus.cap_reason)")


class Order(Record):
    """The seed every latency schedule of the run was ordered by: drawn for the run
    (protocol.order_seed: per_run), the campaign's fixed one, or given (--order-seed)."""

    seed: int
    drawn_per_run: bool
    given: bool


class Campaign(Record):
    """The campaign the run judged, and its freeze state (plugin._state.RunState.evidence)."""

    name: str
    file: str
    engine_kind: EngineKindName
    source_pin: dict[str, Any]
    canonical: dict[str, Any] = Field(description="the campaign as frozen (canonical form)")
    freeze: Freeze
    order: Order


# -- instances and their cleanup ------------------------------------------------------------------


class ProcessRecord(Record):
    """A process of an instance as its stop saw it (psutil's name and status; "gone")."""

    pid: int
    name: str
    status: str


class StopStep(Record):
    """One step of stopping an instance, in order: what was signalled (the server's main
    process, then its group and every process of it found outside, then whatever is left), when
    (seconds since the stop began) and how many of its processes were alive when the step's
    wait ended (`waited_s`: how long that wait was). Its writer (engines) rounds the seconds to
    the millisecond."""

    action: Literal["SIGTERM main", "SIGTERM group", "SIGKILL"]
    at_s: Number
    waited_s: Number
    alive_after: int = Field(ge=0)


class Cleanup(Record):
    """What stopping one instance took and what it left behind (the engines' cleanup audit,
    written by EngineInstance.stop, its seconds rounded to the millisecond); the payload of an
    `audit` event."""

    arm: str
    instance: str
    pid: int | None
    exit_code: int | None
    processes_seen: int
    needed_sigkill: list[ProcessRecord]
    survivors: list[ProcessRecord]
    port_free: bool
    stop_s: Number
    lifetime_s: Number | None = Field(
        description="spawn to stopped, the wall time the budget charges")
    clean: bool
    problems: list[str]
    steps: list[StopStep] = Field(
        description="the stop in order: SIGTERM to the main process, a measured wait, then to "
                    "the group, then SIGKILL")

    def check(self) -> CleanupCheck:
        """The instance's `cleanup` check: a pass, or a failure (`incomplete_cleanup`) naming
        what the stop left behind."""
        # The checks' records read the host's (identity rows): imported when an audit is judged.
        from ref2va_accept.evidence._checks_records import (  # noqa: PLC0415
            CleanupCheck,
            CleanupCheckData,
        )

        return CleanupCheck(
            track=self.instance.split(".", 1)[0], arm=self.arm, name=Check.CLEANUP,
            status=CheckStatus.PASS if self.clean else CheckStatus.FAIL,
            reason=None if self.clean else Reason.INCOMPLETE_CLEANUP,
            detail="; ".join(self.problems),
            data=CleanupCheckData(instance=self.instance, stop_s=self.stop_s))


class Instance(Record):
    """An engine instance: its launch record (engines.LaunchSpec.instance_record, with its track
    and run; the payload of an `instance` event) and, once stopped, its `cleanup`. An audit of an
    instance never launched in this run makes one with its `instance` and `cleanup` alone."""

    arm: str | None = None
    instance: str | None
    argv: list[str] | None = None
    env: dict[str, str] | None = None
    port: int | None = None
    startup_timeout_s: Number | None = None
    shutdown_grace_s: Number | None = None
    log: str | None = None
    track: str | None = None
    run: str | None = None
    cleanup: Cleanup | None = None


# -- sections -------------------------------------------------------------------------------------


class IdentityRow(Record):
    """One engine.source_pin field beside the host's value (built by campaign.identity.compare
    and import_rows)."""

    field: str
    frozen: str
    host: str | None
    status: IdentityStatus
    source: str


class BringupRow(Record):
    """One row of a host bring-up (built by bringup.rows' confirmed, contradicted, measured
    and not_checked)."""

    id: str
    kind: RowKind
    question: str
    status: RowStatus
    seen: str  # the value seen on the host, or why nothing was seen
    detail: str  # how it was checked, where to look
    data: dict[str, Any]

    def line(self) -> str:
        return f"{self.status.upper():<12} {self.id}: {self.seen}"


class Bringup(Record):
    """A host bring-up's rows (ref2va-accept bringup; its bringup.json holds them with
    everything it measured)."""

    campaign: str
    rows: list[BringupRow]
    failure: str | None


class HostIdentity(Record):
    """The identity preflight: each engine.source_pin field beside the host's value (built by
    campaign.identity.preflight)."""

    engine_kind: EngineKindName
    ok: bool  # every row a match
    rows: list[IdentityRow]

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def problems(self) -> list[IdentityRow]:
        return [row for row in self.rows if row.status != "match"]

    def table(self) -> str:
        head = ("field", "frozen", "host", "status")
        body = [(r.field, r.frozen, r.host if r.host is not None else "-", r.status)
                for r in self.rows]
        widths = [max(len(line[i]) for line in [head, *body]) for i in range(4)]
        lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip()
                 for line in [head, *body]]
        lines += [f"{r.field}: {r.source}" for r in self.rows if r.status == "not found"]
        return "\n".join(lines)

    def detail(self) -> str:
        """One line naming every field that is not a match, with frozen and host values."""
        return "; ".join(f"{r.field}: {r.status}, frozen {r.frozen!r}, host "
                         + (repr(r.host) if r.host is not None else f"unknown ({r.source})")
                         for r in self.problems())


class Poll(Record):
    at_s: Number
    readable: bool
    used_mb: dict[str, Number]
    problem: str | None


class IdleLevel(Record):
    used_mb: dict[str, Number] | None
    problem: str | None


class ReleaseRecord(Record):
    """The wait for device memory after one stop, as the bring-up records it (built by
    engines.Release.record): released, or the MB each device still held above idle."""

    released: bool
    waited_s: Number
    held_mb: dict[str, Number]
    problem: str | None
    polls: list[Poll]


class MemoryWait(Record):
    """The wait for device memory after one stop (engines.MemoryGuard.after_stop)."""

    instance: str
    arm: str
    released: bool
    waited_s: Number
    held_mb: dict[str, Number]
    problem: str | None
    polls: list[Poll]


class DeviceMemoryMeasured(Record):
    """The assigned devices' idle memory and the wait for it after every stop."""

    status: Literal["measured"]
    kind: DeviceKind
    devices: list[int]
    timeout_s: Number
    poll_s: Number
    tolerance_mb: Number
    idle: IdleLevel | None
    waits: list[MemoryWait]


class DeviceMemoryNotApplicable(Record):
    status: Literal["not_applicable"]
    kind: DeviceKind
    reason: str


DeviceMemory: TypeAlias = Annotated[DeviceMemoryMeasured | DeviceMemoryNotApplicable,
                                    Field(discriminator="status")]


class Leftover(Record):
    """An engine process of a dead run, stopped before this run's first engine
    (engines.stop_leftovers)."""

    pid: int
    name: str
    tag: str
    stopped_by: Literal["SIGTERM", "SIGKILL", "survived"]


class TrackNeed(Record):
    track: str
    requests: int
    dump_requests: int
    mp4_bytes: int
    dump_bytes: int
    bounded_points: list[str]
    localize_bytes: int


class Disk(Record):
    """The run's evidence size estimated before any engine started (built by
    planning.check_disk), against the free space of the evidence folder's filesystem."""

    estimate_bytes: int = Field(ge=0)
    margin: Number = Field(ge=1)
    need_bytes: int = Field(ge=0)
    free_bytes: int = Field(ge=0)
    fits: bool
    skipped: bool = Field(description="--ref2va-skip-disk-check: compared, never refused")
    folder: str
    record_bytes: int
    tracks: list[TrackNeed]
