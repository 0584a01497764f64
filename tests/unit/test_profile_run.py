"""The profiling scenario end to end (`pytest tests/profile -m ...`): an arm started with vLLM's
--profiler-config on an instance of its own, warmed up, one request profiled, the traces kept in
the run folder as published and summarized into the evidence and the report. On a 4-step copy of
the reference campaign: nothing here rests on the 50-step output."""

from __future__ import annotations

import json
from pathlib import Path

from ref2va_accept.core import file_sha256
from tests.unit.plugin_sessions import run_in_checkout
from tests.unit.suite_runner import CHEAP_STEPS, bundle, campaign_variant, only_run


def test_one_steady_request_profiled_apart_from_timing(tmp_path: Path) -> None:
    campaign = campaign_variant(tmp_path / "c", steps=CHEAP_STEPS)
    evidence = tmp_path / "evidence"
    result = run_in_checkout("tests/profile", "-m", "profile and 5s and lossless", "-k",
                             "baseline or lossless-text-kv", "--campaign", str(campaign),
                             "--evidence-dir", str(evidence))
    assert result.returncode == 0, result.stdout[-3000:]
    found, run = bundle(evidence), only_run(evidence)
    entry, candidate = found["profiles"]
    assert entry["status"] == "summarized" and entry["problems"] == []
    assert (entry["track"], entry["arm"], entry["ranks_found"]) == ("5s-lossless", "b0", [0])
    assert entry["coverage"] == [{"rank": 0, "status": "profiled", "steps": ["window"],
                                  "note": None}]
    # Its own instance, started with the profiler; the protocol's two warm-ups, then one request.
    instance = next(i for i in found["instances"] if i["arm"] == "b0")
    flag = instance["argv"].index("--profiler-config")
    assert json.loads(instance["argv"][flag + 1])["profiler"] == "torch"
    assert instance["cleanup"]["clean"]
    assert sorted(s["kind"] for s in found["samples"] if s["arm"] == "b0") == [
        "profile_warmup", "profile_warmup", "profiled"]
    assert not any(c["name"] == "latency_ratio" for c in found["checks"])
    # The trace as published: sanitized (no host name) and hashed after that, once.
    (rank,) = entry["ranks"]
    (trace,) = rank["files"]
    path = run / trace["file"]
    assert file_sha256(path) == trace["sha256"] and path.stat().st_size == trace["bytes"]
    text = path.read_text()
    assert '"host_name": "<host>"' in text and str(tmp_path) not in text
    assert rank["source"] == "chrome trace"
    top = rank["top_operators"]
    assert top and all(o["ms"] >= 0 and o["calls"] >= 1 for o in top)
    assert any(o["name"] == "aten::addmm" and o["input_shapes"].startswith("[[") for o in top)
    assert rank["copies"]["status"] == "not_applicable"
    (step,) = rank["step_times"]
    assert step["computing_ms"] > 0 and step["total_ms"] >= step["computing_ms"]
    assert {m["figure"] for m in rank["memory"]} == {"allocated_peak", "reserved_peak"}
    assert entry["profiled"]["server_peak_memory_mb"]["value"] > 0
    # The candidate beside B0: the same operators, per rank, with their difference.
    assert candidate["arm"] == "lossless-text-kv" and candidate["status"] == "summarized"
    comparison = candidate["comparison"]
    assert comparison["ranks_compared"] == [0] and comparison["baseline"] == "b0"
    assert any(o["name"] == "aten::addmm" for o in comparison["operators"])
    assert "comparison" not in entry
    report = (run / "report.html").read_text()
    assert "Profiles (one steady-state request per arm, never timed)" in report
    assert f"href='{trace['file']}'" in report
    assert "lossless-text-kv beside b0" in report and "<svg class='ref2va-step-bars'" in report
