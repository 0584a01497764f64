"""Per-track verdicts from the checks that ran, in the documented order (protocol.md).

1. The run is not evaluable -> inconclusive (validity reasons).
2. The candidate is defective -> failed.
3. A required check did not run -> inconclusive, with the check listed as open.
4. Otherwise the latency interval decides (its check carries supported/failed/inconclusive).

A check that did not run is open, never a pass; a track with an open check is never supported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

CheckStatus = Literal["pass", "fail", "open"]
Verdict = Literal["supported", "failed", "inconclusive"]

# Reason codes that make a run not evaluable (inconclusive) rather than the candidate wrong.
VALIDITY_REASONS = frozenset({
    "resource_interference",
    "baseline_request_failed",
    "baseline_invalid_media",
    "drift",
    "incomplete_cleanup",
    "protocol_deviation",
    "protocol_not_frozen",
    "baseline_nondeterministic",
    "baseline_contract",
    "baseline_variability_too_high",
    "engine_start_failed",
    # An instance's device memory (HBM) did not return to its idle level before the next start.
    "device_memory_not_released",
})
# Reason codes that are the candidate's own defect (failed).
CANDIDATE_DEFECTS = frozenset({
    "candidate_request_failed",
    "invalid_media",
    "quality_gate_failed",
    "enabled_path_mismatch",
    "caching_suspected",
    "comparison_point_missing",
    "output_differs_when_unobserved",
    "quality_precondition_failed",
})


@dataclass(frozen=True)
class CheckResult:
    """One check of one arm in one track, as the evidence records it."""

    track: str
    arm: str
    name: str
    status: CheckStatus
    reason: str | None = None
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "track": self.track, "arm": self.arm, "name": self.name, "status": self.status,
            "reason": self.reason, "detail": self.detail, "data": self.data,
        }


@dataclass(frozen=True)
class GateChecks:
    """A baseline's checks, shared by its track's candidates: usable only when all passed."""

    checks: tuple[CheckResult, ...]

    @property
    def usable(self) -> bool:
        return all(check.status == "pass" for check in self.checks)

    def explain(self) -> str:
        return "; ".join(c.detail for c in self.checks if c.status != "pass")


@dataclass(frozen=True)
class TrackVerdict:
    track: str
    candidate: str | None
    verdict: Verdict
    reasons: tuple[str, ...]
    open_checks: tuple[str, ...]
    checks: dict[str, CheckStatus]
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "track": self.track, "candidate": self.candidate, "verdict": self.verdict,
            "reasons": list(self.reasons), "open_checks": list(self.open_checks),
            "checks": dict(self.checks), "note": self.note,
        }


# What a candidate must have passed, per quality class, before its track can be supported.
# Gates built by later issues are listed already: until they run they stay open.
REQUIRED_CHECKS: dict[str, tuple[str, ...]] = {
    "lossless": ("b0_media", "candidate_media", "cleanup", "baseline_determinism",
                 "lossless_gate", "enabled_path_audit", "unobserved_output", "timed_output",
                 "resource_interference", "latency_ratio"),
    "lossy": ("b0_media", "candidate_media", "cleanup", "baseline_variability", "lossy_gate",
              "resource_interference", "latency_ratio"),
}


def _dedupe(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def judge(
    track: str,
    quality_class: str,
    candidate: str | None,
    checks: Sequence[CheckResult],
    cap_reason: str | None = None,
) -> TrackVerdict:
    """The verdict of one candidate in one track from every check recorded for the track.

    Checks of the baseline arm ("b0") count for every candidate; a candidate's own checks only for
    itself. `cap_reason` (an unfrozen or drifted protocol) caps the verdict at inconclusive.
    """
    relevant = [c for c in checks if c.track == track and c.arm in ("b0", candidate)]
    summary: dict[str, CheckStatus] = {}
    for check in relevant:
        key = check.name
        # One failing instance of a check fails it; pass only when every instance passed.
        if summary.get(key) == "fail":
            continue
        if check.status == "fail" or summary.get(key) is None or check.status == "open":
            summary[key] = check.status
    failed = [c for c in relevant if c.status == "fail"]
    validity = [c.reason or c.name for c in failed if (c.reason or "") in VALIDITY_REASONS]
    if cap_reason:
        validity.append(cap_reason)
    defects = [c.reason or c.name for c in failed if c.reason not in VALIDITY_REASONS]
    required = REQUIRED_CHECKS[quality_class]
    open_checks = _dedupe(
        [name for name in required if summary.get(name, "open") == "open"]
        + [c.name for c in relevant if c.status == "open"]
    )
    if candidate is None:
        reasons = _dedupe([*validity, *defects, "no_candidate"])
        return TrackVerdict(track, None, "inconclusive", reasons, open_checks, summary,
                            "the campaign names no candidate for this track: nothing to judge")
    if validity:
        return TrackVerdict(track, candidate, "inconclusive", _dedupe([*validity, *defects]),
                            open_checks, summary)
    if defects:
        return TrackVerdict(track, candidate, "failed", _dedupe(defects), open_checks, summary)
    if open_checks:
        return TrackVerdict(track, candidate, "inconclusive", ("open_checks",), open_checks,
                            summary)
    latency = [c for c in relevant if c.name == "latency_ratio" and c.arm == candidate]
    verdict: Verdict = "inconclusive"
    if latency and latency[-1].data.get("verdict") in ("supported", "failed"):
        verdict = latency[-1].data["verdict"]
    return TrackVerdict(track, candidate, verdict, (f"latency_{verdict}",), (), summary)
