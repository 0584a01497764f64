"""The preflight: the pin compared with the host field by field, and its checks per track."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ref2va_accept.core import ArmRole, Check, CheckStatus, Reason, is_placeholder
from ref2va_accept.evidence import CheckResult, IdentityRow

if TYPE_CHECKING:
    from ref2va_accept.campaign._loaded import LoadedCampaign

from ref2va_accept.campaign.identity.pin import Status, flatten_pin
from ref2va_accept.campaign.identity.probes import HostProbes, HostValue, read_host

log = logging.getLogger(__name__)

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
                "rows": [row.json_dict() for row in self.rows]}

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
        rows.append(IdentityRow(field=name, frozen=value, host=seen.value, status=status,
                                source=seen.source))
    return Preflight(kind, tuple(rows))


# Pinned packages that must also import in the server's environment, by their module name.
IMPORTED = {"vllm_ascend": "vllm_ascend", "torch_npu": "torch_npu", "mindiesd": "mindiesd"}


def import_rows(frozen: Mapping[str, str], probes: HostProbes) -> tuple[IdentityRow, ...]:
    """A row per pinned platform or backend package: it must import where the server runs."""
    rows = []
    for name, module in IMPORTED.items():
        if name not in frozen:
            continue
        seen = probes.importable(module)
        status: Status = "match" if seen.value == "importable" else "not found"
        rows.append(IdentityRow(field=f"import {module}", frozen="importable", host=seen.value,
                                status=status, source=seen.source))
    return tuple(rows)


def preflight(campaign: LoadedCampaign, probes: HostProbes | None = None) -> Preflight:
    """Compare the campaign's pin with the host; raises IdentityToolMissing for a missing tool."""
    engine = campaign.model.engine
    probes = probes if probes is not None else HostProbes()
    if probes.vllm_omni_wheel is None and probes.env.get("REF2VA_VLLM_OMNI_WHEEL"):
        probes.vllm_omni_wheel = Path(probes.env["REF2VA_VLLM_OMNI_WHEEL"])
    frozen = flatten_pin(engine.source_pin)
    host = read_host(engine.kind, frozen, probes, campaign.model.devices.visible)
    result = compare(engine.kind, frozen, host)
    result = Preflight(result.kind, result.rows + import_rows(frozen, probes))
    log.info("host identity: %s", "all match" if result.ok else result.detail())
    return result


def identity_checks(result: Preflight, track_ids: Iterable[str]) -> list[CheckResult]:
    """One `host_identity` check per track, on B0 so that it counts for every candidate.

    A field that is not a match makes the run not evaluable (`protocol_deviation`): numbers
    measured on another stack than the frozen one do not belong to this campaign.
    """
    data = {"rows": [row.json_dict() for row in result.rows]}
    if result.ok:
        return [CheckResult(t, ArmRole.B0, Check.HOST_IDENTITY, CheckStatus.PASS, None,
                            f"all {len(result.rows)} pinned fields match the host", data)
                for t in track_ids]
    return [CheckResult(t, ArmRole.B0, Check.HOST_IDENTITY, CheckStatus.FAIL,
                        Reason.PROTOCOL_DEVIATION,
                        "host identity differs from engine.source_pin: " + result.detail(), data)
            for t in track_ids]
