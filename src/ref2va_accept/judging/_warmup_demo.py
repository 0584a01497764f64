"""The warm-up demonstration: may a latency instance warm up with fewer denoising steps?

A warm-up of the full request costs as much as a measured one (about 5 minutes for a 5 s
request on the host, 28 for a 15 s one), and every instance makes two or three. A warm-up with
fewer steps (same shape, same inputs) warms the same code paths, but whether the first measured
request after it is as fast as one after full warm-ups is a fact of the host, not a guess. This
scenario measures it once: B0 on `pairs` pairs of fresh instances, one of each pair warmed up in
full and the other with `steps` steps (which one first drawn from the run's order seed), each
then sending one measured request. The campaign may set `protocol.warmup_steps` only with the
figures this prints (`protocol.warmup_demonstration`), and only when the median request after
cheap warm-ups is within `steady_fraction` of the one after full warm-ups (campaign/schema.py).
"""

from __future__ import annotations

import random
import statistics

from ref2va_accept.arms import Arms
from ref2va_accept.core import ArmRole, Check, CheckStatus, Reason
from ref2va_accept.evidence import (
    NoData,
    WarmupDemonstrationCheck,
    WarmupDemonstrationData,
    utc_now,
)
from ref2va_accept.planning import DEFAULT_PAIRS
from ref2va_accept.timing import warmup_done


def _one(arms: Arms, steps: int | None, index: int) -> float | None:
    """A fresh B0 instance warmed up (full, or with `steps` steps), then one measured request."""
    plan = arms.plan
    engine = arms.start(ArmRole.B0)
    try:
        warm: list[float] = []
        while not warmup_done(warm, plan.latency):
            outcome = arms.request(engine, ArmRole.B0, kind="warmup", index=index * 100 + len(warm),
                                   seed=plan.seeds[0], steps=steps)
            if not outcome.complete or outcome.sample.latency_s is None:
                return None
            warm.append(outcome.sample.latency_s)
        measured = arms.request(engine, ArmRole.B0, kind="measured", index=index * 100 + 99,
                                seed=plan.seeds[0])
        return measured.sample.latency_s if measured.complete else None
    finally:
        arms.registry.stop(engine)


def demonstrate(arms: Arms, steps: int, pairs: int = DEFAULT_PAIRS
                ) -> WarmupDemonstrationCheck:
    """Run the demonstration on the arm runner's track; the check carries the figures and the
    YAML to paste under `protocol.warmup_demonstration.per_duration`."""
    plan = arms.plan
    limit = plan.latency.steady_fraction if plan.latency.steady_fraction is not None else 0.05
    rng = random.Random(f"{plan.latency.order_seed}/warmup/{plan.track_id}")
    full: list[float] = []
    cheap: list[float] = []
    for pair in range(pairs):
        order = [None, steps] if rng.random() < 0.5 else [steps, None]
        for slot, kind in enumerate(order):
            value = _one(arms, kind, pair * 2 + slot)
            if value is None:
                return WarmupDemonstrationCheck(
                    track=plan.track_id, arm=ArmRole.B0, name=Check.WARMUP_DEMONSTRATION,
                    status=CheckStatus.FAIL, reason=Reason.BASELINE_REQUEST_FAILED,
                    detail=f"pair {pair + 1}: a B0 request failed; nothing shown",
                    data=NoData())
            (full if kind is None else cheap).append(value)
    ratio = statistics.median(cheap) / statistics.median(full)
    within = abs(ratio - 1) <= limit
    yaml = (f'"{plan.duration}": {{full_s: [{", ".join(f"{v:.3f}" for v in full)}], '
            f'cheap_s: [{", ".join(f"{v:.3f}" for v in cheap)}]}}')
    data = WarmupDemonstrationData(warmup_steps=steps, full_s=full, cheap_s=cheap, ratio=ratio,
                                   limit=limit, measured_at=utc_now(), per_duration_yaml=yaml)
    detail = (f"the request after {steps}-step warm-ups took {ratio:.3f} of one after full "
              f"warm-ups (median of {pairs} each; within {limit:g}: "
              f"{'yes' if within else 'no'}); per_duration entry: {yaml}")
    return WarmupDemonstrationCheck(
        track=plan.track_id, arm=ArmRole.B0, name=Check.WARMUP_DEMONSTRATION,
        status=CheckStatus.PASS if within else CheckStatus.FAIL,
        reason=None if within else Reason.WARMUP_NOT_STEADY, detail=detail, data=data)
