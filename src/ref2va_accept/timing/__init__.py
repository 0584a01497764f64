"""The clock and the statistics: the timed request, the latency protocol's frozen
settings, its replication rules, the ratio interval and the decision rules.

The modules are private; the other stages import these names from here.
"""

from ref2va_accept.timing._clock import (
    SERVER_HEADERS,
    ClientTimeouts,
    GenerationRequest,
    ReferenceFile,
    TimedClient,
)
from ref2va_accept.timing._replication import (
    Decision,
    InstanceTimes,
    arm_values,
    candidate_schedule,
    decide,
    interval_verdict,
    is_steady,
    latency_schedule,
    not_evaluable,
    spread,
    supported_reachable,
    warmup_done,
)
from ref2va_accept.timing._settings import LatencySettings
from ref2va_accept.timing._stats import (
    early_stopping_min_queries,
    interval_k,
    latency_verdict,
    mann_whitney_counts,
    ratio_interval,
    tail_claims,
)

__all__ = [
    "SERVER_HEADERS",
    "ClientTimeouts",
    "Decision",
    "GenerationRequest",
    "InstanceTimes",
    "LatencySettings",
    "ReferenceFile",
    "TimedClient",
    "arm_values",
    "candidate_schedule",
    "decide",
    "early_stopping_min_queries",
    "interval_k",
    "interval_verdict",
    "is_steady",
    "latency_schedule",
    "latency_verdict",
    "mann_whitney_counts",
    "not_evaluable",
    "ratio_interval",
    "spread",
    "supported_reachable",
    "tail_claims",
    "warmup_done",
]
