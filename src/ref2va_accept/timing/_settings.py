"""The latency protocol's frozen settings: what the timing code (replication, calibration, the
latency gate) reads of a track's plan, kept below the plan so that it needs nothing above it."""

from __future__ import annotations

from dataclasses import dataclass

from ref2va_accept.core import DecisionRule, Unit
from ref2va_accept.evidence import BaselineInstances, Design, DeviceKind


@dataclass(frozen=True)
class LatencySettings:
    """The latency protocol's frozen settings, and the devices it probes for interference."""

    replication: Unit
    instances_per_arm: int | None  # the instance design's N; None in the request design
    # B0's instances serve one candidate each, or all the track's candidates (latency_schedule)
    baseline_instances: BaselineInstances
    warmups: int  # the least per instance
    max_warmups: int  # the most per instance (= warmups without a steady-state rule)
    steady_fraction: float | None  # last two warm-ups agree within it; None: a fixed count
    repeats: int  # measured requests per instance
    ordering: Design
    order_seed: int  # the run's (drawn per run, or the campaign's fixed seed)
    pause_s: float
    drift_tolerance: float
    target_ratio: float
    confidence: float
    decision_rule: DecisionRule
    caching_probe_requests: int
    caching_margin: float
    device_kind: DeviceKind
    devices: tuple[int, ...]
    order_drawn: bool = False  # the seed was drawn for this run (protocol.order_seed: per_run)
    # Denoising steps of every warm-up (a demonstrated cheap warm-up); None: the track's own.
    warmup_steps: int | None = None
