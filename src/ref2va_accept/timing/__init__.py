"""The clock and the statistics: the timed request, the latency protocol's frozen
settings, its replication rules, the ratio interval and the decision rules.

The modules are private; the other stages import these names from here.
"""

from typing import TYPE_CHECKING

from ref2va_accept.core import load_name

if TYPE_CHECKING:
    from ref2va_accept.timing._clock import (
        SERVER_HEADERS,
        ClientTimeouts,
        GenerationRequest,
        ReferenceFile,
        Sample,
        TimedClient,
    )
    from ref2va_accept.timing._replication import (
        Decision,
        InstanceTimes,
        arm_values,
        decide,
        interval_verdict,
        is_steady,
        not_evaluable,
        schedule,
        sequence,
        spread,
        supported_reachable,
        warmup_done,
    )
    from ref2va_accept.timing._settings import LatencySettings
    from ref2va_accept.timing._stats import (
        LatencyVerdict,
        early_stopping_min_queries,
        interval_k,
        latency_verdict,
        mann_whitney_counts,
        ratio_interval,
        tail_claims,
    )

# Each name and the private module that defines it, imported when the name is
# first used (core.load_name): a stage loads only what its user needs.
_WHERE = {
    "ClientTimeouts": "_clock",
    "Decision": "_replication",
    "GenerationRequest": "_clock",
    "InstanceTimes": "_replication",
    "LatencySettings": "_settings",
    "LatencyVerdict": "_stats",
    "ReferenceFile": "_clock",
    "SERVER_HEADERS": "_clock",
    "Sample": "_clock",
    "TimedClient": "_clock",
    "arm_values": "_replication",
    "decide": "_replication",
    "early_stopping_min_queries": "_stats",
    "interval_k": "_stats",
    "interval_verdict": "_replication",
    "is_steady": "_replication",
    "latency_verdict": "_stats",
    "mann_whitney_counts": "_stats",
    "not_evaluable": "_replication",
    "ratio_interval": "_stats",
    "schedule": "_replication",
    "sequence": "_replication",
    "spread": "_replication",
    "supported_reachable": "_replication",
    "tail_claims": "_stats",
    "warmup_done": "_replication",
}

__all__ = [
    "SERVER_HEADERS",
    "ClientTimeouts",
    "Decision",
    "GenerationRequest",
    "InstanceTimes",
    "LatencySettings",
    "LatencyVerdict",
    "ReferenceFile",
    "Sample",
    "TimedClient",
    "arm_values",
    "decide",
    "early_stopping_min_queries",
    "interval_k",
    "interval_verdict",
    "is_steady",
    "latency_verdict",
    "mann_whitney_counts",
    "not_evaluable",
    "ratio_interval",
    "schedule",
    "sequence",
    "spread",
    "supported_reachable",
    "tail_claims",
    "warmup_done",
]


def __getattr__(name: str) -> object:
    return load_name(__name__, _WHERE, name)
