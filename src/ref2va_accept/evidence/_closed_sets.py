"""The closed sets of values the evidence records spell out, each the same set as the module
that writes it defines (tests/unit/test_records.py holds each equal to its source).

They are spelt out here rather than imported: importing their writers would pull the scoring
stack into every reader of the evidence.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

__all__ = [
    "BaselineInstances",
    "Design",
    "DeviceKind",
    "EngineKind",
    "GateDecision",
    "IdentityStatus",
    "PartingKind",
    "PointStatus",
    "RowKind",
    "RowStatus",
    "RunStatus",
    "ScoreKind",
    "ScoreStatus",
]


EngineKind: TypeAlias = Literal["reference", "vllm-omni"]  # engines.EngineKindName
DeviceKind: TypeAlias = Literal["none", "npu", "cuda"]  # campaign.schema Devices.kind
PointStatus: TypeAlias = Literal[  # tensors.Status is this set
    "equal", "differs", "missing_in_a", "missing_in_b", "dtype_mismatch", "shape_mismatch"]
ScoreKind: TypeAlias = Literal["vbench", "proxy", "fidelity", "consistency"]  # quality's, its own
ScoreStatus: TypeAlias = Literal["ok", "open", "error"]  # quality's, its own
# campaign.identity._pin
IdentityStatus: TypeAlias = Literal["match", "DRIFT", "unfilled", "not found"]
PartingKind: TypeAlias = Literal[  # judging.localize._capture.Kind
    "differs", "inputs_differ", "not_run", "uncovered", "only_in_candidate", "order", "none"]
RowStatus: TypeAlias = Literal["confirmed", "contradicted", "measured", "not_checked"]
RowKind: TypeAlias = Literal["guess", "risk"]  # bringup.rows.Kind
Design: TypeAlias = Literal["interleaved", "AB", "ABBA", "ABA"]  # LatencySettings.ordering
BaselineInstances: TypeAlias = Literal["per_candidate", "shared"]
GateDecision: TypeAlias = Literal["within", "broken", "open"]  # judging.WITHIN, BROKEN, OPEN
RunStatus: TypeAlias = Literal["running", "complete", "interrupted", "stopped", "failed_write",
                               "killed"]
