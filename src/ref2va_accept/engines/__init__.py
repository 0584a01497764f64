"""Engine instances as processes: the engine kinds, start, health, stop and the cleanup
audit (the evidence's Cleanup, built here), ports and who owns one, leftovers and the reaper,
device probes and the wait for device memory.

The modules are private; the other stages import these names from here.
"""

from ref2va_accept.engines._device_memory import (
    REASON,
    MemoryGuard,
    MemoryRelease,
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
    engine_kind,
)
from ref2va_accept.engines._leftovers import (
    DONE,
    start_reaper,
    stop_leftovers,
    stopped_line,
)
from ref2va_accept.engines._ownership import new_nonce
from ref2va_accept.engines._ports import LOOPBACK, free_port, port_is_free
from ref2va_accept.engines._registry import InstanceRegistry, start_instance
from ref2va_accept.engines._server import EngineInstance, LaunchSpec, engine_environment

__all__ = [
    "DONE",
    "KINDS",
    "LOOPBACK",
    "REASON",
    "REFERENCE",
    "VLLM_OMNI",
    "DeviceProbe",
    "DeviceSnapshot",
    "EngineInstance",
    "InstanceRegistry",
    "LaunchSpec",
    "MemoryGuard",
    "MemoryRelease",
    "NoDeviceProbe",
    "NpuSmiProbe",
    "Release",
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
