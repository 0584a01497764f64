"""The profiling scenario end to end (`pytest tests/profile -m ...`): an arm started with vLLM's
--profiler-config on an instance of its own, warmed up, one request profiled, the traces kept in
the run folder as published and summarized into the evidence and the report. On a 4-step copy of
the reference campaign: nothing here rests on the 50-step output."""

from __future__ import annotations

import json
from pathlib import Path

from ref2va_accept.core import file_sha256
from tests.unit.suite_runner import CHEAP_STEPS, bundle, campaign_variant, only_run, run_pytest


def test_one_steady_request_profiled_apart_from_timing(tmp_path: Path) -> None:
    campaign = campaign_variant(tmp_path / "c", steps=CHEAP_STEPS)
    evidence = tmp_path / "evidence"
    result = run_pytest("tests/profile", "-m", "profile and 5s and lossless", "-k", "baseline",
                        "--campaign", str(campaign), "--evidence-dir", str(evidence),
                        timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
    found, run = bundle(evidence), only_run(evidence)
    (entry,) = found["profiles"]
    assert entry["status"] == "summarized" and entry["problems"] == []
    assert (entry["track"], entry["arm"], entry["ranks_found"]) == ("5s-lossless", "b0", [0])
    # Its own instance, started with the profiler; the protocol's two warm-ups, then one request.
    (instance,) = found["instances"]
    flag = instance["argv"].index("--profiler-config")
    assert json.loads(instance["argv"][flag + 1])["profiler"] == "torch"
    assert instance["cleanup"]["clean"]
    assert sorted(s["kind"] for s in found["samples"]) == ["profile_warmup", "profile_warmup",
                                                           "profiled"]
    assert not any(c["name"] == "latency_ratio" for c in found["checks"])
    # The trace as published: sanitized (no host name) and hashed after that, once.
    (trace,) = entry["traces"]
    path = run / trace["file"]
    assert file_sha256(path) == trace["sha256"] and path.stat().st_size == trace["bytes"]
    text = path.read_text()
    assert '"host_name": "<host>"' in text and str(tmp_path) not in text
    top = trace["summary"]["top_operators"]
    assert top and all(o["self_ms"] >= 0 and o["calls"] >= 1 for o in top)
    assert any(o["name"] == "aten::addmm" and o["input_dims"].startswith("[[") for o in top)
    assert trace["summary"]["host_device_copies"]["status"] == "not_applicable"
    assert {m["figure"] for m in trace["summary"]["memory"]} == {"allocated_peak",
                                                                  "reserved_peak"}
    assert entry["profiled"]["server_peak_memory_mb"]["value"] > 0
    report = (run / "report.html").read_text()
    assert "Profiles (one steady-state request per arm, never timed)" in report
    assert f"href='{trace['file']}'" in report
