"""The bring-up's questions: every guess made without the host and every risk found in upstream's
code, each answered by one row.

A row is `confirmed` (the host does what was assumed), `contradicted` (it does not; the value
seen is named), `measured` (there was no value to confirm, only a placeholder: the host's value
goes into the patch) or `not_checked` (why: an earlier step failed, or nothing here can read it).
A row that was not checked never counts as confirmed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ref2va_accept.evidence import BringupRow, RowKind, RowStatus

ROW_STATUSES: tuple[RowStatus, ...] = ("contradicted", "not_checked", "measured", "confirmed")
# A first 15 s request is clear of the server bound with this much headroom left (run-to-run
# spread on the host and a slower first request after a fresh start).
BOUND_HEADROOM = 0.8


@dataclass(frozen=True)
class Question:
    id: str
    kind: RowKind
    question: str  # what was assumed, in one line


# In the order an operator meets them: the host's tools and packages, B0 per memory policy, its
# dumps, its stop, the capture requests, then the Cache-DiT server, the bad input, the long
# request, the warm-up demonstration and scoring.
QUESTIONS: tuple[Question, ...] = (
    Question("identity_lines", "guess",
             "every engine.source_pin field (driver, firmware, CANN, MindIE-SD, the wheel's "
             "sha256, ...) has a line on the host that the preflight reads"),
    Question("mindiesd", "guess",
             "MindIE-SD is installed and imports where the server runs, so the pinned "
             "FLASH_ATTN backend works (installed, the NPU platform imports it at start-up while "
             "it selects the attention backend; absent, FLASH_ATTN fails at the first attention "
             "call)"),
    Question("flags", "guess",
             "every flag the launch profiles use is an option of `vllm serve --omni --help=all`"),
    Question("tp_and_memory_policy", "guess",
             "B0 starts, serves and releases its memory with one of the memory-policy profiles "
             "(compact offload config or the A3 recipe's legacy flag), and the server reports "
             "the profile's text-encoder-tp-size (4 on the 910C)"),
    Question("start_time", "guess",
             "an engine starts (spawn to first healthy answer) in protocol.expected_start_s"),
    Question("dump_owner", "guess",
             "a request with comparison points gets exactly one dump folder, written by the "
             "output owner (rank 0, as enabled_path.json names it), with enabled_path.json"),
    Question("point_shapes", "guess",
             "the comparison points' shapes are the campaign's"),
    Question("point_dtypes", "guess",
             "the comparison points' dtypes are the ones read from the 0.30.0 sources"),
    Question("dump_time", "guess",
             "a completed B0 request with its comparison points fits inside the server's time "
             "bound (VLLM_OMNI_DLO_DP_WAVE_TIMEOUT, VLLM_OMNI_VIDEO_SYNC_TIMEOUT as the server "
             "sees them), the 15 s one included"),
    Question("memory_release", "guess",
             "after a stop, HBM returns to its idle level within devices.memory_release"),
    Question("stop_time", "guess",
             "an engine stops (SIGTERM to gone, device memory back to idle) in "
             "protocol.expected_stop_s (absent: `plan` prices a stop at its bound)"),
    Question("capture_overhead", "guess",
             "a localization pass's capture request (level 1: every DiT block hooked at one "
             "step; level 2: one block's modules, tensors written) costs "
             "protocol.capture_overhead times a plain request (absent: unpriced)"),
    Question("hccl_determinism", "guess",
             "two identical requests on one server give the same bytes (the text encoder's TP "
             "all-reduce is deterministic as configured)"),
    Question("cache_dit_reset", "guess",
             "Cache-DiT's cached steps are reset for every request (two identical requests "
             "that cache steps cache the same ones and give the same bytes)"),
    Question("lossless_no_cache", "guess",
             "the Cache-DiT server, which caches a plain request, installs no cache for a "
             "quality=lossless request"),
    Question("bad_audio_400", "guess",
             "upstream answers a 1 s reference audio with HTTP 400 in H3's words: \"reference "
             "audio 0 duration must be in [2, 15] seconds, got 1.000\""),
    Question("ffprobe_duration", "guess",
             "ffprobe is on the server's PATH (H3 runs it with check=True on every reference "
             "audio) and reads every reference audio's duration as H3 does (the audio stream's, "
             "the container's as a fallback) inside 2-15 s"),
    Question("wave_timeout", "guess",
             "a 15 s B0 request finishes inside the client timeout and the server's bounds, as "
             "the server sees them"),
    Question("warmup_steps", "guess",
             "warm-ups of a few denoising steps (4) leave the first measured request within "
             "steady_fraction of one after full warm-ups, in every duration class (the warm-up "
             "demonstration; where it holds, the patch sets protocol.warmup_steps)"),
    Question("scoring_price", "guess",
             "scoring one output on scoring.device costs scoring.seconds_per_output per gated "
             "dimension (B0's outputs scored once per model; with the shipped stand-ins where "
             "the weight pins are placeholders: the same networks, so the same cost)"),
    Question("live_line", "guess",
             "the live progress line renders on the host's terminal"),
    Question("pythonpath_kept", "risk",
             "the server's PYTHONPATH keeps what the host's environment script put there "
             "(the profile's entries go ahead of it instead of replacing it)"),
    Question("backend_imports", "risk",
             "vllm-ascend (the NPU platform) and MindIE-SD (FLASH_ATTN's kernels, imported at "
             "start-up during backend selection) import in the server, and its first request "
             "succeeds"),
    Question("cache_dit_avg", "risk",
             "Cache-DiT's all_reduce with ReduceOp.AVG works on HCCL: a request that caches at "
             "least one step (past the cache's warm-up) succeeds"),
    Question("stop_order", "risk",
             "stopping in upstream's order (SIGTERM to the main process, a wait, the group, "
             "SIGKILL) ends every process and leaves no HBM held"),
    Question("first_15s_bound", "risk",
             "a fresh host's first 15 s request stays clear of the server's time bound (at "
             f"most {BOUND_HEADROOM:.0%} of it, as the server sees VLLM_OMNI_DLO_DP_WAVE_TIMEOUT "
             "and VLLM_OMNI_VIDEO_SYNC_TIMEOUT)"),
)
QUESTION_IDS = tuple(q.id for q in QUESTIONS)
_BY_ID = {q.id: q for q in QUESTIONS}


def _row(row_id: str, status: RowStatus, seen: str, detail: str, data: dict[str, Any]
         ) -> BringupRow:
    """The evidence's row for one question of the catalogue, with its kind and wording."""
    q = _BY_ID[row_id]
    return BringupRow(id=row_id, kind=q.kind, question=q.question, status=status, seen=seen,
                      detail=detail, data=data)


def confirmed(row_id: str, seen: str, detail: str = "", **data: Any) -> BringupRow:
    return _row(row_id, "confirmed", seen, detail, data)


def contradicted(row_id: str, seen: str, detail: str = "", **data: Any) -> BringupRow:
    return _row(row_id, "contradicted", seen, detail, data)


def measured(row_id: str, seen: str, detail: str = "", **data: Any) -> BringupRow:
    return _row(row_id, "measured", seen, detail, data)


def not_checked(row_id: str, why: str, detail: str = "", **data: Any) -> BringupRow:
    return _row(row_id, "not_checked", why, detail, data)


def complete(rows: dict[str, BringupRow], missing_because: str) -> list[BringupRow]:
    """Every question once, in the catalogue's order; one never answered is not_checked."""
    unknown = set(rows) - set(QUESTION_IDS)
    if unknown:
        raise ValueError(f"bring-up rows for unknown questions: {sorted(unknown)}")
    return [rows.get(q.id) or not_checked(q.id, missing_because) for q in QUESTIONS]
