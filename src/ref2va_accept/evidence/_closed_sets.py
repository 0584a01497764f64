"""The closed sets of values the evidence records spell out, each defined here, once, and
imported by the stages that write them (engine kinds, device kinds, a tensor point's status, a
score's kind and status, identity statuses, bring-up rows, the latency design, the lossy gate's
decisions, a run's status, a capture's divergence)."""

from __future__ import annotations

from typing import Literal, TypeAlias

__all__ = [
    "BaselineInstances",
    "Design",
    "DeviceKind",
    "DivergenceKind",
    "EngineKindName",
    "GateDecision",
    "IdentityStatus",
    "PointStatus",
    "RowKind",
    "RowStatus",
    "RunStatus",
    "ScoreKind",
    "ScoreStatus",
]


# The engine kinds the judge can start: engines.KINDS holds one EngineKind for each, and
# ref2va_contract.launch.ENGINE_KINDS names the same (tests/unit/test_engine_kinds.py).
EngineKindName: TypeAlias = Literal["reference", "vllm-omni"]
# A host's accelerators: none (the CPU stand-in), Ascend NPUs or CUDA GPUs.
DeviceKind: TypeAlias = Literal["none", "npu", "cuda"]
PointStatus: TypeAlias = Literal[  # tensors.Status is this set
    "equal", "differs", "missing_in_a", "missing_in_b", "dtype_mismatch", "shape_mismatch"]
# A score's kind and status (quality's scorers).
ScoreKind: TypeAlias = Literal["vbench", "proxy", "fidelity", "consistency"]
ScoreStatus: TypeAlias = Literal["ok", "open", "error"]
# One source-pin field as the host identity found it.
IdentityStatus: TypeAlias = Literal["match", "DRIFT", "unfilled", "not found"]
# Where a candidate's capture log first parts from B0's (judging.localize's Divergence).
DivergenceKind: TypeAlias = Literal[
    "differs", "inputs_differ", "not_run", "uncovered", "only_in_candidate", "order", "none"]
# A bring-up question's answer, and whether it was a guess or a risk.
RowStatus: TypeAlias = Literal["confirmed", "contradicted", "measured", "not_checked"]
RowKind: TypeAlias = Literal["guess", "risk"]
# The latency protocol's request order, and whether candidates share B0's instances.
Design: TypeAlias = Literal["interleaved", "AB", "ABBA", "ABA"]
BaselineInstances: TypeAlias = Literal["per_candidate", "shared"]
# The lossy gate's decision on one score (judging's WITHIN, BROKEN, OPEN).
GateDecision: TypeAlias = Literal["within", "broken", "open"]
# A run's status: running until it ends, then how it ended (a dead judge's run is "killed").
RunStatus: TypeAlias = Literal["running", "complete", "interrupted", "stopped", "failed_write",
                               "killed"]
