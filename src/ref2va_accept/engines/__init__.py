"""Engine instances as processes: the engine kinds, start, health, stop and the cleanup
audit, ports and who owns one, leftovers and the reaper, device probes and the wait
for device memory.

The modules are private; the other stages import these names from here.
"""

from typing import TYPE_CHECKING

from ref2va_accept.core import load_name

if TYPE_CHECKING:
    from ref2va_accept.engines._audit import CleanupAudit, ProcessRecord, StopStep
    from ref2va_accept.engines._device_memory import (
        REASON,
        IdleLevel,
        MemoryGuard,
        MemoryRelease,
        Poll,
        Release,
        read_idle,
        wait_for_release,
    )
    from ref2va_accept.engines._devices import (
        DeviceProbe,
        DeviceSnapshot,
        NoDeviceProbe,
        NpuSmiProbe,
        container_pid_for,
        foreign_processes,
        host_pid,
        parse_npu_smi_info,
        parse_npu_smi_map,
        parse_nvidia_smi,
        probe_for,
        run_command,
    )
    from ref2va_accept.engines._kinds import (
        KINDS,
        REFERENCE,
        VLLM_OMNI,
        EngineKindName,
        engine_kind,
    )
    from ref2va_accept.engines._leftovers import (
        DONE,
        Leftover,
        start_reaper,
        stop_leftovers,
        stopped_line,
    )
    from ref2va_accept.engines._ownership import new_nonce
    from ref2va_accept.engines._ports import LOOPBACK, free_port, port_is_free
    from ref2va_accept.engines._registry import InstanceRegistry, start_instance
    from ref2va_accept.engines._server import EngineInstance, LaunchSpec, engine_environment

# Each name and the private module that defines it, imported when the name is
# first used (core.load_name): a stage loads only what its user needs.
_WHERE = {
    "CleanupAudit": "_audit",
    "DONE": "_leftovers",
    "DeviceProbe": "_devices",
    "DeviceSnapshot": "_devices",
    "EngineInstance": "_server",
    "EngineKindName": "_kinds",
    "IdleLevel": "_device_memory",
    "InstanceRegistry": "_registry",
    "KINDS": "_kinds",
    "LOOPBACK": "_ports",
    "LaunchSpec": "_server",
    "Leftover": "_leftovers",
    "MemoryGuard": "_device_memory",
    "MemoryRelease": "_device_memory",
    "NoDeviceProbe": "_devices",
    "NpuSmiProbe": "_devices",
    "Poll": "_device_memory",
    "ProcessRecord": "_audit",
    "REASON": "_device_memory",
    "REFERENCE": "_kinds",
    "Release": "_device_memory",
    "StopStep": "_audit",
    "VLLM_OMNI": "_kinds",
    "container_pid_for": "_devices",
    "engine_environment": "_server",
    "engine_kind": "_kinds",
    "foreign_processes": "_devices",
    "free_port": "_ports",
    "host_pid": "_devices",
    "new_nonce": "_ownership",
    "parse_npu_smi_info": "_devices",
    "parse_npu_smi_map": "_devices",
    "parse_nvidia_smi": "_devices",
    "port_is_free": "_ports",
    "probe_for": "_devices",
    "read_idle": "_device_memory",
    "run_command": "_devices",
    "start_instance": "_registry",
    "start_reaper": "_leftovers",
    "stop_leftovers": "_leftovers",
    "stopped_line": "_leftovers",
    "wait_for_release": "_device_memory",
}

__all__ = [
    "DONE",
    "KINDS",
    "LOOPBACK",
    "REASON",
    "REFERENCE",
    "VLLM_OMNI",
    "CleanupAudit",
    "DeviceProbe",
    "DeviceSnapshot",
    "EngineInstance",
    "EngineKindName",
    "IdleLevel",
    "InstanceRegistry",
    "LaunchSpec",
    "Leftover",
    "MemoryGuard",
    "MemoryRelease",
    "NoDeviceProbe",
    "NpuSmiProbe",
    "Poll",
    "ProcessRecord",
    "Release",
    "StopStep",
    "container_pid_for",
    "engine_environment",
    "engine_kind",
    "foreign_processes",
    "free_port",
    "host_pid",
    "new_nonce",
    "parse_npu_smi_info",
    "parse_npu_smi_map",
    "parse_nvidia_smi",
    "port_is_free",
    "probe_for",
    "read_idle",
    "run_command",
    "start_instance",
    "start_reaper",
    "stop_leftovers",
    "stopped_line",
    "wait_for_release",
]


def __getattr__(name: str) -> object:
    return load_name(__name__, _WHERE, name)
