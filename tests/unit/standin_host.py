"""The stand-in 910C host, shared by the host-path run and the bring-up.

Everything the host provides is replaced by a stand-in on PATH and PYTHONPATH: `npu-smi` prints
the synthetic A3 outputs of fixtures/devices/, `ffmpeg` prints a version line, `ffprobe` a
version line or a WAV's duration as the real one prints it, the installed packages (vllm-omni
with its wheel hash, vllm, vllm-ascend, torch-npu, mindiesd) are dist-info folders, CANN is its
install-info file, and `vllm` is a script that prints `serve --omni --help=all` (the flags the
910C profiles use) or checks the launch line the judge built from the real 910C profiles and
then runs the reference engine in its place (a Cache-DiT launch runs the reference engine's
Cache-DiT profile), passing the launch's `--text-encoder-tp-size` on (the reference engine
reports it in enabled_path.json as the vLLM-Omni extension reports the server's). Each launch is
logged to $FAKE_VLLM_LOG with its pid and process group, so that a test can check that none of
them outlived it.

Contradictions the tests ask for, by environment variable: FAKE_NPU_HOLD (device 3 keeps 30 GB
after the idle reading), FAKE_VLLM_DROP_FLAG=--name (the help lacks that flag),
FAKE_AVG_REFUSED (the Cache-DiT server's first cached step fails as HCCL without ReduceOp.AVG
would), FAKE_B0_NONDETERMINISTIC (B0 servers draw unseeded noise), FAKE_PYTHONPATH_REPLACED (the
server keeps only the profile's PYTHONPATH entries), FAKE_FFPROBE_SCALE (ffprobe reads durations
scaled by it), FAKE_TEXT_ENCODER_TP=N (the server reports that text-encoder TP size whatever the
launch says), FAKE_CACHE_WARMUP=N (the Cache-DiT server warms up N steps: a shorter request
caches none); `host(broken=...)` and `host(tools=...)` make packages fail to import and leave
tools out.
"""

from __future__ import annotations

import copy
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
                          "cwd": os.getcwd(), "pid": os.getpid(),
                          "pgid": os.getpgid(0)}}) + "\\n")
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
profiles = {str(ROOT / "engine/profiles/reference")!r}
config = profiles + "/b0.yaml"
if "--cache-backend" in flags and flags[flags.index("--cache-backend") + 1] == "cache_dit":
    config = profiles + "/cache-dit-aggressive.yaml"
    if os.environ.get("FAKE_AVG_REFUSED"):
        os.environ["REF2VA_REFERENCE_FAULT"] = "collective_avg_unsupported"
    if os.environ.get("FAKE_CACHE_WARMUP"):
        import yaml
        data = yaml.safe_load(open(config))
        data["args"]["cache-config"]["max_warmup_steps"] = int(os.environ["FAKE_CACHE_WARMUP"])
        config = os.path.join(os.path.dirname(os.environ["FAKE_VLLM_LOG"]),
                              f"cache-dit-warmup-{{os.getpid()}}.yaml")
        with open(config, "w") as out:
            yaml.safe_dump(data, out)
elif os.environ.get("FAKE_B0_NONDETERMINISTIC"):
    os.environ["REF2VA_REFERENCE_FAULT"] = "nondeterministic"
if os.environ.get("FAKE_PYTHONPATH_REPLACED"):
    # as a launch that set the variable outright would leave it: the profile's two entries
    # (the checkout and its src/) alone, the host's own gone
    os.environ["PYTHONPATH"] = os.pathsep.join(os.environ["PYTHONPATH"].split(os.pathsep)[:2])
tp = os.environ.get("FAKE_TEXT_ENCODER_TP") or (
    flags[flags.index("--text-encoder-tp-size") + 1] if "--text-encoder-tp-size" in flags
    else None)
os.execv(sys.executable, [sys.executable, "-m", "engine.reference", "serve", "--config", config,
                          "--host", host, "--port", port,
                          *(["--text-encoder-tp-size", tp] if tp else [])])
'''

FFPROBE = f'''#!{sys.executable}
"""Stand-in ffprobe: its version line, or a WAV's duration: as `-show_entries format=duration`
prints it, or as H3's `-show_entries stream=...:format=... -of json` does (stream and format)."""
import json, os, sys, wave

if sys.argv[1:] == ["-version"]:
    print("ffprobe version 6.1.1-3 Copyright (c) 2007-2023")
    sys.exit(0)
path = sys.argv[-1]
try:
    with wave.open(path) as audio:
        seconds = audio.getnframes() / audio.getframerate()
    # FAKE_FFPROBE_SCALE: an ffprobe that reads durations otherwise than the decoder does
    duration = f"{{seconds * float(os.environ.get('FAKE_FFPROBE_SCALE', '1')):.6f}}"
except (wave.Error, EOFError, OSError):
    duration = None
if "json" not in sys.argv:
    print(duration or "N/A")
elif duration is None:
    sys.exit(f"{{path}}: Invalid data found when processing input")
else:
    print(json.dumps({{"streams": [{{"codec_type": "audio", "codec_name": "pcm_s16le",
                                    "duration": duration}}],
                      "format": {{"format_name": "wav", "size": str(os.path.getsize(path)),
                                  "duration": duration}}}}))
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


FILL = "<FILL: the shape the engine writes>"
POINTS = ("cond.text", "cond.image", "cond.audio", "dit.step000", "latent.video", "latent.audio",
          "decoded.video", "decoded.audio")


# What the stand-in's lossy track gates: dimensions no model serves, so that scoring B0's output
# costs the stand-in host a second or two (the reference campaign's CLIP stand-in costs about
# 20 s of a core per 124-frame clip).
STANDIN_GATED = ["vbench.temporal_flickering", "proxy.subject_consistency.ssim"]


def bringup_campaign(tmp_path: Path, *, wrong_shape: bool = False, wrong_dtype: bool = False,
                     steps: int = 8, timeout_15s: float | None = None) -> Path:
    """910c.yaml as a fresh host has it before its bring-up (placeholder shapes, no scoring or
    stop price), shrunk for a CPU: a 5 s and a 15 s lossless track and a 5 s lossy one (gating
    STANDIN_GATED) at 112x64 and `steps` steps, the lossless guard and the Cache-DiT candidate
    (on the 5 s tracks). Its steady_fraction is 0.9: the warm-up demonstration's decision on a
    CPU shared with other work is then the reference engine's, not the machine's noise (at 0.5 a
    selftest saw 1.677 for 5 s, both cheap requests slower than both full ones, while the heavy
    tests loaded scorer models on the other core; the refusal is planted in
    test_bringup_prices.py)."""
    path = campaign(tmp_path)
    data = yaml.safe_load(path.read_text())
    full = yaml.safe_load((ROOT / "fixtures/campaigns/910c.yaml").read_text())
    five = data["tracks"]["5s-lossless"]
    # 8: the Cache-DiT profile's warm-up (4) and four more, so the bring-up runs the track's;
    # fewer, and it raises the Cache-DiT requests' steps (and says so)
    five["request"]["num_inference_steps"] = steps
    points = [{"name": n, "source": "diagnostics", "dtype": "F32", "shape": FILL}
              for n in POINTS]
    if wrong_shape:
        points[4]["shape"] = "<WRONG>"  # latent.video, filled wrong (below, on its own line)
    if wrong_dtype:
        points[0]["dtype"] = "BF16"  # cond.text, as the 0.30.0 sources have it; the engine: F32
    five["comparison_points"] = [*points,
                                 {"name": "mp4.video", "source": "mp4", "dtype": "U8",
                                  "shape": [124, 64, 112, 3]},
                                 {"name": "mp4.audio", "source": "mp4", "dtype": "F32",
                                  "shape": FILL}]
    fifteen = copy.deepcopy(five)
    fifteen.update(duration_s=15.0, num_frames=362)
    fifteen["request"]["extra_params"]["duration"] = 15.0
    fifteen["comparison_points"][8]["shape"] = [362, 64, 112, 3]
    data["tracks"]["15s-lossless"] = fifteen
    lossy = {k: copy.deepcopy(v) for k, v in five.items() if k != "comparison_points"}
    lossy["request"]["seeds"] = [42, 43]
    lossy["lossy_gate"] = full["tracks"]["5s-lossy"]["lossy_gate"] | {"gated": STANDIN_GATED}
    data["tracks"]["5s-lossy"] = lossy
    data["protocol"]["steady_fraction"] = 0.9
    data["scoring"].pop("seconds_per_output")
    guard = data["candidates"][0]
    cache_dit = next(c for c in full["candidates"] if c["id"] == "cache-dit")
    data["candidates"].insert(0, cache_dit | {
        "tracks": ["5s-lossless", "5s-lossy"],
        "profile": guard["profile"].replace("cache-dit-lossless-guard", "cache-dit")})
    if timeout_15s is not None:  # a client that gives up on the 15 s request
        data["protocol"]["timeouts"]["15s"]["request_s"] = timeout_15s
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=200)
    path.write_text(text.replace("'<WRONG>'", "[1, 2, 3]").replace("<WRONG>", "[1, 2, 3]"))
    return path
