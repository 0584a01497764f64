"""The names of the reference engine's deliberate faults (:mod:`.faults` acts on them).

A leaf module: the launch-profile schema refuses an unknown ``fault:`` with these names, and
importing it pulls in nothing of the engine.
"""

from __future__ import annotations

FAULT_ENV = "REF2VA_REFERENCE_FAULT"

# Faults that strike during denoising, at ``fault-at-step`` (default: the middle step).
STEP_FAULTS = frozenset({"crash", "hang", "http_500"})
# Faults that change what the generator hands back.
MEDIA_FAULTS = frozenset({"wrong_frame_count", "missing_audio", "nondeterministic"})
# Faults that damage the MP4 on its way out.
WIRE_FAULTS = frozenset({"truncated_body", "corrupt_mp4"})
# Faults that leave processes or sockets behind.
PROCESS_FAULTS = frozenset({"worker_ignores_sigterm", "port_held_after_exit"})
# A collective the device's communication library refuses, struck only where the request runs
# the path that calls it: Cache-DiT averages its caching decision across the sequence-parallel
# ranks (all_reduce with ReduceOp.AVG), which HCCL on Ascend has been reported to lack; a request
# with quality=lossless installs no cache and never calls it.
COLLECTIVE_FAULTS = frozenset({"collective_avg_unsupported"})
# The localization capture's hooks are installed but never see a call of their stage, as on a
# real server whose model calls the hooked modules some way their forward hooks do not fire: the
# capture reports the modules it hooked and zero calls, and writes an empty log.
CAPTURE_FAULTS = frozenset({"capture_hooks_off"})
FAULT_NAMES = frozenset(STEP_FAULTS | MEDIA_FAULTS | WIRE_FAULTS | PROCESS_FAULTS
                        | COLLECTIVE_FAULTS | CAPTURE_FAULTS)


def unknown_fault_message(name: str) -> str:
    return f"unknown fault {name!r}; known faults: {', '.join(sorted(FAULT_NAMES))}"
