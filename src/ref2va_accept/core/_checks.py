"""The check vocabulary: every check the judge records and every reason code it may give.

A reason's category decides what it does to a verdict (docs/protocol.md):
- validity: the run is not evaluable -> inconclusive, whatever else happened;
- defect: the candidate is wrong -> failed;
- open: something that should have been decided was not -> inconclusive (verdict-level only);
- decision: the latency interval's own outcome, given once nothing above decided.

A check records only validity and defect reasons (a failed check must say which); open and
decision reasons appear only in a track's verdict. Which checks a track needs before it may be
supported is declared on each check here, so that the gates' names and the verdict's list of
required checks are one list and cannot drift apart. Evidence keeps writing the plain strings.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from ref2va_accept.core._vocabulary import QualityClass, enum_member

_BOTH: tuple[QualityClass, ...] = tuple(QualityClass)
_LOSSLESS: tuple[QualityClass, ...] = (QualityClass.LOSSLESS,)
_LOSSY: tuple[QualityClass, ...] = (QualityClass.LOSSY,)


class Category(StrEnum):
    VALIDITY = "validity"
    DEFECT = "defect"
    OPEN = "open"
    DECISION = "decision"


class Check(StrEnum):
    """A check's name; `required_for` lists the quality classes that need it passed.

    Declaration order is the order in which a verdict lists its open checks.
    """

    required_for: tuple[QualityClass, ...]

    def __new__(cls, value: str, required_for: tuple[QualityClass, ...] = ()) -> Check:
        member = str.__new__(cls, value)
        member._value_ = value
        member.required_for = required_for
        return member

    B0_MEDIA = "b0_media", _BOTH
    CANDIDATE_MEDIA = "candidate_media", _BOTH
    CLEANUP = "cleanup", _BOTH
    BASELINE_DETERMINISM = "baseline_determinism", _LOSSLESS
    LOSSLESS_GATE = "lossless_gate", _LOSSLESS
    ENABLED_PATH_AUDIT = "enabled_path_audit", _LOSSLESS
    UNOBSERVED_OUTPUT = "unobserved_output", _LOSSLESS
    TIMED_OUTPUT = "timed_output", _LOSSLESS
    BASELINE_VARIABILITY = "baseline_variability", _LOSSY
    LOSSY_GATE = "lossy_gate", _LOSSY
    TIMED_OUTPUT_FIDELITY = "timed_output_fidelity", _LOSSY
    RESOURCE_INTERFERENCE = "resource_interference", _BOTH
    LATENCY_RATIO = "latency_ratio", _BOTH
    # Recorded when they run; a failure counts, but a track does not wait for them.
    CACHING_PROBE = "caching_probe"
    ENGINE_START = "engine_start"
    HOST_IDENTITY = "host_identity"
    DEVICE_MEMORY_RELEASE = "device_memory_release"
    # A track's input file is missing or not its pinned bytes (the run stops before any engine).
    INPUTS = "inputs"
    # What an arm's enabled_path.json says of declared device time (a non-zero cost model).
    DECLARED_TIME = "declared_time"
    # The host's one-off measurement that a cheaper warm-up is as good as a full one.
    WARMUP_DEMONSTRATION = "warmup_demonstration"
    # Which weights files made an arm's model-based scores in a lossy gate, stand-ins named.
    SCORER_WEIGHTS = "scorer_weights"
    # Where a lossless candidate that is not bit-exact first parts from B0, module by module
    # (localize/): passed when the pass named the place, open when it could not run or finish.
    LOCALIZATION = "localization"


class Reason(StrEnum):
    """A reason code and its category (what it makes of a verdict)."""

    category: Category

    def __new__(cls, value: str, category: Category) -> Reason:
        member = str.__new__(cls, value)
        member._value_ = value
        member.category = category
        return member

    # validity: the run is not evaluable
    RESOURCE_INTERFERENCE = "resource_interference", Category.VALIDITY
    BASELINE_REQUEST_FAILED = "baseline_request_failed", Category.VALIDITY
    BASELINE_INVALID_MEDIA = "baseline_invalid_media", Category.VALIDITY
    DRIFT = "drift", Category.VALIDITY
    # An instance's warm-ups never had two in a row within the frozen steady fraction.
    WARMUP_NOT_STEADY = "warmup_not_steady", Category.VALIDITY
    INCOMPLETE_CLEANUP = "incomplete_cleanup", Category.VALIDITY
    PROTOCOL_DEVIATION = "protocol_deviation", Category.VALIDITY
    PROTOCOL_NOT_FROZEN = "protocol_not_frozen", Category.VALIDITY
    BASELINE_NONDETERMINISTIC = "baseline_nondeterministic", Category.VALIDITY
    BASELINE_CONTRACT = "baseline_contract", Category.VALIDITY
    BASELINE_VARIABILITY_TOO_HIGH = "baseline_variability_too_high", Category.VALIDITY
    ENGINE_START_FAILED = "engine_start_failed", Category.VALIDITY
    # An instance's device memory (HBM) did not return to its idle level before the next start.
    DEVICE_MEMORY_NOT_RELEASED = "device_memory_not_released", Category.VALIDITY
    # The server answering on an instance's port was not that instance (another process owns the
    # listening socket, or the reference engine's nonce did not come back): nothing was judged.
    FOREIGN_SERVER = "foreign_server", Category.VALIDITY
    # The engine slept a declared device time (a campaign that allows it, or an arm whose
    # enabled_path.json reports a non-zero cost model): its latencies are no measurement.
    DECLARED_DEVICE_TIME = "declared_device_time", Category.VALIDITY
    # A lossy gate's scores came from seeded stand-in weights (recognised by their bytes) that
    # the campaign does not declare: they are not VBench's scores and decide nothing.
    UNDECLARED_STAND_IN_WEIGHTS = "undeclared_stand_in_weights", Category.VALIDITY
    # defect: the candidate is wrong
    CANDIDATE_REQUEST_FAILED = "candidate_request_failed", Category.DEFECT
    INVALID_MEDIA = "invalid_media", Category.DEFECT
    QUALITY_GATE_FAILED = "quality_gate_failed", Category.DEFECT
    ENABLED_PATH_MISMATCH = "enabled_path_mismatch", Category.DEFECT
    CACHING_SUSPECTED = "caching_suspected", Category.DEFECT
    COMPARISON_POINT_MISSING = "comparison_point_missing", Category.DEFECT
    OUTPUT_DIFFERS_WHEN_UNOBSERVED = "output_differs_when_unobserved", Category.DEFECT
    QUALITY_PRECONDITION_FAILED = "quality_precondition_failed", Category.DEFECT
    # open (verdicts only): a required check did not run, or there is nothing to judge
    OPEN_CHECKS = "open_checks", Category.OPEN
    NO_CANDIDATE = "no_candidate", Category.OPEN
    # decision (verdicts only): the latency interval's outcome
    LATENCY_SUPPORTED = "latency_supported", Category.DECISION
    LATENCY_FAILED = "latency_failed", Category.DECISION
    LATENCY_INCONCLUSIVE = "latency_inconclusive", Category.DECISION
    # The protocol stopped once no values its remaining instances could measure made the
    # candidate supported, and the values so far do not show `failed` (judging/_latency.py,
    # futility).
    LATENCY_OUT_OF_REACH = "latency_out_of_reach", Category.DECISION


CHECK_REASON_CATEGORIES = frozenset({Category.VALIDITY, Category.DEFECT})


def check_name(value: str | Check) -> Check:
    """The Check a string names; anything else raises, naming it and the allowed names."""
    return enum_member(Check, value, "check name")


def reason_code(value: str | Reason) -> Reason:
    """The Reason a string names; anything else raises, naming it and the allowed codes."""
    return enum_member(Reason, value, "reason")


def required_checks(quality_class: QualityClass | str) -> tuple[Check, ...]:
    """What a candidate must have passed, per quality class, before its track can be supported.

    Derived from the vocabulary; a gate not yet run leaves its check open.
    """
    if quality_class not in _BOTH:
        raise ValueError(f"quality class: {quality_class!r} is not one of {', '.join(_BOTH)}")
    return tuple(c for c in Check if quality_class in c.required_for)


def reasons_of(category: Category) -> frozenset[Reason]:
    return frozenset(r for r in Reason if r.category is category)


def names(members: Iterable[StrEnum]) -> list[str]:
    """Plain strings, as the evidence writes them."""
    return [m.value for m in members]
