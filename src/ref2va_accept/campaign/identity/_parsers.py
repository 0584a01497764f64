"""Parsers of what the host's tools and files say (ffmpeg, npu-smi, CANN, package metadata)."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass



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
