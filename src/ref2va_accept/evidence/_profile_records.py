"""The evidence's profile records: what one rank's profile says (operators with shapes,
communication, host-device copies, the time split per step, memory), the profiled arm with its
rank coverage, and B0 beside a candidate.

One type per concept, whatever wrote the profile: the reference engine's Chrome traces (torch's
profiler on CPU) and torch_npu's analysed output on the 910C (its text files or its database) are
read into the same :class:`RankProfile` by ``profiles`` (the stage that reads them), so that a
comparison and the report read one shape. A figure the source does not hold is ``None`` with the
reason in the block's ``note``, never a zero.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from pydantic import Field

from ref2va_accept.evidence._base import Number, Record, Sha256

__all__ = [
    "MEMORY_DEFINITIONS",
    "Allocation",
    "ArmComparison",
    "CollectiveOp",
    "CommunicationProfile",
    "CopiesProfile",
    "CopyDirection",
    "FigureDelta",
    "Link",
    "MemoryPeak",
    "OperatorDelta",
    "OperatorTime",
    "OperatorTotal",
    "Profile",
    "ProfileFile",
    "ProfileSource",
    "Profiled",
    "RankCoverage",
    "RankProfile",
    "ServerPeak",
    "StepTime",
]

ProfileSource: TypeAlias = Literal["chrome trace", "torch_npu text", "torch_npu db"]
BlockStatus: TypeAlias = Literal["measured", "not_recorded", "not_applicable"]
MemoryFigureName: TypeAlias = Literal["allocated_peak", "reserved_peak", "active_peak"]

# What each memory figure means, shown beside it in the report and the `profile` command.
MEMORY_DEFINITIONS: dict[str, str] = {
    "allocated_peak": "the largest allocated total the framework's allocator recorded in the "
                      "profiled window: bytes held by live tensors on that device (torch's "
                      "'Total Allocated'; on the 910C torch_npu's memory_record.csv for the "
                      "PTA component). Not the device's whole use: the runtime, the other "
                      "components (GE, APP) and fragmentation are outside it",
    "reserved_peak": "the largest reserved total in the same window: what the caching "
                     "allocator held from the device, allocated or cached for reuse ('Total "
                     "Reserved'; 0 for the CPU allocator, which caches nothing)",
    "active_peak": "the largest active total in the same window: allocated blocks plus blocks "
                   "freed on the host whose stream work has not finished on the device yet "
                   "('Total Active', torch_npu only)",
}


class ProfileFile(Record):
    """A file the profile was read from, as published (relative to the run or the folder read)."""

    file: str
    bytes: int
    sha256: Sha256


class OperatorTime(Record):
    """One operator at one input shape over the profiled window."""

    kind: Literal["device kernel", "framework operator", "host operator"]
    name: str = Field(description="the kernel's operator type (kernel_details 'Type'), the "
                                  "framework operator's name (aten::...), or the host "
                                  "operator's name in a Chrome trace")
    core: str | None = Field(description="the accelerator core the kernels ran on (AI_CORE, "
                                         "AI_VECTOR_CORE, AI_CPU, MIX_AIC, ...); None on CPU")
    input_shapes: str
    input_dtypes: str | None
    output_shapes: str | None
    calls: int
    ms: Number = Field(description="the time the table ranks by: a kernel's device time, a "
                                   "framework operator's device self time, a host operator's "
                                   "self time (its own, less what it called)")
    share: Number | None = Field(description="ms as a fraction of the rank's busy time over "
                                             "the window (device compute, or host operators)")
    kernels: list[str] = Field(description="the kernel names grouped under this row")


class OperatorTotal(Record):
    """One operator over every shape it ran at: the complete table a comparison reads (the top
    list above is cut at its first rows)."""

    kind: Literal["device kernel", "framework operator", "host operator"]
    name: str
    core: str | None
    calls: int
    ms: Number
    shapes: list[str] = Field(description="its input shapes, the costliest first (at most 3)")


class CollectiveOp(Record):
    """One kind of communication operation on one rank, summed over the window."""

    name: str = Field(description="the operation, its per-call suffix removed "
                                  "(hcom_allReduce_, hcom_allGather_, ...)")
    calls: int
    elapse_ms: Number
    transit_ms: Number | None
    wait_ms: Number | None
    synchronization_ms: Number | None


class Link(Record):
    """One link between two ranks over the window (communication_matrix.json)."""

    link: str = Field(description="source rank - destination rank")
    transport: str
    size_mb: Number
    time_ms: Number
    bandwidth_gb_s: Number


class CommunicationProfile(Record):
    status: Literal["measured", "not_recorded", "not_applicable"]
    ms: Number | None = Field(description="the communication operations' time, summed")
    not_overlapped_ms: Number | None = Field(
        description="communication no computation ran beside (the step trace's "
                    "'Communication(Not Overlapped)')")
    share_not_overlapped: Number | None = Field(
        description="not_overlapped_ms as a fraction of the step time")
    ops: list[CollectiveOp]
    slowest_link: Link | None
    note: str | None = None


class CopyDirection(Record):
    direction: Literal["H2D", "D2H", "D2D", "other"]
    count: int
    bytes: int | None = Field(description="None where the source gives no size")
    ms: Number


class CopiesProfile(Record):
    """Host-device copies: what offload costs (weights or activations moved per step)."""

    status: BlockStatus
    directions: list[CopyDirection]
    ms: Number | None
    share: Number | None = Field(description="ms as a fraction of the step time")
    overlapped_ms: Number | None = Field(
        description="the part of the copies' time other device work ran beside")
    note: str | None = None


class StepTime(Record):
    """Where a step's time went on one rank (torch_npu's overlap analysis, or the same
    definitions applied to a Chrome trace's operators)."""

    step: str = Field(description="the profiler's step id; 'window' where no step was marked")
    total_ms: Number
    computing_ms: Number
    communication_not_overlapped_ms: Number
    overlapped_ms: Number
    copies_ms: Number | None
    free_ms: Number


class MemoryPeak(Record):
    figure: MemoryFigureName
    device: str = Field(description="the device, and the component where torch_npu names one")
    bytes: int
    definition: str


class Allocation(Record):
    """One of the largest allocations an operator made (torch_npu's operator_memory.csv)."""

    name: str
    bytes: int
    duration_ms: Number | None


class RankProfile(Record):
    """What one rank's profile says, whatever wrote it (``profiles.read_rank``)."""

    rank: int
    source: ProfileSource
    files: list[ProfileFile]
    steps: list[str]
    window_ms: Number
    operators: int = Field(description="operator or kernel calls in the window")
    top_operators: list[OperatorTime]
    operator_totals: list[OperatorTotal] = Field(
        description="every device kernel type (or host operator) with its time over all shapes")
    framework_operators: list[OperatorTime] = Field(
        description="torch_npu's operator_details: aten operators by device self time")
    communication: CommunicationProfile
    copies: CopiesProfile
    step_times: list[StepTime]
    memory: list[MemoryPeak]
    largest_allocations: list[Allocation]
    problems: list[str] = Field(description="what could not be read: the profile stays open")
    notes: list[str] = Field(description="what was read with a caveat (an unknown column "
                                         "ignored, a figure the source does not hold)")


class RankCoverage(Record):
    rank: int
    status: Literal["profiled", "missing", "unreadable", "not_analysed"]
    steps: list[str]
    note: str | None = None
    analysis_s: Number | None = Field(
        default=None, description="the wall time of torch_npu's offline analysis of this "
                                  "rank, where the judge ran it (a price to plan by)")


class OperatorDelta(Record):
    """One operator in B0 and in the candidate, per rank (the mean over the ranks both have)."""

    name: str
    core: str | None
    b0_ms: Number | None
    candidate_ms: Number | None
    delta_ms: Number
    ratio: Number | None = Field(description="candidate / B0; None where either is absent")
    change: Literal["faster", "slower", "same", "gone", "new"]
    b0_shapes: list[str]
    candidate_shapes: list[str]


class FigureDelta(Record):
    figure: str
    b0: Number | None
    candidate: Number | None
    delta: Number | None


class ArmComparison(Record):
    """B0 beside a candidate of the same track (``profiles.compare``): evidence for the
    candidate's claimed mechanism, never a verdict."""

    baseline: str
    candidate: str
    ranks_compared: list[int]
    basis: str
    step_time: list[FigureDelta]
    operators: list[OperatorDelta]
    communication: list[FigureDelta]
    copies: list[FigureDelta]
    memory: list[FigureDelta]
    notes: list[str]


class ServerPeak(Record):
    value: Number | None
    definition: str


class Profiled(Record):
    sample_id: str
    ok: bool
    latency_s: Number | None
    server_peak_memory_mb: ServerPeak


class Profile(Record):
    """One arm's profile: a steady-state request under the profiler on an instance of its own,
    never timed (arms.profile_arm), or a folder read by ``ref2va-accept profile``."""

    track: str
    arm: str
    profiler_config: dict[str, object]
    warmups: list[Number | None]
    profiled: Profiled | None
    problems: list[str]
    instance: str
    ranks_expected: list[int]
    ranks_found: list[int]
    coverage: list[RankCoverage]
    ranks: list[RankProfile]
    comparison: ArmComparison | None = Field(
        default=None, description="a candidate beside B0's profile of the same track")
    status: Literal["summarized", "open"]
