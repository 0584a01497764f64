"""The stand-in 910C host, shared by the host-path run and the bring-up.

Everything the host provides is replaced by a stand-in on PATH and PYTHONPATH: `npu-smi` prints
the synthetic A3 outputs of fixtures/devices/, `ffmpeg` prints a version line, `ffprobe` a
version line or a WAV's duration as the real one prints it, the installed packages (vllm-omni
with its wheel hash, vllm, vllm-ascend, torch-npu, mindiesd) are dist-info folders, CANN is its
install-info file, and `vllm` is a script that prints `serve --omni --help=all` (the flags the
910C profiles use) or checks the launch line the judge built from the real 910C profiles and
then runs the reference engine in its place (a Cache-DiT launch runs the reference engine's
Cache-DiT profile).

Contradictions the tests ask for, by environment variable: FAKE_NPU_HOLD (device 3 keeps 30 GB
after the idle reading), FAKE_VLLM_DROP_FLAG=--name (the help lacks that flag),
FAKE_AVG_REFUSED (the Cache-DiT server's first cached step fails as HCCL without ReduceOp.AVG
would), FAKE_B0_NONDETERMINISTIC (B0 servers draw unseeded noise), FAKE_PYTHONPATH_REPLACED (the
server keeps only the profile's PYTHONPATH entries), FAKE_FFPROBE_SCALE (ffprobe reads durations
scaled by it); `host(broken=...)` makes packages fail to import.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from importlib import metadata
from pathlib import Path

import yaml

from tests.unit.suite_runner import CHEAP_STEPS, ROOT

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

# What the stand-in's `vllm serve --omni --help=all` lists: every flag the runnable 910C
# profiles use (0.30.0 has them all: tests/contract reads them in the wheels), and the launch's own.
HELP_FLAGS = sorted({"--omni", "--host", "--port", *(
    f"--{flag}" for name in ("b0", "b0-legacy-dlo", "cache-dit", "cache-dit-lossless-guard")
    for flag in yaml.safe_load((ROOT / f"engine/profiles/vllm-omni/{name}.yaml").read_text())
    ["args"])})

VLLM = f'''#!{sys.executable}
"""Stand-in `vllm`: prints the serve help, or checks the judge's launch line and then runs the
reference engine instead (its Cache-DiT profile for a Cache-DiT launch)."""
import importlib, json, os, sys

argv = sys.argv[1:]
with open(os.environ["FAKE_VLLM_LOG"], "a") as log:
    log.write(json.dumps({{"argv": argv, "pythonpath": os.environ.get("PYTHONPATH"),
                          "cwd": os.getcwd()}}) + "\\n")
if argv == ["serve", "--omni", "--help=all"]:
    dropped = os.environ.get("FAKE_VLLM_DROP_FLAG")
    for flag in {HELP_FLAGS!r}:
        if flag != dropped:
            print(f"  {{flag}} VALUE    (default: None)")
    sys.exit(0)
assert argv[:1] == ["serve"] and argv[2] == "--omni", argv
flags = argv[3:]
for needed in ("--trust-remote-code", "--worker-extension-cls", "--diffusion-attention-backend"):
    assert needed in flags, f"{{needed}} missing from {{flags}}"
module, _, name = flags[flags.index("--worker-extension-cls") + 1].rpartition(".")
getattr(importlib.import_module(module), name)  # the workers would import it the same way
host, port = flags[flags.index("--host") + 1], flags[flags.index("--port") + 1]
profile = "b0"
if "--cache-backend" in flags and flags[flags.index("--cache-backend") + 1] == "cache_dit":
    profile = "cache-dit-aggressive"
    if os.environ.get("FAKE_AVG_REFUSED"):
        os.environ["REF2VA_REFERENCE_FAULT"] = "collective_avg_unsupported"
elif os.environ.get("FAKE_B0_NONDETERMINISTIC"):
    os.environ["REF2VA_REFERENCE_FAULT"] = "nondeterministic"
if os.environ.get("FAKE_PYTHONPATH_REPLACED"):
    # as a launch that set the variable outright would leave it: the profile's two entries
    # (the checkout and its src/) alone, the host's own gone
    os.environ["PYTHONPATH"] = os.pathsep.join(os.environ["PYTHONPATH"].split(os.pathsep)[:2])
os.execv(sys.executable, [sys.executable, "-m", "engine.reference", "serve", "--config",
                          {str(ROOT / "engine/profiles/reference")!r} + f"/{{profile}}.yaml",
                          "--host", host, "--port", port])
'''

FFPROBE = f'''#!{sys.executable}
"""Stand-in ffprobe: its version line, or a WAV's duration as `-show_entries format=duration`."""
import os, sys, wave

if sys.argv[1:] == ["-version"]:
    print("ffprobe version 6.1.1-3 Copyright (c) 2007-2023")
    sys.exit(0)
path = sys.argv[-1]
try:
    with wave.open(path) as audio:
        seconds = audio.getnframes() / audio.getframerate()
    # FAKE_FFPROBE_SCALE: an ffprobe that reads durations otherwise than the decoder does
    print(f"{{seconds * float(os.environ.get('FAKE_FFPROBE_SCALE', '1')):.6f}}")
except (wave.Error, EOFError, OSError):
    print("N/A")
'''


def script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


ALL_TOOLS = ("npu-smi", "ffmpeg", "ffprobe")


def host(tmp_path: Path, *, tools: tuple[str, ...] = ALL_TOOLS,
          broken: tuple[str, ...] = ()) -> dict[str, str]:
    """The stand-in host: tools on PATH, package metadata on PYTHONPATH, CANN's install info."""
    bin_dir, site, cann = tmp_path / "bin", tmp_path / "site", tmp_path / "cann"
    bin_dir.mkdir()
    scripts = {"npu-smi": NPU_SMI, "vllm": VLLM,
               "ffmpeg": "#!/bin/sh\necho 'ffmpeg version 6.1.1-3 Copyright (c) 2000-2023'\n",
               "ffprobe": FFPROBE}
    for name, text in scripts.items():
        if name == "vllm" or name in tools:
            script(bin_dir / name, text)
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


def campaign(tmp_path: Path, **pin: str) -> Path:
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


