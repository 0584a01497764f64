"""The bring-up's questions: every guess made without the host and every risk found in upstream's
code, each answered by one row.

A row is `confirmed` (the host does what was assumed), `contradicted` (it does not; the value
seen is named), `measured` (there was no value to confirm, only a placeholder: the host's value
goes into the patch) or `not_checked` (why: an earlier step failed, or nothing here can read it).
A row that was not checked never counts as confirmed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

RowStatus = Literal["confirmed", "contradicted", "measured", "not_checked"]
ROW_STATUSES: tuple[RowStatus, ...] = ("contradicted", "not_checked", "measured", "confirmed")
Kind = Literal["guess", "risk"]


@dataclass(frozen=True)
class Question:
    id: str
    kind: Kind
    question: str  # what was assumed, in one line


# In the order an operator meets them: the host's tools and packages, B0 per memory policy, its
# dumps, its stop, then the Cache-DiT server, the bad input and the long request.
QUESTIONS: tuple[Question, ...] = (
    Question("identity_lines", "guess",
             "every engine.source_pin field (driver, firmware, CANN, MindIE-SD, the wheel's "
             "sha256, ...) has a line on the host that the preflight reads"),
    Question("mindiesd", "guess",
             "MindIE-SD imports where the server runs, so the pinned FLASH_ATTN backend works"),
    Question("flags", "guess",
             "every flag the launch profiles use is an option of `vllm serve --omni --help=all`"),
    Question("tp_and_memory_policy", "guess",
             "B0 starts and serves with text-encoder-tp-size 4 and one of the memory-policy "
             "profiles (compact offload config or the A3 recipe's legacy flag)"),
    Question("start_time", "guess",
             "an engine starts (spawn to first healthy answer) in protocol.expected_start_s"),
    Question("dump_owner", "guess",
             "a request with comparison points gets exactly one dump folder, written by the "
             "output owner (rank 0), with enabled_path.json"),
    Question("point_shapes", "guess",
             "the comparison points' shapes are the campaign's"),
    Question("point_dtypes", "guess",
             "the comparison points' dtypes are the ones read from the 0.30.0 sources"),
    Question("dump_time", "guess",
             "writing the comparison points fits inside the server's time bound "
             "(VLLM_OMNI_DLO_DP_WAVE_TIMEOUT), also scaled to a 15 s request"),
    Question("memory_release", "guess",
             "after a stop, HBM returns to its idle level within devices.memory_release"),
    Question("hccl_determinism", "guess",
             "two identical requests on one server give the same bytes (the text encoder's TP "
             "all-reduce is deterministic as configured)"),
    Question("cache_dit_reset", "guess",
             "Cache-DiT's cached steps are reset for every request (two identical requests "
             "reuse the same steps)"),
    Question("lossless_no_cache", "guess",
             "the Cache-DiT server installs no cache for a quality=lossless request"),
    Question("bad_audio_400", "guess",
             "upstream answers a reference audio outside 2-15 s with HTTP 400 naming the "
             "duration"),
    Question("ffprobe_duration", "guess",
             "ffprobe reads every reference audio's duration inside H3's 2-15 s"),
    Question("wave_timeout", "guess",
             "a 15 s B0 request finishes inside the client timeout and the server bounds"),
    Question("live_line", "guess",
             "the live progress line renders on the host's terminal"),
    Question("pythonpath_kept", "risk",
             "the server's PYTHONPATH keeps what the host's environment script put there "
             "(the profile's entries go ahead of it instead of replacing it)"),
    Question("backend_imports", "risk",
             "vllm-ascend (the NPU platform) and MindIE-SD (FLASH_ATTN, imported only at the "
             "first request) import in the server, and its first request succeeds"),
    Question("cache_dit_avg", "risk",
             "Cache-DiT's all_reduce with ReduceOp.AVG works on HCCL (the first cached step "
             "succeeds)"),
    Question("stop_order", "risk",
             "stopping in upstream's order (SIGTERM to the main process, a wait, the group, "
             "SIGKILL) ends every process and leaves no HBM held"),
    Question("first_15s_bound", "risk",
             "a fresh host's first 15 s request stays clear of the 3,720 s server bound"),
)
QUESTION_IDS = tuple(q.id for q in QUESTIONS)
_BY_ID = {q.id: q for q in QUESTIONS}


@dataclass(frozen=True)
class Row:
    id: str
    status: RowStatus
    seen: str  # the value seen on the host, or why nothing was seen
    detail: str = ""  # how it was checked, where to look
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def question(self) -> Question:
        return _BY_ID[self.id]

    def line(self) -> str:
        return f"{self.status.upper():<12} {self.id}: {self.seen}"

    def to_dict(self) -> dict[str, Any]:
        q = self.question
        return {"id": self.id, "kind": q.kind, "question": q.question, "status": self.status,
                "seen": self.seen, "detail": self.detail, "data": self.data}


def confirmed(row_id: str, seen: str, detail: str = "", **data: Any) -> Row:
    return Row(row_id, "confirmed", seen, detail, data)


def contradicted(row_id: str, seen: str, detail: str = "", **data: Any) -> Row:
    return Row(row_id, "contradicted", seen, detail, data)


def measured(row_id: str, seen: str, detail: str = "", **data: Any) -> Row:
    return Row(row_id, "measured", seen, detail, data)


def not_checked(row_id: str, why: str, detail: str = "", **data: Any) -> Row:
    return Row(row_id, "not_checked", why, detail, data)


def complete(rows: dict[str, Row], missing_because: str) -> list[Row]:
    """Every question once, in the catalogue's order; one never answered is not_checked."""
    unknown = set(rows) - set(QUESTION_IDS)
    if unknown:
        raise ValueError(f"bring-up rows for unknown questions: {sorted(unknown)}")
    return [rows.get(q.id) or not_checked(q.id, missing_because) for q in QUESTIONS]
