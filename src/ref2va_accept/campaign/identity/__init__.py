"""Host identity: the structured `engine.source_pin` (_pin.py), the parsers (_parsers.py) and probes
(_probes.py) that read it on the host, and the preflight (_host_check.py) that compares the two
before any engine starts.

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

from ref2va_accept.campaign.identity._host_check import (
    compare,
    identity_checks,
    preflight,
)
from ref2va_accept.campaign.identity._parsers import (
    parse_cann_install_info,
    parse_key_values,
    parse_npu_smi_board,
    parse_tool_version,
    vllm_omni_origin,
)
from ref2va_accept.campaign.identity._pin import (
    IdentityToolMissing,
    SourcePin,
    VllmOmniSource,
    flatten_pin,
    pin_violations,
)
from ref2va_accept.campaign.identity._probes import (
    CANN_DEFAULT_ROOTS,
    CANN_ENV_VARS,
    DISTRIBUTIONS,
    TOOL_TIMEOUT_S,
    HostProbes,
    HostValue,
    InstalledMetadata,
    MetadataSource,
    Runner,
    read_host,
    run_tool,
)
from ref2va_accept.evidence import (  # built by compare, import_rows and preflight
    HostIdentity,
    IdentityRow,
)

__all__ = [
    "CANN_DEFAULT_ROOTS",
    "CANN_ENV_VARS",
    "DISTRIBUTIONS",
    "TOOL_TIMEOUT_S",
    "HostIdentity",
    "HostProbes",
    "HostValue",
    "IdentityRow",
    "IdentityToolMissing",
    "InstalledMetadata",
    "MetadataSource",
    "Runner",
    "SourcePin",
    "VllmOmniSource",
    "compare",
    "flatten_pin",
    "identity_checks",
    "parse_cann_install_info",
    "parse_key_values",
    "parse_npu_smi_board",
    "parse_tool_version",
    "pin_violations",
    "preflight",
    "read_host",
    "run_tool",
    "vllm_omni_origin",
]
