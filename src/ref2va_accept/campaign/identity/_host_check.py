"""The preflight: the pin compared with the host field by field, and its checks per track."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ref2va_accept.core import ArmRole, Check, CheckStatus, Reason, is_placeholder
from ref2va_accept.evidence import (
    AnyCheck,
    EngineKindName,
    HostIdentity,
    IdentityRow,
    IdentityStatus,
    new_check,
)

if TYPE_CHECKING:
    from ref2va_accept.campaign._loaded import LoadedCampaign

from ref2va_accept.campaign.identity._pin import flatten_pin
from ref2va_accept.campaign.identity._probes import HostProbes, HostValue, read_host

log = logging.getLogger(__name__)

def identity(kind: EngineKindName, rows: Iterable[IdentityRow]) -> HostIdentity:
    """The preflight's result as the evidence's `host_identity` records it: ok when every row
    is a match."""
    rows = list(rows)
    return HostIdentity(engine_kind=kind, ok=all(row.status == "match" for row in rows),
                        rows=rows)


def compare(kind: EngineKindName, frozen: Mapping[str, str], host: Mapping[str, HostValue]
            ) -> HostIdentity:
    rows: list[IdentityRow] = []
    for name, value in frozen.items():
        seen = host.get(name, HostValue(None, "no probe"))
        status: IdentityStatus
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
    return identity(kind, rows)


# Pinned packages that must also import in the server's environment, by their module name.
IMPORTED = {"vllm_ascend": "vllm_ascend", "torch_npu": "torch_npu", "mindiesd": "mindiesd"}


def import_rows(frozen: Mapping[str, str], probes: HostProbes) -> tuple[IdentityRow, ...]:
    """A row per pinned platform or backend package: it must import where the server runs."""
    rows = []
    for name, module in IMPORTED.items():
        if name not in frozen:
            continue
        seen = probes.importable(module)
        status: IdentityStatus = "match" if seen.value == "importable" else "not found"
        rows.append(IdentityRow(field=f"import {module}", frozen="importable", host=seen.value,
                                status=status, source=seen.source))
    return tuple(rows)


def preflight(campaign: LoadedCampaign, probes: HostProbes | None = None) -> HostIdentity:
    """Compare the campaign's pin with the host; raises IdentityToolMissing for a missing tool."""
    engine = campaign.model.engine
    probes = probes if probes is not None else HostProbes()
    if probes.vllm_omni_wheel is None and probes.env.get("REF2VA_VLLM_OMNI_WHEEL"):
        probes.vllm_omni_wheel = Path(probes.env["REF2VA_VLLM_OMNI_WHEEL"])
    frozen = flatten_pin(engine.source_pin)
    host = read_host(engine.kind, frozen, probes, campaign.model.devices.visible)
    result = compare(engine.kind, frozen, host)
    result = identity(result.engine_kind, [*result.rows, *import_rows(frozen, probes)])
    log.info("host identity: %s", "all match" if result.ok else result.detail())
    return result


def identity_checks(result: HostIdentity, track_ids: Iterable[str]) -> list[AnyCheck]:
    """One `host_identity` check per track, on B0 so that it counts for every candidate.

    A field that is not a match makes the run not evaluable (`protocol_deviation`): numbers
    measured on another stack than the frozen one do not belong to this campaign.
    """
    data = {"rows": [row.json_dict() for row in result.rows]}
    if result.ok:
        return [new_check(t, ArmRole.B0, Check.HOST_IDENTITY, CheckStatus.PASS, None,
                          f"all {len(result.rows)} pinned fields match the host", data)
                for t in track_ids]
    return [new_check(t, ArmRole.B0, Check.HOST_IDENTITY, CheckStatus.FAIL,
                      Reason.PROTOCOL_DEVIATION,
                      "host identity differs from engine.source_pin: " + result.detail(), data)
            for t in track_ids]
