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
import os
import stat
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from tests.unit.suite_runner import CHEAP_STEPS, ROOT, bundle, run_pytest, tagged

WHEEL_SHA256 = "141cb0c7b9c07970e5c92a99aab9696e81682dbfa3d2bfcde359c3c1533385f4"
DEVICES = ROOT / "fixtures/devices"
FAKE_PACKAGES = {"vllm-omni": "0.30.0", "vllm": "0.11.0", "vllm-ascend": "0.11.0rc1",
                 "torch-npu": "2.7.1", "mindiesd": "2.1.rc1"}

NPU_SMI = f'''#!{sys.executable}
"""Stand-in npu-smi: the synthetic A3 outputs; with FAKE_NPU_HOLD set, device 3 keeps ~30 GB
of HBM after the first `npu-smi info` (the idle reading)."""
import os, sys
from pathlib import Path

def fixture(name):
    text = (Path({str(DEVICES)!r}) / name).read_text()
    return "".join(l for l in text.splitlines(True) if not l.startswith("# source:"))

args = sys.argv[1:]
if args == ["info", "-m"]:
    sys.stdout.write(fixture("synthetic-npu-smi-info-m_a3-2card.txt"))
elif args[:3] == ["info", "-t", "board"]:
    sys.stdout.write(fixture("synthetic-npu-smi-info-t-board_a3.txt"))
elif args == ["info"]:
    text = fixture("synthetic-npu-smi-info_a3-4chip-idle.txt")
    calls = Path(os.environ["FAKE_NPU_CALLS"])
    seen = int(calls.read_text()) if calls.exists() else 0
    calls.write_text(str(seen + 1))
    if os.environ.get("FAKE_NPU_HOLD") and seen:
        text = text.replace("2890 / 65536", "32890 / 65536")
    sys.stdout.write(text)
else:
    sys.exit(f"npu-smi stand-in: unknown arguments {{args}}")
'''

VLLM = f'''#!{sys.executable}
"""Stand-in `vllm`: checks the judge's launch line, then runs the reference engine instead."""
import importlib, json, os, sys

argv = sys.argv[1:]
with open(os.environ["FAKE_VLLM_LOG"], "a") as log:
    log.write(json.dumps({{"argv": argv, "pythonpath": os.environ.get("PYTHONPATH"),
                          "cwd": os.getcwd()}}) + "\\n")
assert argv[:1] == ["serve"] and argv[2] == "--omni", argv
flags = argv[3:]
for needed in ("--trust-remote-code", "--worker-extension-cls", "--diffusion-attention-backend"):
    assert needed in flags, f"{{needed}} missing from {{flags}}"
module, _, name = flags[flags.index("--worker-extension-cls") + 1].rpartition(".")
getattr(importlib.import_module(module), name)  # the workers would import it the same way
host, port = flags[flags.index("--host") + 1], flags[flags.index("--port") + 1]
os.execv(sys.executable, [sys.executable, "-m", "engine.reference", "serve", "--config",
                          {str(ROOT / "engine/profiles/reference/b0.yaml")!r},
                          "--host", host, "--port", port])
'''


def _script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


ALL_TOOLS = ("npu-smi", "ffmpeg", "ffprobe")


def _host(tmp_path: Path, *, tools: tuple[str, ...] = ALL_TOOLS,
          broken: tuple[str, ...] = ()) -> dict[str, str]:
    """The stand-in host: tools on PATH, package metadata on PYTHONPATH, CANN's install info."""
    bin_dir, site, cann = tmp_path / "bin", tmp_path / "site", tmp_path / "cann"
    bin_dir.mkdir()
    scripts = {"npu-smi": NPU_SMI, "vllm": VLLM,
               "ffmpeg": "#!/bin/sh\necho 'ffmpeg version 6.1.1-3 Copyright (c) 2000-2023'\n",
               "ffprobe": "#!/bin/sh\necho 'ffprobe version 6.1.1-3 Copyright (c) 2007-2023'\n"}
    for name, text in scripts.items():
        if name == "vllm" or name in tools:
            _script(bin_dir / name, text)
    for dist, version in FAKE_PACKAGES.items():
        info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        if dist == "vllm-omni":
            (info / "direct_url.json").write_text(json.dumps(
                {"url": "file:///wheels/vllm_omni-0.30.0-py3-none-any.whl",
                 "archive_info": {"hashes": {"sha256": WHEEL_SHA256}}}))
    # The platform and backend packages import (the preflight imports them where the server
    # runs); `broken` names those that raise on import, as a half-installed one does.
    for module in ("vllm_ascend", "torch_npu", "mindiesd"):
        (site / f"{module}.py").write_text(
            f"raise ImportError('{module}: libascend_hal.so: cannot open shared object file')\n"
            if module in broken else "")
    arch = os.uname().machine
    (cann / f"{arch}-linux").mkdir(parents=True)
    (cann / f"{arch}-linux/ascend_toolkit_install.info").write_text(
        "package_name=Ascend-cann-toolkit\nversion=8.3.RC1\n")
    # Only the stand-ins, the interpreter's own folder and the system's tools minus the host's
    # (a machine with Debian's ffmpeg installed must not answer for a host that lacks it).
    system = tmp_path / "system-bin"
    system.mkdir()
    for folder in (Path("/usr/bin"), Path("/bin")):
        for tool in folder.iterdir() if folder.is_dir() else ():
            link = system / tool.name
            if tool.name not in ALL_TOOLS and not link.exists() and os.access(tool, os.X_OK):
                link.symlink_to(tool)
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), str(system)])
    return {"PATH": path, "PYTHONPATH": str(site), "ASCEND_TOOLKIT_HOME": str(cann),
            "FAKE_NPU_CALLS": str(tmp_path / "npu-calls"),
            "FAKE_VLLM_LOG": str(tmp_path / "vllm.log")}


def _campaign(tmp_path: Path, **pin: str) -> Path:
    """910c.yaml as the host fills it, shrunk to one small 5 s lossless track for a CPU."""
    data = yaml.safe_load((ROOT / "fixtures/campaigns/910c.yaml").read_text())
    data["engine"]["model"] = "ref2va-reference"  # the name the reference engine serves under
    data["engine"]["startup_timeout_s"] = 120
    data["engine"]["shutdown_grace_s"] = 10
    data["engine"]["source_pin"] = {
        "vllm_omni": {"version": "0.30.0", "wheel_sha256": WHEEL_SHA256},
        # torch is this machine's own: the stand-in host keeps it
        "vllm": "0.11.0", "vllm_ascend": "0.11.0rc1", "torch": metadata.version("torch"),
        "torch_npu": "2.7.1", "cann": "8.3.RC1", "mindiesd": "2.1.rc1",
        "npu_driver": "25.2.0", "npu_firmware": "7.7.0.6.236",
        "ffmpeg": "6.1.1-3", "ffprobe": "6.1.1-3",
        "python": "{}.{}.{}".format(*sys.version_info[:3]), **pin}
    data["devices"]["memory_release"] = {"timeout_s": 3, "poll_s": 0.2, "tolerance_mb": 512}
    track = data["tracks"]["5s-lossless"]
    # Few steps: the host path's launch, preflight and memory waits are under test, not the output.
    track["request"].update(width=112, height=64, num_inference_steps=CHEAP_STEPS)
    track["comparison_points"] = [
        {"name": "mp4.video", "source": "mp4", "dtype": "U8", "shape": [124, 64, 112, 3]}]
    data["tracks"] = {"5s-lossless": track}
    data.pop("search", None)  # it screens tracks this copy no longer has
    folder = tmp_path / "campaign"
    folder.mkdir()
    for rel in ("prompt.txt", "reference.png", "reference.wav"):
        (folder / rel).write_bytes((ROOT / "fixtures/inputs" / rel).read_bytes())
    for pinned in track["inputs"].values():
        pinned["path"] = Path(pinned["path"]).name
    for arm in [data["baseline"], *data["candidates"]]:
        arm["profile"] = os.path.relpath(ROOT / "engine/profiles/vllm-omni" /
                                         Path(arm["profile"]).name, folder)
    data["candidates"] = [a | {"tracks": ["5s-lossless"]} for a in data["candidates"]
                          if a["id"] == "cache-dit-lossless-guard"]
    data["engine"]["workdir"] = os.path.relpath(ROOT, folder)
    path = folder / "910c.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _run(tmp_path: Path, campaign: Path, env: dict[str, str]) -> tuple[Any, dict[str, Any] | None]:
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
