"""The engine kinds the judge can start, one object each, holding everything that differs.

A campaign's ``engine.kind`` names one (``reference``: the CI engine in ``engine/reference/``;
``vllm-omni``: the real server). Callers ask :func:`engine_kind` for it instead of comparing the
name: how its command line is built, the command it runs when the campaign names none, the
environment it needs by default, which ``source_pin`` fields pin it (and how a pin is written, for
the message naming a bad one), and whether the server-side request bounds of vLLM-Omni apply.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from ref2va_contract.launch import ENGINE_KINDS, REFERENCE_ENGINE, VLLM_OMNI_ENGINE


@dataclass(frozen=True)
class EngineKind:
    """What one engine kind needs from the judge."""

    name: str
    # `engine.source_pin` fields this kind requires, in the order the preflight lists them.
    pin_fields: tuple[str, ...]
    # How a pin for this kind is written, shown when a campaign gives something else.
    pin_form: str
    # Set in every instance's environment unless the campaign or the profile sets them.
    env_defaults: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Whether the server enforces its own request time bounds (VLLM_OMNI_DLO_DP_WAVE_TIMEOUT,
    # VLLM_OMNI_VIDEO_SYNC_TIMEOUT) that the campaign's timeouts must stay under.
    server_side_timeouts: bool = False
    # Whether the server echoes the judge's per-instance nonce (INSTANCE_NONCE_HEADER); the real
    # vLLM-Omni server does not, so for it only the listening socket's owner is checked.
    echoes_nonce: bool = False

    def default_command(self) -> list[str]:
        """The executable prefix when the campaign names none (kept out of the frozen file)."""
        raise NotImplementedError

    def argv(self, command: Sequence[str], model: str, profile_path: Path,
             profile_flags: Sequence[str], host: str, port: int,
             extra: Sequence[str] = ()) -> tuple[str, ...]:
        """The engine's command line for one arm; ``extra`` flags last (both kinds take
        ``--profiler-config JSON``, which the profiling scenario adds)."""
        raise NotImplementedError


@dataclass(frozen=True)
class _Reference(EngineKind):
    def default_command(self) -> list[str]:
        return [sys.executable, "-m", "engine.reference"]

    def argv(self, command: Sequence[str], model: str, profile_path: Path,
             profile_flags: Sequence[str], host: str, port: int,
             extra: Sequence[str] = ()) -> tuple[str, ...]:
        # The reference engine reads the same profile file; its args are not repeated as flags.
        return (*command, "serve", "--config", str(profile_path), "--host", host, "--port",
                str(port), *extra)


@dataclass(frozen=True)
class _VllmOmni(EngineKind):
    def default_command(self) -> list[str]:
        return ["vllm"]

    def argv(self, command: Sequence[str], model: str, profile_path: Path,
             profile_flags: Sequence[str], host: str, port: int,
             extra: Sequence[str] = ()) -> tuple[str, ...]:
        return (*command, "serve", model, "--omni", "--host", host, "--port", str(port),
                *profile_flags, *extra)


REFERENCE: EngineKind = _Reference(
    name=REFERENCE_ENGINE,
    # The reference engine muxes through PyAV and the FFmpeg libraries PyAV links.
    pin_fields=("python", "torch", "av", "av_ffmpeg"),
    pin_form="source_pin: {python: '3.11.7', torch: ..., av: ..., av_ffmpeg: ...}",
    echoes_nonce=True,
)

VLLM_OMNI: EngineKind = _VllmOmni(
    name=VLLM_OMNI_ENGINE,
    pin_fields=("vllm_omni", "vllm", "vllm_ascend", "torch", "torch_npu", "cann", "mindiesd",
                "npu_driver", "npu_firmware", "ffmpeg", "ffprobe", "python"),
    pin_form=(
        "source_pin: {vllm_omni: {version: '0.30.0', wheel_sha256: <64 hex> | source_commit: "
        "<git sha>}, vllm: ..., vllm_ascend: ..., torch: ..., torch_npu: ..., cann: ..., "
        "mindiesd: ..., npu_driver: ..., npu_firmware: ..., ffmpeg: ..., ffprobe: ..., "
        "python: ...} (each a version string or a <FILL: ...>)"),
    # Upstream's own tests launch the server this way; fork breaks NPU/CUDA workers.
    env_defaults=MappingProxyType({"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}),
    server_side_timeouts=True,
)

KINDS: Mapping[str, EngineKind] = MappingProxyType({k.name: k for k in (REFERENCE, VLLM_OMNI)})
assert tuple(KINDS) == ENGINE_KINDS, "every kind of the contract has one adapter"


def engine_kind(name: str) -> EngineKind:
    """The adapter of an engine kind; ValueError naming the known ones for any other name."""
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown engine kind {name!r} (known: {', '.join(KINDS)})") from None
