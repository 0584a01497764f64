"""The profiling scenario: one steady-state request of an arm under vLLM's torch profiler.

Profiling perturbs what it measures, so it is never part of a timed arm: the scenario (mark
`profile`, tests/profile/) starts an instance of its own with ``--profiler-config`` (the real
server's flag, which also creates ``/start_profile`` and ``/stop_profile``; the reference engine
takes the same), sends the protocol's warm-up requests, then profiles exactly one request between
``/start_profile`` and ``/stop_profile``, and stops the instance. The traces land in the run's
evidence folder (``profiles/<track>/<arm>/traces/``, Chrome traces that Perfetto opens) and their
summary (arms/_trace_summary.py: top operators with shapes, communication, host-device copies,
memory with definitions, ranks) goes into the evidence's ``profiles`` section, with the profiled
request's own figures beside it. Nothing here is judged: a profile is evidence for the next
candidate, and a profile that could not be made is recorded as such (status ``open`` with its
reason).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from ref2va_accept.arms._arms import Arms
from ref2va_accept.arms._trace_summary import find_traces, summarize_traces
from ref2va_accept.planning import device_count

__all__ = ["PROFILER", "expected_ranks", "profile_arm"]

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
        response = httpx.post(base_url + route, json={}, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"{route}: {type(exc).__name__}: {exc}"
    if response.status_code != 200:
        return f"{route}: HTTP {response.status_code} {response.text[:200]}"
    return None


def profile_arm(arms: Arms, arm_id: str, folder: Path) -> dict[str, Any]:
    """Profile one steady-state request of ``arm_id``; returns the evidence entry."""
    plan = arms.plan
    traces = folder / "traces"
    traces.mkdir(parents=True, exist_ok=True)
    config = {**PROFILER, "torch_profiler_dir": str(traces.resolve())}
    entry: dict[str, Any] = {"track": plan.track_id, "arm": arm_id,
                             "profiler_config": {k: v for k, v in config.items()
                                                 if k != "torch_profiler_dir"},
                             "warmups": [], "profiled": None, "problems": []}
    engine = arms.start(arm_id, profiler_config=config)
    entry["instance"] = engine.spec.instance_id
    timeout_s = plan.timeouts.request_s
    ranks = expected_ranks(arms)
    try:
        for index in range(plan.latency.warmups):
            warm = arms.request(engine, arm_id, kind="profile_warmup", index=index)
            entry["warmups"].append(warm.sample.latency_s)
            if not (warm.sample.ok and warm.complete):
                entry["problems"].append(f"warm-up {index + 1} failed: {warm.explain()}")
                break
        else:
            said = _post(engine.base_url, "/start_profile", timeout_s)
            if said is not None:
                entry["problems"].append(said)
            else:
                outcome = arms.request(engine, arm_id, kind="profiled", index=0)
                sample = outcome.sample
                entry["profiled"] = {"sample_id": sample.sample_id,
                                     "ok": bool(sample.ok and outcome.complete),
                                     "latency_s": sample.latency_s,
                                     "server_peak_memory_mb": {
                                         "value": sample.peak_memory_mb,
                                         "definition": SERVER_PEAK}}
                if not entry["profiled"]["ok"]:
                    entry["problems"].append(f"the profiled request failed: {outcome.explain()}")
                said = _post(engine.base_url, "/stop_profile", timeout_s)
                if said is not None:
                    entry["problems"].append(said)
                _wait_for_traces(traces, len(ranks))
    finally:
        arms.registry.stop(engine)
    # Sanitized now as the run's end would (a trace names its host and its own absolute path),
    # so that the hashes recorded below are the published files' hashes.
    arms.evidence.sanitize_now(traces)
    summary = summarize_traces(traces, arms.evidence.folder, ranks)
    problems = entry["problems"] + summary.pop("problems")
    entry.update(summary)
    entry["problems"] = problems
    entry["status"] = "summarized" if summary["status"] == "summarized" and not problems \
        else "open"
    return entry


def _wait_for_traces(folder: Path, ranks: int) -> None:
    """Until every rank's trace (or torch_npu's raw folders) is there, or TRACE_WAIT_S: a real
    server exports after /stop_profile answers."""
    deadline = time.monotonic() + TRACE_WAIT_S
    while time.monotonic() < deadline:
        traces, raw = find_traces(folder)
        if len(traces) >= ranks or raw:
            return
        time.sleep(0.5)
