"""The latency protocol's replication design, as pure functions of its settings and latencies.

Which server instances run in which order, when an instance's warm-up has reached a steady
state, which values each arm gives the ratio interval, B0's spread between and within instances,
B0's drift, and the decision. `judging/_latency_run.py` runs this against real servers and
`judging/_latency.py` judges and records it; `planning/_calibration.py` runs the very same
functions on simulated latencies, so what is calibrated is what judges (docs/protocol.md).

Two units of replication:
- instance (the default): N fresh instances per arm, B0 and candidate interleaved in N pairs
  whose order within each pair the order seed draws; each instance gives one value, the median
  of its measured requests, and the interval is computed on those N values per arm. Servers
  differ from start to start, and this design's interval speaks of that.
  With `baseline_instances: shared`, a track's N B0 instances serve all its candidates: N blocks,
  each one instance of B0 and of every candidate, in an order the order seed draws per block
  (`latency_schedule`); with one candidate that is exactly the pair design.
- request (explicit, labelled): the older AB/ABA/ABBA orderings, every measured request a value.
  With one or two instances per arm its interval speaks of variation inside an instance only.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ref2va_accept.core import ArmRole, DecisionRule, LatencyDecisionReason, Unit, Verdict
from ref2va_accept.evidence import LatencyInterval, Spread
from ref2va_accept.timing._settings import LatencySettings
from ref2va_accept.timing._stats import interval_k, latency_verdict, t_quantile


def candidate_schedule(settings: LatencySettings, candidate: str) -> list[str]:
    """One candidate's latency schedule against its own B0: the arms of the instances, in the
    order they are started (ArmRole.B0 is B0)."""
    if settings.ordering == "interleaved":
        pairs = settings.instances_per_arm or 0
        # A string seed is hashed with SHA-512 by random.Random: the same order on every host.
        rng = random.Random(f"{settings.order_seed}/{candidate}")
        order: list[str] = []
        for _ in range(pairs):
            order += [ArmRole.B0, candidate] if rng.random() < 0.5 else [candidate, ArmRole.B0]
        return order
    if settings.ordering == "ABA":
        return [ArmRole.B0, candidate, ArmRole.B0]
    if settings.ordering == "ABBA":
        return [ArmRole.B0, candidate, candidate, ArmRole.B0]
    first_b0 = random.Random(settings.order_seed).random() < 0.5
    return [ArmRole.B0, candidate] if first_b0 else [candidate, ArmRole.B0]


def latency_schedule(settings: LatencySettings, track_id: str, candidates: Sequence[str]
                     ) -> list[str]:
    """A track's latency schedule: the arms of every latency instance, in start order, for
    `candidates`.

    B0 per candidate (`baseline_instances: per_candidate`, or the request design): each
    candidate's own `candidate_schedule`, one candidate after the other. Shared: N blocks of B0
    and every candidate once, each block shuffled by a generator seeded from the order seed, the
    track and the candidates; one candidate gives exactly its `candidate_schedule` (the pair
    design), so a shared B0 with one candidate is the per-candidate design.
    """
    if settings.baseline_instances != "shared" or settings.replication != "instance":
        return [arm for c in candidates for arm in candidate_schedule(settings, c)]
    if len(candidates) == 1:
        return candidate_schedule(settings, candidates[0])
    if len(set(candidates)) != len(candidates) or ArmRole.B0 in candidates:
        raise ValueError(f"candidates must be distinct and not {ArmRole.B0.value!r}: "
                         f"{list(candidates)}")
    rng = random.Random(f"{settings.order_seed}/{track_id}/{'+'.join(candidates)}")
    order: list[str] = []
    for _ in range(settings.instances_per_arm or 0):
        block = [ArmRole.B0, *candidates]
        rng.shuffle(block)
        order += block
    return order


def is_steady(warmups: Sequence[float], fraction: float | None) -> bool:
    """Whether the last two warm-ups agree within `fraction` of the earlier one (None: no rule)."""
    if fraction is None:
        return True
    if len(warmups) < 2:
        return False
    return abs(warmups[-1] / warmups[-2] - 1) <= fraction


def warmup_done(warmups: Sequence[float], settings: LatencySettings) -> bool:
    """Whether to stop warming up: the minimum is reached and the state is steady, or the bound."""
    if len(warmups) < settings.warmups:
        return False
    return len(warmups) >= settings.max_warmups or is_steady(warmups, settings.steady_fraction)


@dataclass(frozen=True)
class InstanceTimes:
    """One instance's latencies in seconds: its warm-ups and its measured requests."""

    arm: str
    warmups: tuple[float, ...]
    measured: tuple[float, ...]
    steady: bool = True

    @property
    def value(self) -> float:
        """The instance's one value in the instance design: the median of its measured requests."""
        return statistics.median(self.measured)

    def steady_window(self, settings: LatencySettings) -> tuple[float, ...]:
        """The requests taken in steady state: the two warm-ups that met the rule, if any, and
        the measured requests; the spread within an instance is computed over these."""
        # Cheap warm-ups (fewer steps) are no sample of the measured request's spread.
        kept = (self.warmups[-2:] if settings.steady_fraction is not None and self.steady
                and settings.warmup_steps is None else ())
        return (*kept, *self.measured)


def arm_values(instances: Sequence[InstanceTimes], settings: LatencySettings
               ) -> tuple[list[float], list[float]]:
    """The interval's samples, B0's and the candidate's: one per instance, or one per request."""
    def values(arm_instances: list[InstanceTimes]) -> list[float]:
        if settings.replication == Unit.INSTANCE:
            return [i.value for i in arm_instances if i.measured]
        return [x for i in arm_instances for x in i.measured]

    return (values([i for i in instances if i.arm == ArmRole.B0]),
            values([i for i in instances if i.arm != ArmRole.B0]))


def _relative_sd(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    return statistics.stdev(values) / statistics.fmean(values)


def spread(instances: Sequence[InstanceTimes], settings: LatencySettings) -> Spread:
    measured = [i for i in instances if i.measured]
    between = _relative_sd([i.value for i in measured])
    variances = []
    for instance in measured:
        window = instance.steady_window(settings)
        relative = _relative_sd(window)
        if relative is not None:
            variances.append(relative ** 2)
    within = math.sqrt(statistics.fmean(variances)) if variances else None
    return Spread(between_instances=between, within_instance=within, instances=len(measured))


def drift(instances: Sequence[InstanceTimes], settings: LatencySettings) -> float | None:
    """How far B0's last value moved from its first, as a fraction; None when B0 ran once.

    Instance design: the first and the last B0 instance's values. Request design: only ABA
    re-measures B0 (A'), and its two instances' medians are compared.
    """
    b0 = [i for i in instances if i.arm == ArmRole.B0 and i.measured]
    if len(b0) < 2 or (settings.replication == Unit.REQUEST and settings.ordering != "ABA"):
        return None
    first, last = b0[0].value, b0[-1].value
    return abs(last / first - 1)


@dataclass(frozen=True)
class Decision:
    """What the protocol concludes from the latencies: a run that is not evaluable (its reason),
    or the interval's verdict."""

    reason: LatencyDecisionReason | None
    drift: float | None
    verdict: LatencyInterval | None


def not_evaluable(instances: Sequence[InstanceTimes], settings: LatencySettings
                  ) -> tuple[LatencyDecisionReason | None, float | None]:
    """What makes the run not evaluable: the first reason that holds in LatencyDecisionReason's
    order (an instance whose warm-up never became steady, then B0 drift beyond the tolerance),
    the one order calibration's vectorised decision applies too; and B0's drift once steady."""
    moved = drift(instances, settings)
    holds = {LatencyDecisionReason.WARMUP_NOT_STEADY: any(not i.steady for i in instances),
             LatencyDecisionReason.DRIFT: moved is not None and moved > settings.drift_tolerance}
    reason = next((r for r in LatencyDecisionReason if holds[r]), None)
    return reason, None if reason is LatencyDecisionReason.WARMUP_NOT_STEADY else moved


def interval_verdict(instances: Sequence[InstanceTimes], settings: LatencySettings
                     ) -> LatencyInterval:
    """The ratio interval's verdict on the arms' values (one per instance or per request)."""
    baseline, candidate = arm_values(instances, settings)
    single = settings.replication == Unit.REQUEST and settings.ordering != "ABBA"
    return latency_verdict(baseline, candidate, settings.target_ratio, settings.confidence,
                           single_instance=single, unit=settings.replication,
                           instances_per_arm=settings.instances_per_arm,
                           rule=settings.decision_rule)


def decide(instances: Sequence[InstanceTimes], settings: LatencySettings) -> Decision:
    """The protocol's decision: a run that is not evaluable says why; otherwise the ratio
    interval decides."""
    reason, moved = not_evaluable(instances, settings)
    if reason is not None:
        return Decision(reason, moved, None)
    return Decision(None, moved, interval_verdict(instances, settings))


# --- futility: is `supported` still within reach? ----------------------------------------------

# The remaining instances' values are searched within this factor of what each arm measured so
# far (a latency 1,000 times faster or slower than the arm's own is no server's).
REACH_FACTOR = 1000.0


def supported_reachable(settings: LatencySettings, baseline: Sequence[float],
                        candidate: Sequence[float], baseline_left: int, candidate_left: int
                        ) -> bool:
    """Whether any values the remaining instances could measure (each arm's within
    REACH_FACTOR of its own so far) make the frozen rule say `supported` at the full sizes.

    False only when no such values exist, so stopping on it loses no power by construction.
    Rank rule: supported needs at most k-1 candidate/B0 pairs above the target, and more values
    only add pairs. Welch rule: supported needs log(target) - (mean log C - mean log B) >=
    t(confidence, df) * se; df never exceeds nB + nC - 2, so t(nB + nC - 2) bounds it from below
    and the condition is relaxed, never tightened. The relaxed margin is concave in the free
    values and symmetric in each arm's, so its maximum has each arm's free values equal: a
    two-variable concave maximisation over a box.
    """
    nb, nc = len(baseline) + baseline_left, len(candidate) + candidate_left
    target = settings.target_ratio
    if settings.decision_rule != DecisionRule.WELCH:
        k = interval_k(nb, nc, settings.confidence)
        inverted = sum(1 for c in candidate for b in baseline if c / b > target)
        return k > 0 and inverted <= k - 1
    if nb < 2 or nc < 2:
        return False
    if not baseline or not candidate:
        return True  # an arm with no value yet can still be anything
    if baseline_left == 0 and candidate_left == 0:
        return latency_verdict(baseline, candidate, target, settings.confidence,
                               rule=DecisionRule.WELCH).verdict == Verdict.SUPPORTED
    import numpy as np  # noqa: PLC0415
    from scipy.optimize import minimize  # noqa: PLC0415

    lb = [math.log(b) for b in baseline]
    lc = [math.log(c) for c in candidate]
    t_min = t_quantile(settings.confidence, nb + nc - 2)
    log_target = math.log(target)

    def margin(x: Sequence[float]) -> float:
        b = lb + [float(x[0])] * baseline_left
        c = lc + [float(x[1])] * candidate_left
        se = math.sqrt(statistics.variance(b) / nb + statistics.variance(c) / nc)
        return log_target - (statistics.fmean(c) - statistics.fmean(b)) - t_min * se

    span = math.log(REACH_FACTOR)
    mb, mc = statistics.fmean(lb), statistics.fmean(lc)
    bounds = [(mb - span, mb + span), (mc - span, mc + span)]
    # Concave (a linear term minus a norm of an affine map), so one local search finds the
    # maximum over the box; a few points where it is usually largest are tried first.
    for point in ((mb, mc), (mb + span, mc - span), (mb + span / 4, mc - span / 4)):
        if margin(point) >= 0:
            return True
    found = minimize(lambda x: -margin(x), np.array((mb, mc)), method="L-BFGS-B",
                     bounds=bounds)
    return -float(found.fun) >= -1e-12
