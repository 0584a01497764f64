"""What a bring-up's bringup.json holds, typed: `BringupData`, which the steps fill in as they go
(what a bring-up that stopped early did not reach is left out), and the records of its fields
(the schedule, the cost and a scoring price are their own modules' records)."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from ref2va_accept.bringup._cost import BringupCost
from ref2va_accept.bringup._scoring import ScoringPrice
from ref2va_accept.bringup._step_schedule import BringupSchedule
from ref2va_accept.evidence import (
    BringupRow,
    Cleanup,
    HostIdentity,
    IdleLevel,
    Number,
    Record,
    ReleaseRecord,
    WarmupDemonstrationCheck,
)

# The server's time bounds: every execute_model RPC (one whole generation, dumps included) and
# the sync route; vLLM-Omni 0.30.0 reads both with float(os.environ.get(NAME, 600.0)) at import.
WAVE_TIMEOUT = "VLLM_OMNI_DLO_DP_WAVE_TIMEOUT"
SYNC_TIMEOUT = "VLLM_OMNI_VIDEO_SYNC_TIMEOUT"
DEFAULT_BOUND_S = 600.0  # both bounds' default in vLLM-Omni 0.30.0


# -- the servers ----------------------------------------------------------------------------------

class StopRecord(Record):
    """One engine the bring-up stopped: its audit (the evidence's `audit` payload) and the wait
    for its device memory (None without an accelerator)."""

    audit: Cleanup
    release: ReleaseRecord | None
    what: str | None = None  # which server: a memory-policy profile, Cache-DiT, a demonstration

    @property
    def seconds(self) -> float:
        """What the stop took: SIGTERM to gone, then device memory back to idle."""
        return float(self.audit.stop_s) + (float(self.release.waited_s) if self.release else 0.0)


class RequestSummary(Record):
    """A memory-policy profile's request, as bringup.json records it (PolicyRun.record)."""

    ok: bool
    complete: bool
    latency_s: Number | None
    sha256: str | None
    explain: str
    sample_id: str


class PolicyRecord(Record):
    """One B0 memory-policy profile as bringup.json records it (PolicyRun.record): what the
    page shows."""

    profile: str
    started: bool
    start_s: Number | None
    start_error: str | None
    hbm_loaded_mb: dict[str, Number] | None
    hbm_problem: str | None
    request: RequestSummary | None
    enabled_path: dict[str, Any] | None  # the engine's own enabled_path.json, as it wrote it
    dump_folders: int
    text_encoder_tp: dict[str, int | None]  # the profile's text-encoder-tp-size; the server's
    stop: Cleanup | None
    release: ReleaseRecord | None


class Bound(Record):
    """One server time bound as the server sees it (`read` builds it): its value as set (None:
    unset, upstream's default applies), in seconds (None: not a number, the server would not
    start), and where it comes from."""

    model_config = ConfigDict(frozen=True)

    value: str | None
    seconds: Number | None
    source: str

    @classmethod
    def read(cls, value: str | None, source: str) -> Bound:
        seconds: float | None = DEFAULT_BOUND_S
        if value is not None:
            try:
                seconds = float(value)
            except ValueError:
                seconds = None
        return cls(value=value, seconds=seconds, source=source)

    def describe(self, name: str) -> str:
        if self.value is None:
            return f"{name} unset: upstream's default"
        return f"{name}={self.value}, from {self.source}"


class ServerBounds(Record):
    """The server's time bounds for one B0 server, keyed in bringup.json by the variables that
    set them (BringupState.server_bounds builds it)."""

    model_config = ConfigDict(frozen=True)

    wave: Bound = Field(validation_alias=WAVE_TIMEOUT, serialization_alias=WAVE_TIMEOUT)
    sync: Bound = Field(validation_alias=SYNC_TIMEOUT, serialization_alias=SYNC_TIMEOUT)

    def named(self) -> tuple[tuple[str, Bound], ...]:
        return (WAVE_TIMEOUT, self.wave), (SYNC_TIMEOUT, self.sync)

    def _tightest(self) -> tuple[str, Bound] | None:
        if any(b.seconds is None for _, b in self.named()):
            return None
        return min(self.named(), key=lambda named: named[1].seconds or 0.0)

    @property
    def tightest(self) -> Bound | None:
        """The bound that cuts first; None when one of them is not a number."""
        found = self._tightest()
        return None if found is None else found[1]

    def line(self) -> str:
        """`the 3720 s server bound (NAME=3720 (where))`, or why no bound was read."""
        found = self._tightest()
        if found is None:
            return "no server bound read: " + "; ".join(
                f"{b.describe(name)} is not a number of seconds" for name, b in self.named()
                if b.seconds is None)
        name, bound = found
        return f"the {bound.seconds:g} s server bound ({bound.describe(name)})"


# -- what the steps saw ---------------------------------------------------------------------------

class PreflightError(Record):
    """An identity preflight that could not run: a tool the pin needs is missing."""

    model_config = ConfigDict(frozen=True)

    error: str


class Flags(Record):
    """The profiles' flags against `vllm serve --omni --help=all`."""

    model_config = ConfigDict(frozen=True)

    used: dict[str, list[str]]  # each flag a profile sets: the profiles that set it
    missing: list[str]  # those the help does not list


class InputReading(Record):
    """A reference audio's duration as ffprobe reads it on the server's PATH, and as the judge
    decodes it."""

    model_config = ConfigDict(frozen=True)

    file: str  # as the campaign pins it
    ffprobe_s: Number | None
    read_from: str | None  # "stream" (the audio stream's), "format" (the container's fallback)
    decoded_s: Number | None
    problem: str


class BadAudio(Record):
    """The answer to a too-short reference audio."""

    model_config = ConfigDict(frozen=True)

    status: int | None
    wording: str  # the answer's detail, its first 300 characters
    failure: str | None


class LongRequest(Record):
    """The untimed 15 s request on the first B0 server that served."""

    model_config = ConfigDict(frozen=True)

    track: str
    ok: bool
    complete: bool
    latency_s: Number | None
    explain: str
    client_timeout_s: Number
    server_bounds: ServerBounds


class CacheUse(Record):
    """What enabled_path.json says the cache did ("unknown" backend: it says nothing)."""

    model_config = ConfigDict(frozen=True)

    backend: str
    reused_steps: list[Any]


class CacheRequest(Record):
    """One request to the Cache-DiT server."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    sha256: str | None
    explain: str
    cache: CacheUse


class CacheDit(Record):
    """The Cache-DiT server as its step goes: its stop, the wait for device memory after it
    (with an accelerator) and its requests (by name: first, second, lossless)."""

    model_config = ConfigDict(validate_assignment=True)

    stop: Cleanup | None = None
    release: ReleaseRecord | None = None
    requests: dict[str, CacheRequest] | None = None


class StopPrice(Record):
    """What one stop took (StopRecord.seconds, to the millisecond)."""

    model_config = ConfigDict(frozen=True)

    what: str | None
    seconds: Number


class Prices(Record):
    """What the bring-up measured for `plan`'s prices (_pricing.py)."""

    model_config = ConfigDict(frozen=True)

    stops: list[StopPrice]
    capture: dict[str, Number]  # per level: its request over a plain one, to 4 places
    capture_problems: dict[str, str]
    warmup_demonstration: dict[str, WarmupDemonstrationCheck | str]  # its check, or why none
    scoring: list[ScoringPrice]
    scoring_missing: dict[str, str]  # per duration class: why it has no scoring price


class PatchSummary(Record):
    """The campaign patch: its file (None: nothing to change), where it applies, what it
    changes and what it could not."""

    model_config = ConfigDict(frozen=True)

    file: str | None
    apply_in: str
    changes: list[str]
    skipped: list[str]


class BringupData(Record):
    """Everything bringup.json holds: filled in by the bring-up as it goes (run_bringup, each
    step, the judgements, _finish and the page), each field where it is learnt; one it did not
    reach (it stopped early) is left out of the file."""

    model_config = ConfigDict(validate_assignment=True)

    # what the bring-up is and does (run_bringup)
    campaign: str | None = None  # the campaign file's name
    run_id: str | None = None
    questions: int | None = None  # how many questions its rows answer
    plan: str | None = None  # its cost line, as `plan` prints it
    schedule: BringupSchedule | None = None
    cost: BringupCost | None = None
    # what its steps saw, in order
    preflight: HostIdentity | PreflightError | None = None
    flags: Flags | None = None
    inputs: list[InputReading] | None = None
    idle: IdleLevel | None = None
    policies: list[PolicyRecord] | None = None
    stops: list[StopRecord] | None = None
    bad_audio: BadAudio | None = None
    long_request: LongRequest | None = None
    cache_dit: CacheDit | None = None
    prices: Prices | None = None
    # how it ended (_finish, the page)
    elapsed_s: Number | None = None
    failure: str | None = None  # where and why it stopped before finishing (None: it finished)
    finished: bool | None = None
    exit_code: int | None = None
    counts: dict[str, int] | None = None  # rows per status
    rows: list[BringupRow] | None = None
    patch: PatchSummary | None = None  # None: no patch was made (`patch_error` says why)
    patch_error: str | None = None


__all__ = ["DEFAULT_BOUND_S", "BadAudio", "Bound", "BringupData", "CacheDit",
           "CacheRequest", "CacheUse", "Flags", "InputReading", "LongRequest", "PatchSummary",
           "PolicyRecord", "PreflightError", "Prices", "RequestSummary", "ServerBounds",
           "StopPrice", "StopRecord"]
