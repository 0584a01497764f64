"""Host identity: the structured `engine.source_pin`, the probes that read it on the host, and
the preflight that compares the two before any engine starts.

A campaign's numbers mean something only for the software stack that produced them. The pin
names that stack field by field (vLLM-Omni with its wheel hash or source commit, vLLM,
vllm-ascend, torch, torch_npu, CANN, MindIE-SD, the NPU driver and firmware, ffmpeg, ffprobe,
Python); the preflight reads each on the host and reports match / DRIFT / unfilled / not found.
The reference engine has a small pin (Python, torch, PyAV and the FFmpeg PyAV links), so the same
path runs in CI.

Every probe is injectable (`HostProbes`): a runner for the tools, a metadata source for package
versions (read from `importlib.metadata`; torch and vLLM are never imported), the environment,
the Python version and the folders CANN may live in. A tool the pin needs but the host lacks
(npu-smi, ffmpeg, ffprobe) is `IdentityToolMissing`, raised before any server starts.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import av
from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from .checks import Check, Reason
from .devices import parse_npu_smi_map, run_command
from .engine_kinds import KINDS, REFERENCE
from .errors import Ref2VAError
from .hashing import file_sha256
from .placeholder import is_placeholder
from .verdicts import CheckResult

if TYPE_CHECKING:
    from .campaign import LoadedCampaign

log = logging.getLogger(__name__)

TOOL_TIMEOUT_S = 20.0
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")

Status = Literal["match", "DRIFT", "unfilled", "not found"]


class IdentityToolMissing(Ref2VAError):
    """A tool the campaign's identity pin needs is not on this host (nothing was started)."""


class _Strict(BaseModel):
    # The campaign's rules: unknown keys refused, nothing coerced, values frozen.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A pin is what the campaign wrote: unset fields stay out of its dump and so of the lock.
        data: dict[str, Any] = handler(self)
        return {key: value for key, value in data.items() if value is not None}


class VllmOmniSource(_Strict):
    """vLLM-Omni's own identity: its version and what it was built from."""

    version: str
    # The sha256 of the installed wheel file, or the git commit of a source build: one at least.
    wheel_sha256: str | None = None
    source_commit: str | None = None

    @model_validator(mode="after")
    def _one_origin(self) -> VllmOmniSource:
        if self.wheel_sha256 is None and self.source_commit is None:
            raise ValueError("wheel_sha256 or source_commit (or a <FILL: ...> for one), "
                             "found neither")
        if (self.wheel_sha256 is not None and not is_placeholder(self.wheel_sha256)
                and not _SHA256.match(self.wheel_sha256)):
            raise ValueError(f"wheel_sha256: 64 lowercase hex digits, found {self.wheel_sha256!r}")
        if (self.source_commit is not None and not is_placeholder(self.source_commit)
                and not _COMMIT.match(self.source_commit)):
            raise ValueError(f"source_commit: a git commit (7-40 lowercase hex digits), "
                             f"found {self.source_commit!r}")
        return self


class SourcePin(_Strict):
    """`engine.source_pin`: which fields an engine kind needs is checked by `pin_violations`."""

    vllm_omni: VllmOmniSource | None = None
    vllm: str | None = None
    vllm_ascend: str | None = None
    torch: str | None = None
    torch_npu: str | None = None
    cann: str | None = None
    mindiesd: str | None = None
    npu_driver: str | None = None
    npu_firmware: str | None = None
    ffmpeg: str | None = None
    ffprobe: str | None = None
    python: str | None = None
    # The reference engine muxes through PyAV and the FFmpeg libraries PyAV links; no ffmpeg
    # binary is involved, so these two pin its media stack.
    av: str | None = None
    av_ffmpeg: str | None = None


def pin_violations(kind: str, raw: Any) -> list[tuple[tuple[str | int, ...], str]]:
    """What is wrong with a raw source_pin for an engine kind, before the model validates it.

    Which fields a kind needs, and how its pin is written, is its adapter's (engine_kinds)."""
    adapter = KINDS.get(kind)
    if isinstance(raw, str):
        return [((), f"a structured pin for engine kind {kind}, found the string {raw!r}; "
                     f"write {(adapter or REFERENCE).pin_form}")]
    if not isinstance(raw, Mapping) or adapter is None:
        return []  # the model's own validation names the wrong type
    wanted = adapter.pin_fields
    out: list[tuple[tuple[str | int, ...], str]] = [
        ((name,), f"required for engine kind {kind}, found nothing")
        for name in wanted if raw.get(name) is None]
    out += [((name,), f"not part of the {kind} pin (expected only {', '.join(wanted)})")
            for name in raw if name not in wanted and name in SourcePin.model_fields]
    return out


def flatten_pin(pin: SourcePin) -> dict[str, str]:
    """Dotted field -> frozen value, in the pin's field order (`vllm_omni.version`, ...)."""
    out: dict[str, str] = {}
    for name in SourcePin.model_fields:
        value = getattr(pin, name)
        if value is None:
            continue
        if isinstance(value, VllmOmniSource):
            for sub in ("version", "wheel_sha256", "source_commit"):
                if getattr(value, sub) is not None:
                    out[f"{name}.{sub}"] = getattr(value, sub)
        else:
            out[name] = value
    return out


# --------------------------------------------------------------------------- parsers

_TOOL_VERSION = re.compile(r"^\s*(ffmpeg|ffprobe) version (\S+)")


def parse_tool_version(tool: str, text: str) -> str:
    """`ffmpeg -version` / `ffprobe -version`: the token after "<tool> version" on line one."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    match = _TOOL_VERSION.match(first)
    if match is None or match.group(1) != tool:
        raise ValueError(f"{tool} -version: expected '{tool} version X' on the first line, "
                         f"found {first[:120]!r}")
    return match.group(2)


def parse_key_values(text: str, sep: str) -> dict[str, str]:
    """`Key : value` (npu-smi -t board) or `key=value` (install.info) lines; later keys lose."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, found, value = line.partition(sep)
        if found and key.strip() and key.strip() not in out:
            out[key.strip()] = value.strip()
    return out


def parse_npu_smi_board(text: str) -> tuple[str, str]:
    """`npu-smi info -t board -i N`: (driver, firmware) from Software / Firmware Version."""
    fields = parse_key_values(text, ":")
    driver, firmware = fields.get("Software Version"), fields.get("Firmware Version")
    missing = [name for name, value in (("Software Version", driver),
                                         ("Firmware Version", firmware))
               if not value or value.upper() in {"NA", "N/A"}]
    if missing or driver is None or firmware is None:
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        raise ValueError(f"npu-smi info -t board: no {' or '.join(missing)} line; output began "
                         f"{first[:120]!r}")
    return driver, firmware


def parse_cann_install_info(text: str) -> str:
    """`ascend_toolkit_install.info`: the `version=` line (package_name, version, arch, path)."""
    version = parse_key_values(text, "=").get("version")
    if not version:
        raise ValueError("ascend_toolkit_install.info: no version= line")
    return version


def vllm_omni_origin(direct_url: str | None) -> tuple[str | None, str | None, str]:
    """(wheel sha256, source commit, note) from a dist-info's direct_url.json (PEP 610)."""
    if direct_url is None:
        return None, None, ("no direct_url.json (installed from an index): pin a source commit "
                            "or pass the wheel file (--vllm-omni-wheel / REF2VA_VLLM_OMNI_WHEEL)")
    try:
        data = json.loads(direct_url)
    except json.JSONDecodeError as exc:
        return None, None, f"direct_url.json is not JSON: {exc.msg}"
    if not isinstance(data, dict):
        return None, None, "direct_url.json is not an object"
    archive, vcs = data.get("archive_info"), data.get("vcs_info")
    if isinstance(archive, dict):
        hashes = archive.get("hashes")
        sha = hashes.get("sha256") if isinstance(hashes, dict) else None
        legacy = archive.get("hash")
        if sha is None and isinstance(legacy, str) and legacy.startswith("sha256="):
            sha = legacy.removeprefix("sha256=")
        if isinstance(sha, str):
            return sha.lower(), None, "direct_url.json archive_info"
        return None, None, ("direct_url.json archive_info carries no sha256: pass the wheel "
                            "file (--vllm-omni-wheel / REF2VA_VLLM_OMNI_WHEEL)")
    if isinstance(vcs, dict) and isinstance(vcs.get("commit_id"), str):
        return None, vcs["commit_id"], "direct_url.json vcs_info"
    return None, None, ("direct_url.json names neither an archive hash nor a VCS commit "
                        "(a local directory install?): pin the source commit")


# --------------------------------------------------------------------------- probes

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


# --------------------------------------------------------------------------- preflight


@dataclass(frozen=True)
class IdentityRow:
    field: str
    frozen: str
    host: str | None
    status: Status
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "frozen": self.frozen, "host": self.host,
                "status": self.status, "source": self.source}


@dataclass(frozen=True)
class Preflight:
    kind: str
    rows: tuple[IdentityRow, ...]

    @property
    def ok(self) -> bool:
        return all(row.status == "match" for row in self.rows)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def problems(self) -> list[IdentityRow]:
        return [row for row in self.rows if row.status != "match"]

    def to_dict(self) -> dict[str, Any]:
        return {"engine_kind": self.kind, "ok": self.ok,
                "rows": [row.to_dict() for row in self.rows]}

    def table(self) -> str:
        head = ("field", "frozen", "host", "status")
        body = [(r.field, r.frozen, r.host if r.host is not None else "-", r.status)
                for r in self.rows]
        widths = [max(len(line[i]) for line in [head, *body]) for i in range(4)]
        lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip()
                 for line in [head, *body]]
        lines += [f"{r.field}: {r.source}" for r in self.rows if r.status == "not found"]
        return "\n".join(lines)

    def detail(self) -> str:
        """One line naming every field that is not a match, with frozen and host values."""
        return "; ".join(f"{r.field}: {r.status}, frozen {r.frozen!r}, host "
                         + (repr(r.host) if r.host is not None else f"unknown ({r.source})")
                         for r in self.problems())


def compare(kind: str, frozen: Mapping[str, str], host: Mapping[str, HostValue]) -> Preflight:
    rows: list[IdentityRow] = []
    for name, value in frozen.items():
        seen = host.get(name, HostValue(None, "no probe"))
        status: Status
        if is_placeholder(value):
            status = "unfilled"
        elif seen.value is None:
            status = "not found"
        elif seen.value == value:
            status = "match"
        else:
            status = "DRIFT"
        rows.append(IdentityRow(name, value, seen.value, status, seen.source))
    return Preflight(kind, tuple(rows))


def preflight(campaign: LoadedCampaign, probes: HostProbes | None = None) -> Preflight:
    """Compare the campaign's pin with the host; raises IdentityToolMissing for a missing tool."""
    engine = campaign.model.engine
    probes = probes if probes is not None else HostProbes()
    if probes.vllm_omni_wheel is None and probes.env.get("REF2VA_VLLM_OMNI_WHEEL"):
        probes.vllm_omni_wheel = Path(probes.env["REF2VA_VLLM_OMNI_WHEEL"])
    frozen = flatten_pin(engine.source_pin)
    host = read_host(engine.kind, frozen, probes, campaign.model.devices.visible)
    result = compare(engine.kind, frozen, host)
    log.info("host identity: %s", "all match" if result.ok else result.detail())
    return result


def identity_checks(result: Preflight, track_ids: Iterable[str]) -> list[CheckResult]:
    """One `host_identity` check per track, on B0 so that it counts for every candidate.

    A field that is not a match makes the run not evaluable (`protocol_deviation`): numbers
    measured on another stack than the frozen one do not belong to this campaign.
    """
    data = {"rows": [row.to_dict() for row in result.rows]}
    if result.ok:
        return [CheckResult(t, "b0", Check.HOST_IDENTITY, "pass", None,
                            f"all {len(result.rows)} pinned fields match the host", data)
                for t in track_ids]
    return [CheckResult(t, "b0", Check.HOST_IDENTITY, "fail", Reason.PROTOCOL_DEVIATION,
                        "host identity differs from engine.source_pin: " + result.detail(), data)
            for t in track_ids]
