"""The structured `engine.source_pin`: its model, the rules per engine kind, its flat form."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from ref2va_accept.core import Ref2VAError, is_placeholder
from ref2va_accept.engines import KINDS, REFERENCE

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")

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
