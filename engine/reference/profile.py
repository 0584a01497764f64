"""Launch profiles: the YAML file a campaign names to start one engine instance.

The judge parses the same file on its own; this module is the engine's strict reading of it. The
``args`` mapping holds vLLM-Omni flag names without their dashes; :class:`EngineArgs` is the ONE
list of flags this engine accepts, so a later flag (``cache-backend``...) is one field here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.reference.constants import DIT_BLOCKS
from engine.reference.errors import ProfileError
from engine.reference.fault_names import FAULT_NAMES, unknown_fault_message
from engine.reference.profiler_config import check_profiler_config
from ref2va_contract.launch import ENGINE_KINDS, REFERENCE_ENGINE

ENGINE_NAME = REFERENCE_ENGINE


class CacheDitConfig(BaseModel):
    """``--cache-config`` for ``cache_dit``: Cache-DiT's DBCache keys, with its defaults."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    Fn_compute_blocks: int = Field(1, ge=1, le=DIT_BLOCKS)
    Bn_compute_blocks: int = Field(0, ge=0, le=DIT_BLOCKS)
    max_warmup_steps: int = Field(4, ge=0)
    residual_diff_threshold: float = Field(0.04, ge=0.0)
    max_continuous_cached_steps: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _leaves_middle_blocks(self) -> CacheDitConfig:
        if self.Fn_compute_blocks + self.Bn_compute_blocks >= DIT_BLOCKS:
            raise ValueError(
                f"Fn_compute_blocks + Bn_compute_blocks must leave a middle block to cache "
                f"(the reference DiT has {DIT_BLOCKS} blocks), got "
                f"{self.Fn_compute_blocks} + {self.Bn_compute_blocks}"
            )
        return self


class KvOffloadConfig(BaseModel):
    """``--kv-offload-config``: H3's cross-step reference K/V reuse (host tiers not modelled)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    mode: Literal["tier1", "tier2"] = "tier1"
    # 1 recomputes every step (exact); 0 populates once per request; N > 1 refreshes every N steps.
    kv_refresh_interval: int = Field(1, ge=0)
    kv_host_quantization: Literal["none"] = "none"  # fp8/int8 host copies are not implemented
    skip_reference_projection: Literal[False] = False  # not implemented; refused when true


class CostModel(BaseModel):
    """Declared device time per unit of work actually computed, slept once per denoising step.

    Units: ``block_ms`` per DiT block per pass per step; ``text_kv_ms`` per cross-attention K/V
    projection (one per block per pass when computed); ``ref_kv_ms`` per reference K/V projection
    (one per block per step when computed); ``step_ms`` per step whatever ran (the old
    ``step-cost-ms``); ``decode_ms_per_frame`` per output frame, charged once at decode.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    block_ms: float = Field(0.0, ge=0.0)
    text_kv_ms: float = Field(0.0, ge=0.0)
    ref_kv_ms: float = Field(0.0, ge=0.0)
    step_ms: float = Field(0.0, ge=0.0)
    decode_ms_per_frame: float = Field(0.0, ge=0.0)


class EngineArgs(BaseModel):
    """Flags of ``vllm serve`` the reference engine understands (the rest are refused)."""

    # strict: a YAML typo such as ``enforce-eager: "yes"`` must fail, not coerce.
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True, frozen=True)

    served_model_name: str = Field("ref2va-reference", alias="served-model-name", min_length=1)
    # "auto" is float32 here (the real server's auto is bf16); bfloat16 is the reduced-precision
    # candidate and is reported as an approximate path.
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    # Compile is not implemented: eager always runs, and enabled_path.json says "eager".
    enforce_eager: bool = Field(False, alias="enforce-eager")
    # "auto" takes CUDA or an NPU when torch sees one; noise is drawn on the CPU either way.
    device: Literal["cpu", "auto", "cuda", "npu"] = "cpu"
    cache_backend: Literal["none", "cache_dit"] = Field("none", alias="cache-backend")
    cache_config: CacheDitConfig | None = Field(None, alias="cache-config")
    kv_offload_config: KvOffloadConfig | None = Field(None, alias="kv-offload-config")
    # Reference-only, LOSSLESS: text/ref-audio cross-attention K/V computed once per request.
    text_kv_precompute: bool = Field(False, alias="text-kv-precompute")
    # Reference-only: "split_k" splits one projection's reduction in two halves (not bit-exact).
    reduction_order: Literal["standard", "split_k"] = Field("standard", alias="reduction-order")
    # Reference-only, LOSSY: decode every N-th latent frame and hold it for the next N-1, a
    # cheaper decode that loses motion (a stride at least the clip's latent frame count holds
    # the first one: a still video). quality=lossless turns it off.
    latent_frame_stride: int | None = Field(None, alias="latent-frame-stride", ge=2)
    # Reference-only: declared device time (see CostModel); unset falls back to the
    # REF2VA_REFERENCE_COST_MODEL environment variable, then to zeros.
    cost_model: CostModel | None = Field(None, alias="cost-model")
    # Reference-only: shorthand for ``cost-model: {step_ms: N}``, kept for existing profiles.
    step_cost_ms: float = Field(0.0, alias="step-cost-ms", ge=0.0)
    # Reference-only: torch intra-op threads; bit-exactness is promised per thread count.
    torch_threads: int = Field(1, alias="torch-threads", ge=1, le=256)
    # Reference-only: mixed into every latent seed, so a test can stand up a "different model".
    seed_salt: int = Field(0, alias="seed-salt")
    # Reference-only: one cap for every reference upload, so tests can hit the limit cheaply.
    max_upload_mib: float | None = Field(None, alias="max-upload-mib", gt=0.0)
    # vLLM-Omni's flag, reported only: this engine runs its text encoder in one process whatever
    # it says, and enabled_path.json names the size it was launched with (None: not given).
    text_encoder_tp_size: int | None = Field(None, alias="text-encoder-tp-size", ge=1)

    @model_validator(mode="after")
    def _cache_config_needs_cache_dit(self) -> EngineArgs:
        if self.cache_config is not None and self.cache_backend != "cache_dit":
            raise ValueError("cache-config is given but cache-backend is not cache_dit")
        return self

    # --- Profiling and fault injection ---------------------------------------------------------
    # Kept together at the end; profiler_config.py and fault_names.py own their meaning.
    # vLLM's ``--profiler-config``: its ProfilerConfig keys (profiler, torch_profiler_dir, ...);
    # with a profiler set, /start_profile and /stop_profile exist.
    profiler_config: dict[str, Any] | None = Field(None, alias="profiler-config")
    # vLLM-Omni's flag: per-stage seconds in X-Stage-Durations and the job's stage_durations.
    enable_diffusion_pipeline_profiler: bool = Field(
        False, alias="enable-diffusion-pipeline-profiler"
    )
    # Reference-only: a deliberate fault, for testing the judge (names in fault_names).
    fault: str | None = None
    # Reference-only: the denoising step crash/hang/http_500 strike at (default: the middle one).
    fault_at_step: int | None = Field(None, alias="fault-at-step", ge=1)
    # Reference-only, for testing the localization pass: one module's output nudged by one part
    # in 2**12, as ``MODULE@STEP`` (a DiT module at that denoising step, e.g.
    # ``dit.blocks.2.cross_q@3``) or ``MODULE`` (every call: an encoder module).
    plant_divergence: str | None = Field(
        None, alias="plant-divergence", pattern=r"^[A-Za-z_][\w.]*(@\d+)?$"
    )

    @model_validator(mode="after")
    def _known_profiler_config_and_fault(self) -> EngineArgs:
        check_profiler_config(self.profiler_config)
        if self.fault is not None and self.fault not in FAULT_NAMES:
            raise ValueError(unknown_fault_message(self.fault))
        return self


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


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, line: int, first: int) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key, self.line, self.first = key, line, first


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that repeats a key (PyYAML keeps the last one)."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        line = key_node.start_mark.line + 1
        try:
            if key in seen:
                raise _DuplicateKey(key, line, seen[key])
            seen[key] = line
        except TypeError:  # an unhashable key: construct_mapping names it
            continue
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def read_profile_yaml(path: str | Path) -> dict[str, Any]:
    """A launch profile file's top-level mapping, for any engine kind, or :class:`ProfileError`.

    Stricter than ``yaml.safe_load``: a repeated key is refused (``FILE:LINE: duplicate key 'KEY'``)
    instead of silently keeping the last value, as the judge's own reading refuses it.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read launch profile: {exc.strerror}") from None
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: no object tags
    except _DuplicateKey as exc:
        raise ProfileError(
            f"{path}:{exc.line}: duplicate key {exc.key!r} (first at line {exc.first})"
        ) from None
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not valid YAML: {exc}".replace("\n", " ")) from None
    if not isinstance(raw, dict):
        raise ProfileError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    return raw


def load_profile(path: str | Path) -> LaunchProfile:
    """Read and validate a profile meant for THIS engine, or raise :class:`ProfileError`."""
    path = Path(path)
    raw = read_profile_yaml(path)
    kind = raw.get("engine")
    if kind != ENGINE_NAME and kind in ENGINE_KINDS:
        # Another engine's profile: its args are that engine's flags, not this one's to judge.
        raise ProfileError(
            f"{path}: profile is for engine '{kind}', but this is the '{ENGINE_NAME}' engine"
        )
    if raw.get("args") is None:
        raw["args"] = {}
    try:
        return LaunchProfile.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(_describe(error) for error in exc.errors())
        raise ProfileError(f"{path}: invalid launch profile: {problems}") from None
