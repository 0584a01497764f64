"""Launch profiles: the YAML file a campaign names to start one engine instance.

The judge parses the same file on its own; this module is the engine's strict reading of it. The
``args`` mapping holds vLLM-Omni flag names without their dashes; :class:`EngineArgs` is the ONE
list of flags this engine accepts, so a later flag (``cache-backend``...) is one field here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.reference.errors import ProfileError

ENGINE_NAME = "reference"


class EngineArgs(BaseModel):
    """Flags of ``vllm serve`` the reference engine understands (the rest are refused)."""

    # strict: a YAML typo such as ``enforce-eager: "yes"`` must fail, not coerce.
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True, frozen=True)

    served_model_name: str = Field("ref2va-reference", alias="served-model-name", min_length=1)
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    enforce_eager: bool = Field(False, alias="enforce-eager")
    # Reference-only: device time declared per denoising step, slept by the synthetic generator so
    # that latency-sensitive scenarios have something to measure.
    step_cost_ms: float = Field(0.0, alias="step-cost-ms", ge=0.0)
    # Reference-only: mixed into every latent seed, so a test can stand up a "different model".
    seed_salt: int = Field(0, alias="seed-salt")
    # Reference-only: one cap for every reference upload, so tests can hit the limit cheaply.
    max_upload_mib: float | None = Field(None, alias="max-upload-mib", gt=0.0)


class LaunchProfile(BaseModel):
    """One launch profile file."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str = Field(min_length=1)
    description: str = ""
    declared: Literal["baseline", "lossless", "lossy"]
    engine: Literal["reference", "vllm-omni"]
    args: EngineArgs = Field(default_factory=lambda: EngineArgs.model_validate({}))
    env: dict[str, str] = Field(default_factory=dict)


def _describe(error: Any) -> str:
    loc = [str(part) for part in error["loc"]]
    if error["type"] == "extra_forbidden":
        if loc[:1] == ["args"] and len(loc) == 2:
            return f"unrecognized engine argument '--{loc[1]}' in args"
        return f"unknown key '{'.'.join(loc)}'"
    where = ".".join(loc) or "<top level>"
    return f"{where}: {error['msg']} (got {error.get('input')!r})"


def load_profile(path: str | Path) -> LaunchProfile:
    """Read and validate a profile meant for THIS engine, or raise :class:`ProfileError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read launch profile: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not valid YAML: {exc}".replace("\n", " ")) from None
    if not isinstance(raw, dict):
        raise ProfileError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    if raw.get("args") is None:
        raw["args"] = {}
    try:
        profile = LaunchProfile.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(_describe(error) for error in exc.errors())
        raise ProfileError(f"{path}: invalid launch profile: {problems}") from None
    if profile.engine != ENGINE_NAME:
        raise ProfileError(
            f"{path}: profile is for engine '{profile.engine}', "
            f"but this is the '{ENGINE_NAME}' engine"
        )
    return profile
