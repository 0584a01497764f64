"""The campaign's timing protocol: the unit of replication, warm-ups and repeats, ordering,
timeouts, the decision rule, and the prices the bring-up measures (start, stop, request, capture).
"""

from __future__ import annotations

import statistics
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    Strict,
    model_serializer,
    model_validator,
)

from ref2va_accept.campaign._fields import (
    DurationClass,
    StrictModel,
)
from ref2va_accept.core import (
    DEFAULT_CONFIDENCE,
    DEFAULT_DECISION_RULE,
    DEFAULT_TARGET_RATIO,
    DecisionRule,
    Unit,
)
from ref2va_accept.evidence import BaselineInstances, Design

# The capture levels of a localization pass (judging/localize): blocks, then inside one block.
CaptureLevel = Literal["level1", "level2"]


class TimeoutSet(StrictModel):
    request_s: float = Field(gt=0)
    connect_s: float = Field(default=10, gt=0)


class WarmupFigures(StrictModel):
    """One duration class of a warm-up demonstration: the measured request after full warm-ups
    and after cheap ones, each on an instance of its own (seconds)."""

    full_s: list[Annotated[float, Field(gt=0)]] = Field(min_length=1)
    cheap_s: list[Annotated[float, Field(gt=0)]] = Field(min_length=1)

    @property
    def ratio(self) -> float:
        return statistics.median(self.cheap_s) / statistics.median(self.full_s)


class WarmupDemonstration(StrictModel):
    """What the host measured once (`pytest -m warmup_demonstration --warmup-steps N`): the first
    measured request after warm-ups of `warmup_steps` denoising steps against one after full
    warm-ups, per duration class; pasted here from that run's output before freezing."""

    warmup_steps: int = Field(ge=1)
    run_id: str = Field(min_length=1)
    measured_at: str = Field(min_length=1)
    per_duration: dict[DurationClass, WarmupFigures] = Field(min_length=1)


class Protocol(StrictModel):
    # The unit of replication (docs/protocol.md). "instance": `instances_per_arm` fresh server
    # instances per arm, B0 and candidate interleaved in pairs whose order the order seed draws,
    # and the interval computed on one value per instance (the median of its measured requests).
    # "request": the older design, every measured request a sample; kept as an explicit,
    # labelled choice (its interval speaks of variation inside one instance per arm only).
    # (The vocabulary's enums take their values from the YAML's strings: Strict(False).)
    replication: Annotated[Unit, Strict(False)] = Unit.INSTANCE
    instances_per_arm: int | None = Field(default=None, ge=1)
    # B0's instances in the instance design: "per_candidate" (each candidate is paired with N B0
    # instances of its own) or "shared" (a track's N B0 instances serve all its candidates: N
    # blocks, each one instance of B0 and of every candidate in an order the order seed draws).
    # Absent means per_candidate, so campaigns frozen before the field existed keep their meaning.
    baseline_instances: BaselineInstances | None = None
    # Warm-ups per instance: at least `warmups`; with `steady_fraction`, more until the last two
    # agree within that fraction of the earlier one, at most `max_warmups` (not reaching it leaves
    # the latency check inconclusive, reason warmup_not_steady).
    warmups: int = Field(ge=0)
    max_warmups: int | None = Field(default=None, ge=0)
    steady_fraction: float | None = Field(default=None, gt=0, lt=1)
    repeats: int = Field(ge=1)
    ordering: Design
    # The seed of the instances' order: "per_run" draws one for every run and records it in the
    # evidence (a drift pattern that favours one fixed order would favour it in every rerun); an
    # integer fixes it (to replay a run: `pytest --order-seed N` does the same for one session).
    order_seed: int | Literal["per_run"]
    pause_s: float = Field(default=0, ge=0)
    timeouts: dict[DurationClass, TimeoutSet]
    # B0's last value may differ from its first (its last instance's from its first instance's;
    # in the request design A' from A) by at most this fraction; beyond it the run drifted and is
    # not evaluable.
    drift_tolerance: float = Field(default=0.10, gt=0, lt=1)
    # The decision, at this confidence per end, against this target ratio (0.5 = a 50% latency
    # reduction): the distribution-free rank interval (exact only when the candidate's values are
    # B0's scaled by a constant), or the one-sided Welch interval on log values, each arm with
    # its own spread (docs/protocol.md; `ref2va-accept calibrate` shows either's error rates).
    decision_rule: Annotated[DecisionRule, Strict(False)] = DEFAULT_DECISION_RULE
    target_ratio: float = Field(default=DEFAULT_TARGET_RATIO, gt=0, lt=1)
    confidence: float = Field(default=DEFAULT_CONFIDENCE, gt=0.5, lt=1)
    # Caching probe (MLPerf TEST04 idea): this many requests with fresh distinct seeds per
    # candidate, spread over its instances and each sent right after a measured request; caching
    # is suspected when, on every probed instance, the repeated identical requests are more than
    # `caching_margin` faster than the distinct ones. 0 = off.
    caching_probe_requests: int = Field(default=2, ge=0)
    caching_margin: float = Field(default=0.10, gt=0, lt=1)
    # Seconds one request is expected to take per duration class (the host's preflight medians);
    # only live progress reads them, to estimate the remaining time. Optional: without them the
    # estimate comes from the run's own finished requests.
    expected_request_s: dict[DurationClass, Annotated[float, Field(gt=0)]] | None = None
    # Seconds from an engine's spawn to its first healthy answer, per duration class (the host's
    # preflight or bring-up): `plan`, `verify` and the budget check price every start with it.
    expected_start_s: dict[DurationClass, Annotated[float, Field(ge=0)]] | None = None
    # Warm-ups with this many denoising steps instead of the track's (the full shape otherwise):
    # allowed only with a demonstration that the first measured request after them is within
    # steady_fraction of one after full warm-ups (`warmup_demonstration`, measured on the host).
    warmup_steps: int | None = Field(default=None, ge=1)
    warmup_demonstration: WarmupDemonstration | None = None
    # Seconds one engine stop takes, per duration class: SIGTERM to gone plus the wait for device
    # memory back to idle (the bring-up measures it: the slowest stop it saw). Absent: `plan`
    # prices every stop at its bound, engine.shutdown_grace_s plus devices.memory_release's
    # timeout_s where devices are assigned, and says that it is a bound.
    expected_stop_s: dict[DurationClass, Annotated[float, Field(ge=0)]] | None = None
    # What a localization pass's capture request costs, as a factor (>= 1) of a plain request's
    # price: level 1 (every block of one step hooked, digests only) and level 2 (one block's
    # modules, their tensors written), measured by the bring-up's capture requests. Absent: a
    # pass's requests are named unpriced.
    capture_overhead: dict[CaptureLevel, Annotated[float, Field(ge=1)]] | None = None
    # true: the reference engine may sleep declared device time (a launch profile's cost-model or
    # step-cost-ms, or the cost-model variable in `environment`): the harness's own tests, which
    # need slow or exactly timed requests. Every verdict of such a campaign is capped
    # inconclusive (declared_device_time). Absent or false: such a profile or variable is refused.
    declared_device_time: bool | None = None

    @model_validator(mode="after")
    def _design_is_whole(self) -> Protocol:
        if self.replication == Unit.INSTANCE:
            if self.ordering != "interleaved":
                raise ValueError(
                    f"ordering {self.ordering!r} is a request-level design: with replication "
                    "'instance' use ordering 'interleaved', or set replication: request")
            if self.instances_per_arm is None:
                raise ValueError("replication 'instance' needs instances_per_arm (fresh server "
                                 "instances per arm, e.g. 3)")
        else:
            if self.ordering == "interleaved":
                raise ValueError("ordering 'interleaved' belongs to replication 'instance'; the "
                                 "request design takes AB, ABA or ABBA")
            if self.baseline_instances == "shared":
                raise ValueError("baseline_instances 'shared' belongs to replication 'instance'; "
                                 "the request design pairs each candidate with its own B0")
            if self.instances_per_arm is not None:
                raise ValueError("instances_per_arm applies to replication 'instance' only; the "
                                 "request design's ordering fixes its instances")
        if self.warmup_steps is not None:
            shown = self.warmup_demonstration
            if shown is None:
                raise ValueError(
                    f"warmup_steps {self.warmup_steps}: a cheaper warm-up needs its "
                    "demonstration (protocol.warmup_demonstration): run `pytest -m "
                    f"warmup_demonstration --warmup-steps {self.warmup_steps}` on the host once "
                    "and paste what it prints")
            if shown.warmup_steps != self.warmup_steps:
                raise ValueError(f"warmup_steps {self.warmup_steps}, but the demonstration "
                                 f"measured warm-ups of {shown.warmup_steps} steps")
            limit = self.steady_fraction if self.steady_fraction is not None else 0.05
            for duration, figures in shown.per_duration.items():
                if abs(figures.ratio - 1) > limit:
                    raise ValueError(
                        f"warmup_demonstration.per_duration.{duration}: the request after cheap "
                        f"warm-ups took {figures.ratio:.3f} of one after full warm-ups, beyond "
                        f"{limit:g} (steady_fraction): the cheap warm-up is not demonstrated")
        if self.max_warmups is not None and self.max_warmups < self.warmups:
            raise ValueError(f"max_warmups {self.max_warmups} is below warmups {self.warmups}")
        if self.steady_fraction is not None:
            if self.warmups < 2:
                raise ValueError("steady_fraction compares the last two warm-ups: warmups must "
                                 f"be at least 2, got {self.warmups}")
            if self.max_warmups is None:
                raise ValueError("steady_fraction needs max_warmups, the bound on warm-ups")
        elif self.max_warmups is not None and self.max_warmups != self.warmups:
            raise ValueError("max_warmups above warmups needs steady_fraction, the rule that "
                             "decides when warm-up ends")
        return self

    @model_serializer(mode="wrap")
    def _absent_stays_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Frozen like the rest when given; when not, left out of the dump (and so of the lock's
        # canonical form), so that campaigns frozen before the field existed do not drift.
        data: dict[str, Any] = handler(self)
        for name in ("expected_request_s", "instances_per_arm", "max_warmups", "steady_fraction",
                     "baseline_instances", "declared_device_time", "expected_start_s",
                     "warmup_steps", "warmup_demonstration", "expected_stop_s",
                     "capture_overhead"):
            if getattr(self, name) is None:
                data.pop(name, None)
        return data
