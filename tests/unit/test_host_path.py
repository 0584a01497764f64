"""The 910C host path, run whole on a stand-in host: `pytest` on the vLLM-Omni campaign.

Everything the host provides is replaced by a stand-in on PATH and PYTHONPATH: `npu-smi` prints
the synthetic A3 outputs of fixtures/devices/, `ffmpeg`/`ffprobe` print a version line, the
installed packages (vllm-omni with its wheel hash, vllm, vllm-ascend, torch-npu, mindiesd) are
dist-info folders, CANN is its install-info file, and `vllm` is a script that checks the launch
line the judge built from the real 910C profiles (`serve MODEL --omni`, `--trust-remote-code`,
the worker extension importable through the profile's PYTHONPATH) and then runs the reference
engine in its place. What runs for real is the judge: the campaign as the host has it (its
profiles, timeouts, devices and pin), the identity preflight, the launch, the request, the stop,
the wait for device memory, the evidence and the verdicts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.unit.standin_host import campaign as _campaign
from tests.unit.standin_host import host as _host
from tests.unit.suite_runner import ROOT, bundle, run_pytest, tagged


def _run(tmp_path: Path, campaign: Path, env: dict[str, str]) -> tuple[Any, dict[str, Any] | None]:
    # A session in a process of its own: the stand-in host is PATH and PYTHONPATH (the packages
    # the identity preflight finds), which an interpreter reads as it starts.
    evidence = tmp_path / "evidence"
    result = run_pytest("tests/acceptance", "-m", "5s and lossless", "-k", "b0", "-p",
                        "no:randomly", "--campaign", str(campaign), "--evidence-dir",
                        str(evidence), timeout=600, env=env)
    found = bundle(evidence) if evidence.is_dir() and any(evidence.iterdir()) else None
    return result, found


def _checks(evidence: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [c for c in evidence["checks"] if c["name"] == name]


def test_a_b0_run_on_the_host_path_starts_with_the_preflight_and_waits_for_memory(
        tmp_path: Path) -> None:
    env = _host(tmp_path)
    result, evidence = _run(tmp_path, _campaign(tmp_path), env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert evidence is not None
    assert evidence["host_identity"]["ok"] is True, evidence["host_identity"]
    assert {c["status"] for c in _checks(evidence, "host_identity")} == {"pass"}
    memory = evidence["device_memory"]
    assert memory["status"] == "measured" and memory["waits"], memory
    assert all(w["released"] for w in memory["waits"])
    assert {c["status"] for c in _checks(evidence, "device_memory_release")} == {"pass"}
    # The launch line the judge built from the 910C profile, as the stand-in `vllm` received it.
    launched = json.loads((tmp_path / "vllm.log").read_text().splitlines()[0])
    argv = launched["argv"]
    assert argv[:3] == ["serve", "ref2va-reference", "--omni"]
    assert "--trust-remote-code" in argv and "--enforce-eager" in argv
    assert argv[argv.index("--worker-extension-cls") + 1] == \
        "engine.vllm_omni.extension.Ref2VADiagnostics"
    # The profile's entries first, then what the host's environment had (its site packages,
    # as CANN's set_env.sh leaves them): prepended, never replaced.
    assert launched["pythonpath"] == f"{ROOT}:{ROOT}/src:{tmp_path / 'site'}"
    instance = evidence["instances"][0]
    assert instance["env"]["ASCEND_RT_VISIBLE_DEVICES"] == "0,1,2,3"
    assert instance["env"]["VLLM_OMNI_DLO_DP_WAVE_TIMEOUT"] == "3720"
    assert tagged(evidence["run_id"]) == []


def test_a_drifted_host_and_memory_still_held_make_the_track_inconclusive(
        tmp_path: Path) -> None:
    # ... and MindIE-SD installed (its version matches the pin) but failing to import.
    env = _host(tmp_path, broken=("mindiesd",)) | {"FAKE_NPU_HOLD": "1"}
    result, evidence = _run(tmp_path, _campaign(tmp_path, npu_driver="24.1.0"), env)
    assert evidence is not None, result.stdout[-3000:]
    identity = _checks(evidence, "host_identity")
    assert identity and {c["reason"] for c in identity} == {"protocol_deviation"}
    assert "npu_driver" in identity[0]["detail"] and "24.1.0" in identity[0]["detail"]
    assert "25.2.0" in identity[0]["detail"]
    detail = identity[0]["detail"]
    assert "import mindiesd: not found" in detail and "libascend_hal.so" in detail, detail
    assert "import torch_npu" not in detail and "import vllm_ascend" not in detail
    rows = {r["field"]: r for r in evidence["host_identity"]["rows"]}
    assert rows["import torch_npu"]["status"] == "match"
    assert rows["mindiesd"]["status"] == "match"  # the metadata alone would have passed it
    held = [c for c in _checks(evidence, "device_memory_release") if c["status"] == "fail"]
    assert held and held[0]["reason"] == "device_memory_not_released"
    assert "device 3: 30000 MB above idle" in held[0]["detail"]
    verdicts = evidence["verdicts"]
    assert verdicts and all(v["verdict"] == "inconclusive" for v in verdicts)
    reasons = {r for v in verdicts for r in v["reasons"]}
    assert {"protocol_deviation", "device_memory_not_released"} <= reasons


def test_a_host_without_ffprobe_stops_before_any_engine_starts(tmp_path: Path) -> None:
    env = _host(tmp_path, tools=("npu-smi", "ffmpeg"))
    result, evidence = _run(tmp_path, _campaign(tmp_path), env)
    assert result.returncode == 4, result.stdout[-3000:]  # pytest's usage error
    assert "ffprobe" in result.stdout + result.stderr
    assert not (tmp_path / "vllm.log").exists()
    assert evidence is None or evidence["instances"] == []
