"""The records bringup.json holds about the bring-up's servers: each stop, each memory-policy
profile and the server's time bounds (the schedule, the cost and a scoring price are their own
modules' records)."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from ref2va_accept.evidence import Cleanup, Number, Record, ReleaseRecord

# The server's time bounds: every execute_model RPC (one whole generation, dumps included) and
# the sync route; vLLM-Omni 0.30.0 reads both with float(os.environ.get(NAME, 600.0)) at import.
WAVE_TIMEOUT = "VLLM_OMNI_DLO_DP_WAVE_TIMEOUT"
SYNC_TIMEOUT = "VLLM_OMNI_VIDEO_SYNC_TIMEOUT"
SERVER_BOUNDS = (WAVE_TIMEOUT, SYNC_TIMEOUT)
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


__all__ = ["DEFAULT_BOUND_S", "SERVER_BOUNDS", "SYNC_TIMEOUT", "WAVE_TIMEOUT", "Bound",
           "PolicyRecord", "RequestSummary", "ServerBounds", "StopRecord"]
