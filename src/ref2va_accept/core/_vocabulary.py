"""The judge's small vocabularies and the protocol's defaults, each defined once.

Every module that speaks of a check's status, a verdict, the latency protocol's unit of
replication, a track's quality class, an arm's role or the latency decision's reasons imports
it from here, and nowhere else defines it. Each is a `StrEnum` whose values are the strings the
evidence has always written: a member is a `str`, `json` writes it as its value, and it compares
equal to that string, so evidence and verdicts read exactly as before.

The check names and reason codes (with their categories) are `checks.Check` and
`checks.Reason`; the verdict order that turns checks into a verdict is `verdicts.classify`.
This module imports nothing from the package.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, TypeVar


class CheckStatus(StrEnum):
    """A recorded check's status (docs/protocol.md, "The check vocabulary")."""

    PASS = "pass"
    FAIL = "fail"
    OPEN = "open"  # it could not decide
    NOT_APPLICABLE = "not_applicable"  # there was nothing for it to check here


class Verdict(StrEnum):
    """A track verdict, and the latency interval's own result."""

    SUPPORTED = "supported"
    FAILED = "failed"
    INCONCLUSIVE = "inconclusive"


class QualityClass(StrEnum):
    """What a track's quality gate demands of a candidate (the second half of its track id)."""

    LOSSLESS = "lossless"
    LOSSY = "lossy"


class ArmRole(StrEnum):
    """An arm's role in a track. `B0` is also the baseline arm's id, in the campaign
    (`baseline.id`), the evidence (`arm`), the latency schedules and the media folders; a
    candidate arm is named by its own id."""

    B0 = "b0"
    CANDIDATE = "candidate"


class Unit(StrEnum):
    """The latency protocol's unit of replication (protocol.replication): one value per fresh
    server instance, or every measured request a value (the labelled request design)."""

    INSTANCE = "instance"
    REQUEST = "request"


class DecisionRule(StrEnum):
    """The frozen decision rules (protocol.decision_rule): the distribution-free rank interval,
    exact only when the candidate's values are B0's scaled by a constant, or the one-sided Welch
    interval on log values, each arm with its own spread (docs/protocol.md)."""

    RANK = "ratio-interval-moses/1"
    WELCH = "welch-log/1"


class LatencyDecisionReason(StrEnum):
    """Why the latency protocol's run is not evaluable (replication.not_evaluable), in the order
    they are looked for: the first that holds is the reason. Each is also the validity reason
    (`checks.Reason`) of the same name that the latency check fails with."""

    WARMUP_NOT_STEADY = "warmup_not_steady"  # an instance's warm-up never became steady
    DRIFT = "drift"  # B0's last value moved from its first beyond the tolerance


class IntervalReason(StrEnum):
    """Why the latency interval gave its verdict (`timing.latency_verdict`'s `reasons`, written as
    `data.interval.reasons`); not reason codes of the vocabulary (docs/protocol.md)."""

    UPPER_AT_OR_BELOW_TARGET = "interval_upper_at_or_below_target"  # supported
    LOWER_ABOVE_TARGET = "interval_lower_above_target"  # failed
    SPANS_TARGET = "interval_spans_target"  # inconclusive
    TOO_FEW_SAMPLES = "too_few_samples"  # inconclusive: no interval at this confidence
    NO_SPREAD = "no_spread"  # inconclusive: the Welch rule on values that do not spread
    # The protocol stopped once no values its remaining instances could measure made the
    # candidate supported, and the values so far do not show `failed` (judging/_latency.py,
    # futility).
    SUPPORTED_OUT_OF_REACH = "supported_out_of_reach"


# The protocol's defaults: the campaign schema's (campaign/schema.py, Protocol) and the
# statistics' own (timing/_stats.py) are these.
DEFAULT_TARGET_RATIO: Final = 0.5  # candidate/B0 latency ratio to reach: a 50% reduction
DEFAULT_CONFIDENCE: Final = 0.95  # one-sided, at each end of the interval
DEFAULT_DECISION_RULE: Final = DecisionRule.RANK
# The rule and confidence both shipped campaigns freeze (fixtures/campaigns/*.yaml, a test holds
# them to these), chosen by `ref2va-accept calibrate` so that every one-attempt cell's exact 95%
# upper bound on false `supported` at the target is at most 5% (docs/protocol.md, calibration);
# `ref2va-accept verdict` defaults to them. The defaults above are a campaign's that names none.
CALIBRATED_DECISION_RULE: Final = DecisionRule.WELCH
CALIBRATED_CONFIDENCE: Final = 0.96


_E = TypeVar("_E", bound=StrEnum)


def enum_member(kind: type[_E], value: str, what: str) -> _E:
    """The member of `kind` that `value` names (a member or its string); anything else raises,
    naming `what`, the value and the allowed values."""
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise ValueError(f"{what}: {value!r} is not in the vocabulary ({allowed})") from None
