"""Reading the host: injectable probes for tools, package metadata, environment and CANN, and
the value each pinned field has on this host."""

from __future__ import annotations

import os
import platform
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import av

from ref2va_accept.core import file_sha256
from ref2va_accept.engines import parse_npu_smi_map, run_command

if TYPE_CHECKING:
    pass

from ref2va_accept.campaign.identity._parsers import (
    parse_cann_install_info,
    parse_npu_smi_board,
    parse_tool_version,
    vllm_omni_origin,
)
from ref2va_accept.campaign.identity._pin import IdentityToolMissing

TOOL_TIMEOUT_S = 20.0

Runner = Callable[[Sequence[str]], tuple[str | None, str]]


def run_tool(argv: Sequence[str]) -> tuple[str | None, str]:
    """(stdout, "") or (None, why); a tool not on PATH raises FileNotFoundError, since a pinned
    tool that the host lacks stops the run instead of reading as a drifted value."""
    if shutil.which(argv[0]) is None:
        raise FileNotFoundError(argv[0])
    return run_command(argv, TOOL_TIMEOUT_S)


class MetadataSource(Protocol):
    def version(self, dist: str) -> str | None: ...
    def read_text(self, dist: str, name: str) -> str | None: ...


class InstalledMetadata:
    """Installed distributions, read from their metadata; nothing is imported."""

    def version(self, dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    def read_text(self, dist: str, name: str) -> str | None:
        try:
            return metadata.distribution(dist).read_text(name)
        except metadata.PackageNotFoundError:
            return None


def _av_ffmpeg_version() -> str | None:
    # The judge depends on PyAV already; the FFmpeg it links is the reference engine's.
    value = getattr(av, "ffmpeg_version_info", None)
    return str(value) if value else None


# Where CANN's toolkit may live: the env vars set_env.sh exports, then the default install roots
# of the two layouts seen (ascend-toolkit/latest up to CANN 8.3, cann/ from 8.5). Each holds
# `<arch>-linux/ascend_toolkit_install.info` with a `version=` line.
CANN_ENV_VARS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH")
CANN_DEFAULT_ROOTS = ("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/cann")

# Distribution names as pip knows them.
DISTRIBUTIONS = {"vllm_omni": "vllm-omni", "vllm": "vllm", "vllm_ascend": "vllm-ascend",
                 "torch": "torch", "torch_npu": "torch-npu", "mindiesd": "mindiesd", "av": "av"}


@dataclass(frozen=True)
class HostValue:
    value: str | None
    source: str  # where it was read, without absolute paths


@dataclass
class HostProbes:
    """Everything the preflight reads from the host; each part replaceable in tests."""

    run: Runner = run_tool
    packages: MetadataSource = field(default_factory=InstalledMetadata)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    python: str = "{}.{}.{}".format(*sys.version_info[:3])
    cann_roots: Sequence[str] = CANN_DEFAULT_ROOTS
    machine: str = field(default_factory=platform.machine)
    av_ffmpeg: Callable[[], str | None] = _av_ffmpeg_version
    # The installed vLLM-Omni wheel file, when its dist-info records no hash.
    vllm_omni_wheel: Path | None = None

    def tool(self, argv: Sequence[str]) -> tuple[str | None, str]:
        try:
            return self.run(argv)
        except FileNotFoundError:
            raise IdentityToolMissing(
                f"{argv[0]}: not found on PATH; the campaign's engine.source_pin needs it "
                f"(`{' '.join(argv)}`); nothing was started") from None

    def package(self, name: str) -> HostValue:
        dist = DISTRIBUTIONS[name]
        value = self.packages.version(dist)
        return HostValue(value, f"installed {dist}" if value else f"{dist} is not installed")

    def server_python(self) -> str:
        """The interpreter the server runs on: the one `vllm` on PATH names in its first line
        (pip's console scripts do), else the harness's own."""
        script = shutil.which("vllm", path=self.env.get("PATH"))
        try:
            with open(script or "", "rb") as handle:
                first = handle.readline(512).decode(errors="replace")
        except OSError:
            return sys.executable
        words = first[2:].split() if first.startswith("#!") else []
        if words and Path(words[0]).name == "env" and len(words) > 1:
            return shutil.which(words[1], path=self.env.get("PATH")) or sys.executable
        return words[0] if words and "python" in Path(words[0]).name else sys.executable

    def importable(self, module: str) -> HostValue:
        """Whether `import MODULE` succeeds in the server's interpreter and the environment the
        server inherits: a version in the metadata does not show that the package loads
        (vLLM's NPU platform imports vllm-ascend; with MindIE-SD installed, it imports MindIE-SD
        at start-up while selecting the FLASH_ATTN backend)."""
        where = "in the interpreter of `vllm` on PATH"
        try:
            out, why = self.run([self.server_python(), "-c", f"import {module}"])
        except FileNotFoundError:
            return HostValue(None, f"import {module}: the server's interpreter is not there")
        if out is not None:
            return HostValue("importable", f"import {module} {where}")
        reason = why.split(": ", 1)[1] if ": " in why else why
        return HostValue(None, f"import {module} {where} failed: {reason}")

    def vllm_omni(self) -> dict[str, HostValue]:
        version = self.package("vllm_omni")
        sha, commit, note = vllm_omni_origin(self.packages.read_text("vllm-omni",
                                                                     "direct_url.json"))
        if self.vllm_omni_wheel is not None:
            try:
                sha = file_sha256(self.vllm_omni_wheel)
                note = f"sha256 of {self.vllm_omni_wheel.name}"
            except OSError as exc:
                note = f"{self.vllm_omni_wheel.name}: cannot read ({exc.strerror})"
        return {"version": version,
                "wheel_sha256": HostValue(sha, note),
                "source_commit": HostValue(commit, note)}

    def ffmpeg_tool(self, tool: str) -> HostValue:
        out, why = self.tool([tool, "-version"])
        if out is None:
            return HostValue(None, why)
        try:
            return HostValue(parse_tool_version(tool, out), f"{tool} -version")
        except ValueError as exc:
            return HostValue(None, str(exc))

    def cann(self) -> HostValue:
        roots = [(f"${name}", self.env[name]) for name in CANN_ENV_VARS if self.env.get(name)]
        roots += [(root, root) for root in self.cann_roots]
        tried: list[str] = []
        for shown, root in roots:
            folder = Path(root)
            own_arch = folder / f"{self.machine}-linux" / "ascend_toolkit_install.info"
            candidates = [own_arch, *sorted(folder.glob("*-linux/ascend_toolkit_install.info"))]
            for info in candidates:
                try:
                    text = info.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
                where = f"{shown}/{info.parent.name}/{info.name}"
                try:
                    return HostValue(parse_cann_install_info(text), where)
                except ValueError as exc:
                    return HostValue(None, f"{where}: {exc}")
            tried.append(shown)
        return HostValue(None, "no <arch>-linux/ascend_toolkit_install.info under "
                               + ", ".join(tried))

    def npu(self, visible: Sequence[int]) -> dict[str, HostValue]:
        """Driver and firmware of every card that holds an assigned logical device."""
        map_text, why = self.tool(["npu-smi", "info", "-m"])
        if map_text is None:
            gone = HostValue(None, why)
            return {"npu_driver": gone, "npu_firmware": gone}
        try:
            chip_map = parse_npu_smi_map(map_text)
        except ValueError as exc:
            gone = HostValue(None, str(exc))
            return {"npu_driver": gone, "npu_firmware": gone}
        by_logic = {logic: npu for (npu, _chip), logic in chip_map.items()}
        wanted = list(visible) or sorted(by_logic)
        absent = [d for d in wanted if d not in by_logic]
        if absent:
            gone = HostValue(None, f"npu-smi info -m lists no logical device {absent[0]}")
            return {"npu_driver": gone, "npu_firmware": gone}
        drivers: dict[int, str] = {}
        firmwares: dict[int, str] = {}
        for npu in sorted({by_logic[d] for d in wanted}):
            text, why = self.tool(["npu-smi", "info", "-t", "board", "-i", str(npu)])
            if text is None:
                gone = HostValue(None, why)
                return {"npu_driver": gone, "npu_firmware": gone}
            try:
                drivers[npu], firmwares[npu] = parse_npu_smi_board(text)
            except ValueError as exc:
                gone = HostValue(None, str(exc))
                return {"npu_driver": gone, "npu_firmware": gone}
        return {"npu_driver": _agreed(drivers, "Software Version"),
                "npu_firmware": _agreed(firmwares, "Firmware Version")}


def _agreed(per_card: Mapping[int, str], label: str) -> HostValue:
    """One value when every card agrees; otherwise every card's (which can never match a pin)."""
    values = set(per_card.values())
    source = f"npu-smi info -t board ({label}), NPU {', '.join(map(str, per_card))}"
    if len(values) == 1:
        return HostValue(values.pop(), source)
    return HostValue(", ".join(f"NPU {n}: {v}" for n, v in per_card.items()),
                     source + ": the cards differ")


def read_host(kind: str, fields: Iterable[str], probes: HostProbes,
              visible: Sequence[int] = ()) -> dict[str, HostValue]:
    """The host's value of each flattened pin field (`vllm_omni.version`, `cann`, ...)."""
    wanted = list(fields)
    tops = {name.split(".", 1)[0] for name in wanted}
    out: dict[str, HostValue] = {}
    # Tools first: a missing one is an error before anything slower is read.
    if "ffmpeg" in tops:
        out["ffmpeg"] = probes.ffmpeg_tool("ffmpeg")
    if "ffprobe" in tops:
        out["ffprobe"] = probes.ffmpeg_tool("ffprobe")
    if tops & {"npu_driver", "npu_firmware"}:
        out |= probes.npu(visible)
    if "vllm_omni" in tops:
        out |= {f"vllm_omni.{k}": v for k, v in probes.vllm_omni().items()}
    for name in ("vllm", "vllm_ascend", "torch", "torch_npu", "mindiesd", "av"):
        if name in tops:
            out[name] = probes.package(name)
    if "cann" in tops:
        out["cann"] = probes.cann()
    if "python" in tops:
        out["python"] = HostValue(probes.python, "the harness's interpreter")
    if "av_ffmpeg" in tops:
        value = probes.av_ffmpeg()
        out["av_ffmpeg"] = HostValue(value, "av.ffmpeg_version_info" if value
                                     else "PyAV reports no FFmpeg version")
    return {name: out.get(name, HostValue(None, "no probe")) for name in wanted}
