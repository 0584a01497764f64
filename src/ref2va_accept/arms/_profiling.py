"""The profiling scenario: one steady-state request of an arm under vLLM's torch profiler.

Profiling perturbs what it measures, so it is never part of a timed arm: the scenario (mark
`profile`, tests/profile/) starts an instance of its own with ``--profiler-config`` (the real
server's flag, which also creates ``/start_profile`` and ``/stop_profile``; the reference engine
takes the same), sends the protocol's warm-up requests, then profiles exactly one request between
``/start_profile`` and ``/stop_profile``, and stops the instance. The traces land in the run's
evidence folder (``profiles/<track>/<arm>/traces/``, Chrome traces that Perfetto opens) and their
reading (the ``profiles`` stage: per rank the top operators with shapes, communication, host-device
copies, the step's split, memory with definitions; which ranks profiled which steps) goes into the
evidence's ``profiles`` section, with the profiled request's own figures beside it. On the 910C
torch_npu writes ``*_ascend_pt`` folders instead of Chrome traces; they are analysed here where
torch_npu imports, and read the same way. A candidate's profile is set beside B0's of the same
track when B0's is in the run (``with_comparison``). Nothing here is judged: a profile is evidence
for the next candidate, and a profile that could not be made is recorded as such (status ``open``
with its reason).
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from ref2va_accept.arms._arms import Arms
from ref2va_accept.core import tls_context
from ref2va_accept.evidence import Profile, Profiled, ServerPeak
from ref2va_accept.planning import device_count
from ref2va_accept.profiles import compare, find_profiles, read_profiles

__all__ = ["PROFILER", "expected_ranks", "profile_arm", "with_comparison"]

# vLLM's ProfilerConfig: the torch profiler, shapes and memory recorded, no Python stacks (they
# multiply the trace's size and carry the host's paths), uncompressed so the judge reads it at once.
PROFILER = {"profiler": "torch", "torch_profiler_record_shapes": True,
            "torch_profiler_with_memory": True, "torch_profiler_with_stack": False,
            "torch_profiler_use_gzip": False}
SERVER_PEAK = ("the engine's X-Peak-Memory-MB for the profiled request: on vLLM-Omni the "
               "device allocator's peak during the request, on the reference engine the "
               "process's resident set peak (MB)")
TRACE_WAIT_S = 120.0


def expected_ranks(arms: Arms) -> list[int]:
    """One trace per worker: a rank per logical device an instance holds, or rank 0 without."""
    return list(range(device_count(arms.campaign))) or [0]


def _post(base_url: str, route: str, timeout_s: float) -> str | None:
    """None when the server answered 200, else what went wrong (one line)."""
    try:
        response = httpx.post(base_url + route, json={}, timeout=timeout_s,
                              verify=tls_context())
    except httpx.HTTPError as exc:
        return f"{route}: {type(exc).__name__}: {exc}"
    if response.status_code != 200:
        return f"{route}: HTTP {response.status_code} {response.text[:200]}"
    return None


def profile_arm(arms: Arms, arm_id: str, folder: Path) -> Profile:
    """Profile one steady-state request of ``arm_id``; returns the evidence entry."""
    plan = arms.plan
    traces = folder / "traces"
    traces.mkdir(parents=True, exist_ok=True)
    config = {**PROFILER, "torch_profiler_dir": str(traces.resolve())}
    warmups: list[float | None] = []
    problems: list[str] = []
    profiled: Profiled | None = None
    engine = arms.start(arm_id, profiler_config=config)
    timeout_s = plan.timeouts.request_s
    ranks = expected_ranks(arms)
    try:
        for index in range(plan.latency.warmups):
            warm = arms.request(engine, arm_id, kind="profile_warmup", index=index)
            warmups.append(warm.sample.latency_s)
            if not (warm.sample.ok and warm.complete):
                problems.append(f"warm-up {index + 1} failed: {warm.explain()}")
                break
        else:
            said = _post(engine.base_url, "/start_profile", timeout_s)
            if said is not None:
                problems.append(said)
            else:
                outcome = arms.request(engine, arm_id, kind="profiled", index=0)
                sample = outcome.sample
                profiled = Profiled(sample_id=sample.sample_id,
                                    ok=bool(sample.ok and outcome.complete),
                                    latency_s=sample.latency_s,
                                    server_peak_memory_mb=ServerPeak(value=sample.peak_memory_mb,
                                                                     definition=SERVER_PEAK))
                if not profiled.ok:
                    problems.append(f"the profiled request failed: {outcome.explain()}")
                said = _post(engine.base_url, "/stop_profile", timeout_s)
                if said is not None:
                    problems.append(said)
                _wait_for_traces(traces, len(ranks))
    finally:
        arms.registry.stop(engine)
    # Sanitized now as the run's end would (a trace names its host and its own absolute path),
    # so that the hashes recorded below are the published files' hashes.
    arms.evidence.sanitize_now(traces)
    return read_profiles(traces, arms.evidence.folder, ranks).profile(
        track=plan.track_id, arm=arm_id, expected=ranks, instance=engine.spec.instance_id,
        problems=problems, warmups=warmups, profiled=profiled,
        profiler_config={k: v for k, v in config.items() if k != "torch_profiler_dir"})


def with_comparison(entry: Profile, earlier: list[Profile]) -> Profile:
    """A candidate's entry with B0's profile of the same track beside it, where the run has
    one; B0's own entry, or a candidate without B0's profile, unchanged."""
    b0 = next((p for p in earlier if p.track == entry.track and p.arm == "b0" and p.ranks),
              None)
    if entry.arm == "b0" or b0 is None or not entry.ranks:
        return entry
    return entry.model_copy(update={"comparison": compare(b0, entry)})


def _wait_for_traces(folder: Path, ranks: int) -> None:
    """Until every rank's profile (a trace, or torch_npu's folder with its rank) is there, or
    TRACE_WAIT_S: a real server exports after /stop_profile answers."""
    deadline = time.monotonic() + TRACE_WAIT_S
    while time.monotonic() < deadline:
        found, _ = find_profiles(folder)
        if len({item.rank for item in found}) >= ranks:
            return
        time.sleep(0.5)
