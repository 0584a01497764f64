"""Checks for the tests whose subject is not a check's data (verdicts, gates, stops, reports):
each built as the judge's writers build it (evidence.new_check, validated then), with the
smallest data its name records when the test gives none, and a latency result put into a passed
latency_ratio check's data as judging.judge_latency puts it (`interval`, with its `verdict`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ref2va_accept.core import Check, CheckStatus, Reason, check_name
from ref2va_accept.evidence import AnyCheck, LatencyInterval, new_check

_MEDIA = {"sample_id": "s", "latency_s": None, "sha256": None}
_SPREAD = {"between_instances": None, "within_instance": None, "instances": 0}
# What a latency comparison records before it measures anything (judging.judge_latency).
LATENCY_DATA: dict[str, Any] = {
    "unit": "instance", "design": "interleaved", "instances_per_arm": 3,
    "baseline_instances": "per_candidate", "order_seed": 7, "order_drawn": False,
    "decision_rule": "ratio-interval-moses/1", "sequence": [], "instances": [],
    "warmup_rule": {"min": 2, "max": 4, "steady_fraction": 0.05},
    "b0_spread": _SPREAD, "candidate_spread": _SPREAD}

# The smallest data of each check whose data cannot be empty.
SMALLEST: dict[Check, dict[str, Any]] = {
    Check.B0_MEDIA: _MEDIA,
    Check.CANDIDATE_MEDIA: _MEDIA,
    Check.CLEANUP: {"instance": "i", "stop_s": 0.1},
    Check.TIMED_OUTPUT_FIDELITY: {
        "rule": {"min_psnr_db": 35, "min_psnr_from": "default", "min_ssim": None,
                 "min_audio_snr_db": 30},
        "pairs": []},
    Check.RESOURCE_INTERFERENCE: {"device_kind": "none", "devices": []},
    Check.LATENCY_RATIO: LATENCY_DATA,
    Check.ENGINE_START: {"instance": "i"},
    Check.HOST_IDENTITY: {"rows": []},
    Check.DEVICE_MEMORY_RELEASE: {"instance": "i", "waited_s": 0, "held_mb": {}},
    Check.INPUTS: {"inputs": []},
    Check.SCORER_WEIGHTS: {"weights": [], "stand_ins": [], "undeclared": []},
}


def make_check(track: str, arm: str, name: Check | str, status: CheckStatus | str,
               reason: Reason | str | None = None, detail: str = "",
               data: Mapping[str, Any] | None = None, *,
               latency: LatencyInterval | None = None) -> AnyCheck:
    """A check as new_check builds it; `data` None: the smallest its name records; `latency`:
    the interval's result a passed latency_ratio check carries (in its data)."""
    given = dict(SMALLEST.get(check_name(name), {}) if data is None else data)
    if latency is not None:
        given |= {"verdict": latency.verdict, "interval": latency}
    return new_check(track, arm, name, status, reason, detail, given)
