"""Faults through the whole latency protocol: the right verdict and reason, nothing left behind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ref2va_accept.campaign import freeze
from tests.unit.plugin_sessions import run_in_checkout
from tests.unit.suite_runner import (
    CHEAP_STEPS,
    bundle,
    campaign_variant,
    tagged,
    verdict_of,
)


def _campaign(folder: Path, candidate_args: dict[str, Any], b0_args: dict[str, Any],
              environment: dict[str, str] | None, steps: int | None) -> Path:
    """A one-track, one-candidate copy of the reference campaign with a short protocol."""
    path = campaign_variant(folder, profile_args=b0_args, steps=steps)
    data = yaml.safe_load(path.read_text())
    profile = yaml.safe_load((folder / "b0.yaml").read_text())
    profile.update(name="faulty", declared="lossless")
    profile["args"] = {k: v for k, v in profile["args"].items() if k != "fault"} | candidate_args
    (folder / "faulty.yaml").write_text(yaml.safe_dump(profile))
    data["candidates"] = [{"id": "faulty", "profile": "faulty.yaml", "tracks": ["5s-lossless"]}]
    data["tracks"] = {"5s-lossless": data["tracks"]["5s-lossless"]}
    # The request design (ABA, two measured each, no warm-up): the shortest frozen protocol.
    for key in ("instances_per_arm", "max_warmups", "steady_fraction", "baseline_instances",
                "warmup_steps", "warmup_demonstration"):
        data["protocol"].pop(key, None)
    data["protocol"].update(replication="request", ordering="ABA", warmups=0, repeats=2,
                            caching_probe_requests=0)
    data["engine"]["shutdown_grace_s"] = 2
    # No declared device time unless a test asks for it (then the campaign must allow it, and
    # every verdict is capped): the protocol is under test here, not the engine's speed.
    data["environment"] = environment or {}
    if "cost-model" in candidate_args or environment:
        data["protocol"]["declared_device_time"] = True
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    freeze(path)  # frozen, so that no verdict is capped for a reason other than the fault
    return path


def _perf(tmp_path: Path, candidate_args: dict[str, Any], b0_args: dict[str, Any],
          environment: dict[str, str] | None = None,
          steps: int | None = CHEAP_STEPS) -> tuple[Any, dict[str, Any]]:
    """The perf and verdict scenarios on such a copy; by default a cheap one (few steps): the
    faults' verdicts and reasons do not rest on the output or on the latency ratio."""
    campaign = _campaign(tmp_path / "c", candidate_args, b0_args, environment, steps)
    evidence = tmp_path / "evidence"
    result = run_in_checkout("tests/perf", "tests/verdicts", "-m", "lossless and 5s",
                             "--campaign", str(campaign), "--evidence-dir", str(evidence))
    return result, bundle(evidence)


def _latency_check(result: Any, found: dict[str, Any]) -> dict[str, Any]:
    """The run's latency_ratio check; a run that recorded none fails naming what the session
    said (a selftest once met one under load, with nothing else to read)."""
    checks = [c for c in found["checks"] if c["name"] == "latency_ratio"]
    assert len(checks) == 1, (f"{len(checks)} latency_ratio check(s); checks "
                              f"{[(c['arm'], c['name'], c['status']) for c in found['checks']]}; "
                              f"session said:\n{result.stdout[-4000:]}")
    check: dict[str, Any] = checks[0]
    return check


def test_candidate_crashing_mid_request_is_failed(tmp_path: Path) -> None:
    result, found = _perf(tmp_path, {"fault": "crash"}, {})
    assert result.returncode == 1
    latency = _latency_check(result, found)
    assert latency["reason"] == "candidate_request_failed"
    verdict = verdict_of(found, "faulty")
    assert verdict["verdict"] == "failed" and "candidate_request_failed" in verdict["reasons"]
    # Every sample was kept, the failed ones too.
    assert any(not s["ok"] for s in found["samples"] if s["arm"] == "faulty")
    # The order this run drew is recorded, and is the one its schedule used.
    order = found["campaign"]["order"]
    assert order["drawn_per_run"] and latency["data"]["order_seed"] == order["seed"]
    assert tagged(found["run_id"]) == []


@pytest.mark.parametrize("fault", ["worker_ignores_sigterm", "port_held_after_exit"])
def test_baseline_leaving_a_process_makes_the_track_inconclusive(tmp_path: Path,
                                                                  fault: str) -> None:
    result, found = _perf(tmp_path, {}, {"fault": fault})
    assert result.returncode == 1
    cleanup = [c for c in found["checks"] if c["name"] == "cleanup" and c["arm"] == "b0"]
    assert cleanup and all(c["reason"] == "incomplete_cleanup" for c in cleanup)
    verdict = verdict_of(found, "faulty")
    assert verdict["verdict"] == "inconclusive"
    assert verdict["reasons"][0] == "incomplete_cleanup"
    assert tagged(found["run_id"]) == []


def test_a_slightly_faster_candidate_is_not_supported(tmp_path: Path) -> None:
    # Bit-exact with B0 (the same real compute), but its explicitly declared text-K/V cost is
    # half B0's. On the cheap copy (CHEAP_STEPS steps, about 1 s of real compute) the declared
    # costs are scaled so that a request declares what 50 steps did: 3.8 s for B0 against 2.0 s,
    # so the candidate is about 35% faster in all, nowhere near the target. Declared time is
    # slept, not computed: the ratio stands above the machine's noise at little CPU.
    scale = 50 / CHEAP_STEPS
    device = {"block_ms": 0.5 * scale, "text_kv_ms": 12.0 * scale, "ref_kv_ms": 0.25 * scale}
    result, found = _perf(tmp_path, {"cost-model": {**device, "text_kv_ms": 6.0 * scale}}, {},
                          {"REF2VA_REFERENCE_COST_MODEL": json.dumps(device)})
    assert result.returncode == 1
    latency = _latency_check(result, found)
    verdict = verdict_of(found, "faulty")
    assert verdict["verdict"] != "supported"
    if latency["status"] == "pass":  # the protocol decided: faster, just not enough
        assert latency["data"]["verdict"] in ("failed", "inconclusive")
        assert latency["data"]["interval"]["ratio_of_medians"] < 1.0
    else:  # a loaded machine can make the run not evaluable (B0 drifted): never supported
        assert latency["reason"] in ("drift", "warmup_not_steady"), latency
        assert verdict["verdict"] == "inconclusive"
