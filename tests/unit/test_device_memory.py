"""Waiting for device memory to return to idle after an instance stops: fake probes fed with
recorded/synthetic npu-smi snapshots, a fake clock, no real sleeping."""

from __future__ import annotations

from pathlib import Path

import pytest

from ref2va_accept.campaign import Campaign, validate_model
from ref2va_accept.core import CampaignError, Check
from ref2va_accept.engines import (
    REASON,
    DeviceSnapshot,
    MemoryGuard,
    MemoryRelease,
    parse_npu_smi_info,
    parse_npu_smi_map,
    read_idle,
    wait_for_release,
)
from ref2va_accept.evidence import IdleLevel
from ref2va_accept.judging import VALIDITY_REASONS, judge
from ref2va_accept.timing import latency_verdict
from tests.unit.check_records import make_check

pytestmark = pytest.mark.fast

DEVICES = Path(__file__).resolve().parents[2] / "fixtures" / "devices"
ASSIGNED = (0, 1, 2, 3)


def _text(name: str) -> str:
    return (DEVICES / name).read_text().partition("\n")[2]


CHIP_MAP = parse_npu_smi_map(_text("synthetic-npu-smi-info-m_a3-2card.txt"))
IDLE = parse_npu_smi_info(_text("synthetic-npu-smi-info_a3-4chip-idle.txt"), CHIP_MAP)
# Chip 3 still holds 31877 MB (idle: 2890) with no process listed: memory not yet released.
HELD = parse_npu_smi_info(_text("synthetic-npu-smi-info_a3-4chip-container-column.txt"), CHIP_MAP)
UNREADABLE = parse_npu_smi_info("npu-smi: dcmi module initialize failed. ret is -8005\n")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.slept.append(seconds)
        self.now += seconds


class SequenceProbe:
    """Returns the given snapshots in order, then repeats the last."""

    def __init__(self, *snapshots: DeviceSnapshot) -> None:
        self.snapshots = list(snapshots)
        self.calls = 0

    def snapshot(self) -> DeviceSnapshot:
        self.calls += 1
        return self.snapshots[min(self.calls, len(self.snapshots)) - 1]


SPEC = MemoryRelease(timeout_s=120, poll_s=5, tolerance_mb=512)


def test_fixtures_read_as_expected() -> None:
    assert IDLE.readable and HELD.readable and not UNREADABLE.readable
    assert IDLE.memory_used_mb == {0: 3398, 1: 2869, 2: 3402, 3: 2890}
    assert HELD.memory_used_mb[3] == 31877


def test_idle_level_is_read_per_assigned_device() -> None:
    idle = read_idle(SequenceProbe(IDLE), ASSIGNED)
    assert idle.used_mb == {"0": 3398, "1": 2869, "2": 3402, "3": 2890} and idle.problem is None
    assert read_idle(SequenceProbe(IDLE), (0, 7)).used_mb is None
    unreadable = read_idle(SequenceProbe(UNREADABLE), ASSIGNED)
    assert unreadable.used_mb is None and "unreadable" in (unreadable.problem or "")


def test_busy_then_idle_within_the_bound_is_released() -> None:
    clock = FakeClock()
    probe = SequenceProbe(HELD, HELD, IDLE)
    release = wait_for_release(probe, ASSIGNED, read_idle(SequenceProbe(IDLE), ASSIGNED), SPEC,
                               clock=clock, sleep=clock.sleep)
    assert release.released and release.held_mb == {}
    assert release.waited_s == 10.0 and clock.slept == [5, 5]
    assert [p.used_mb["3"] for p in release.polls] == [31877, 31877, 2890]


def test_a_device_that_stays_busy_fails_naming_it_and_the_megabytes() -> None:
    clock = FakeClock()
    probe = SequenceProbe(HELD)
    release = wait_for_release(probe, ASSIGNED, read_idle(SequenceProbe(IDLE), ASSIGNED), SPEC,
                               clock=clock, sleep=clock.sleep)
    assert not release.released
    assert release.held_mb == {3: 31877 - 2890}
    assert release.waited_s == 120.0 and sum(clock.slept) == 120.0
    assert probe.calls == 25  # a poll at 0, 5, ..., 120 s: bounded, never past the timeout
    assert "device 3: 28987 MB above idle" in release.explain()


def test_within_tolerance_counts_as_idle() -> None:
    idle = IdleLevel(used_mb={"0": 3000.0}, problem=None)
    near = DeviceSnapshot("npu", True, (0,), (), {0: 3400.0}, None, "x")
    far = DeviceSnapshot("npu", True, (0,), (), {0: 3600.0}, None, "x")
    clock = FakeClock()
    assert wait_for_release(SequenceProbe(near), (0,), idle, SPEC, clock=clock,
                            sleep=clock.sleep).released
    tight = MemoryRelease(timeout_s=10, poll_s=5, tolerance_mb=100)
    assert not wait_for_release(SequenceProbe(near), (0,), idle, tight, clock=clock,
                                sleep=clock.sleep).released
    assert not wait_for_release(SequenceProbe(far), (0,), idle, SPEC, clock=clock,
                                sleep=clock.sleep).released


def test_an_unreadable_probe_is_never_idle() -> None:
    clock = FakeClock()
    release = wait_for_release(SequenceProbe(UNREADABLE), ASSIGNED,
                               read_idle(SequenceProbe(IDLE), ASSIGNED),
                               MemoryRelease(timeout_s=20, poll_s=5, tolerance_mb=512),
                               clock=clock, sleep=clock.sleep)
    assert not release.released and release.held_mb == {}
    assert "probe unreadable" in (release.problem or "") and "dcmi" in release.explain()
    assert len(release.polls) == 5 and not any(p.readable for p in release.polls)


def test_unreadable_then_idle_is_released() -> None:
    clock = FakeClock()
    release = wait_for_release(SequenceProbe(UNREADABLE, IDLE), ASSIGNED,
                               read_idle(SequenceProbe(IDLE), ASSIGNED), SPEC,
                               clock=clock, sleep=clock.sleep)
    assert release.released and len(release.polls) == 2


def test_without_an_idle_level_the_wait_fails_closed() -> None:
    clock = FakeClock()
    down = IdleLevel(used_mb=None, problem="probe down")
    release = wait_for_release(SequenceProbe(IDLE), ASSIGNED, down, SPEC, clock=clock,
                               sleep=clock.sleep)
    assert not release.released and "idle level was never read (probe down)" in release.explain()
    assert clock.slept == []


def test_guard_turns_a_held_device_into_a_validity_check() -> None:
    assert REASON in VALIDITY_REASONS
    clock = FakeClock()
    probe = SequenceProbe(IDLE, HELD)
    guard = MemoryGuard("npu", ASSIGNED, SPEC, probe, clock=clock, sleep=clock.sleep)
    guard.read_idle()
    guard.read_idle()  # later calls keep the first reading
    assert probe.calls == 1
    check = guard.after_stop("5s-lossless", "b0", "5s-lossless.b0.1")
    assert check is not None and check.status == "fail" and check.reason == REASON
    assert check.detail.startswith("after 5s-lossless.b0.1: not released within 120.0 s")
    assert "device 3: 28987 MB above idle" in check.detail
    latency = make_check("5s-lossless", "c1", Check.LATENCY_RATIO, "pass",
                         latency=latency_verdict([300, 298, 305], [140, 141, 139]))
    verdict = judge("5s-lossless", "lossless", "c1", [check, latency])
    assert verdict.verdict == "inconclusive" and REASON in verdict.reasons
    record = guard.record().json_dict()
    assert record["status"] == "measured" and len(record["waits"]) == 1
    assert len(record["waits"][0]["polls"]) == 25 and record["idle"]["used_mb"]["3"] == 2890

    probe.snapshots.append(IDLE)
    passing = guard.after_stop("5s-lossless", "c1", "5s-lossless.c1.2")
    assert passing is not None and passing.status == "pass" and passing.reason is None


def test_a_guard_without_an_idle_reading_fails_closed() -> None:
    clock = FakeClock()
    guard = MemoryGuard("npu", ASSIGNED, SPEC, SequenceProbe(IDLE), clock=clock,
                        sleep=clock.sleep)
    check = guard.after_stop("5s-lossy", "b0", "5s-lossy.b0.1")
    assert check is not None and check.status == "fail"
    assert "no idle reading was taken" in check.detail


def test_kind_none_polls_nothing_and_claims_nothing() -> None:
    probe = SequenceProbe(IDLE)
    guard = MemoryGuard("none", (), SPEC, probe)
    guard.read_idle()
    assert guard.after_stop("5s-lossy", "b0", "5s-lossy.b0.1") is None
    assert probe.calls == 0
    assert guard.record().status == "not_applicable"


def _campaign(release: object) -> dict[str, object]:
    import yaml

    data: dict[str, object] = yaml.safe_load(
        (DEVICES.parent / "campaigns" / "reference.yaml").read_text())
    data["devices"] = {"kind": "none", "memory_release": release}
    return data


def test_memory_release_fields_are_validated() -> None:
    good = validate_model(Campaign, _campaign({"timeout_s": 60, "poll_s": 2, "tolerance_mb": 256}),
                          "c.yaml")
    assert good.devices.memory_release == MemoryRelease(timeout_s=60, poll_s=2, tolerance_mb=256)
    for bad, where in [({"timeout_s": 0}, "devices.memory_release.timeout_s"),
                       ({"poll_s": -1}, "devices.memory_release.poll_s"),
                       ({"tolerance_mb": -5}, "devices.memory_release.tolerance_mb"),
                       ({"interval": 5}, "devices.memory_release.interval: unknown key")]:
        with pytest.raises(CampaignError, match=f"c.yaml: {where}"):
            validate_model(Campaign, _campaign(bad), "c.yaml")
