"""``enabled_path.json``: what the worker really ran for one watched request.

Also :func:`dit_modules`, the pipeline's DiT modules, which the per-request hooks
(:mod:`engine.vllm_omni.watch`) read as well. ``cache_dit`` and vLLM-Omni's attention layer are
imported inside functions: this module imports on a machine that has neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.vllm_omni.dump_writer import DumpWriter, RunRecord
from engine.vllm_omni.hooks import CACHE_DIT_TARGETS_ATTRIBUTE
from ref2va_contract.diagnostics import (
    APPROXIMATE_KEY,
    CACHE_DIT_PATH,
    CACHE_KEY,
    DTYPE_KEY,
    POINTS_WRITTEN_KEY,
    REFERENCE_KV_KEY,
    REUSED_STEPS_KEY,
    TEXT_ENCODER_TP_KEY,
)
from ref2va_contract.launch import VLLM_OMNI_ENGINE

# Attention backends whose output is not the dense attention's (sparse, quantized or gated):
# an enabled path that ran one of them is approximate.
APPROXIMATE_ATTENTION = frozenset(
    {"SAGE_ATTN", "SAGE_ATTN_3", "FASTVIDEO_VSA", "RAINFUSION_ATTN", "TRTLLM_ATTN"}
)


def dit_modules(pipeline: Any) -> list[tuple[str, Any]]:
    names = getattr(pipeline, "_dit_modules", None) or ["transformer"]
    found: list[tuple[str, Any]] = []
    for name in dict.fromkeys(names):
        module = getattr(pipeline, name, None)
        if module is not None and hasattr(module, "register_forward_hook"):
            found.append((name, module))
    return found


def cache_dit_state(pipeline: Any) -> dict[str, Any]:
    """Cache-DiT for this request: installed or not, its key, and the steps served from cache."""
    runtime = getattr(pipeline, "_cache_dit_runtime", None)
    test = getattr(pipeline, "is_cache_dit_enabled", None)
    enabled = bool(test()) if callable(test) else bool(getattr(runtime, "is_enabled", False))
    state: dict[str, Any] = {
        "enabled": enabled,
        "installation_key": getattr(runtime, "_installation_key", None) if enabled else None,
        "targets": [],
        "reused_steps": [],
    }
    if not enabled:
        return state
    targets = getattr(pipeline, CACHE_DIT_TARGETS_ATTRIBUTE, None)
    if targets is None:
        targets = tuple(module for _, module in dit_modules(pipeline))
    reused: set[int] = set()
    try:
        import cache_dit  # noqa: PLC0415 - lazy: see module doc

        for index, target in enumerate(targets):
            stats = cache_dit.summary(target, details=False, logging=False)
            blocks: list[dict[str, Any]] = [
                {"cached_steps": sorted(int(s) for s in (getattr(s, "cached_steps", None) or [])),
                 "accumulated_cached_steps": int(getattr(s, "accumulated_cached_steps", 0) or 0)}
                for s in stats
            ]
            for block in blocks:
                reused.update(block["cached_steps"])
            state["targets"].append({"target": index, "type": type(target).__name__,
                                     "blocks": blocks})
    except Exception as exc:  # the cache stays flagged; the gap is reported
        state["summary_error"] = f"{type(exc).__name__}: {exc}"
    state["reused_steps"] = sorted(reused)
    return state


def _name(value: Any) -> str | None:
    if value is None:
        return None
    return str(value).removeprefix("torch.")


def _attention_layers(pipeline: Any) -> dict[str, str]:
    """Backend name of every attention layer of the DiT modules, by module path."""
    layers: dict[str, str] = {}
    try:
        from vllm_omni.diffusion.attention.layer import Attention  # noqa: PLC0415 - lazy
    except ImportError:
        return layers
    for prefix, dit in dit_modules(pipeline):
        for path, module in dit.named_modules():
            if not isinstance(module, Attention):
                continue
            backend = getattr(module, "attn_backend", None)
            if backend is not None and hasattr(backend, "get_name"):
                layers[f"{prefix}.{path}"] = str(backend.get_name())
            else:
                custom = type(getattr(module, "attention", None)).__name__
                layers[f"{prefix}.{path}"] = f"custom:{custom}"
    return layers


def _plain(value: Any) -> Any:
    """A JSON-friendly copy of a config value (dataclass, dict, enum, dtype, ...)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    fields = getattr(value, "__dataclass_fields__", None)
    if fields is not None:
        return {name: _plain(getattr(value, name, None)) for name in fields}
    return str(value)


def text_encoder_tp_size(od_config: Any) -> int | None:
    """The text encoder's tensor-parallel size the server was configured with (the diffusion
    config's parallel_config.text_encoder_tp_size, set by --text-encoder-tp-size); None when it
    cannot be read."""
    value = getattr(getattr(od_config, "parallel_config", None), "text_encoder_tp_size", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def enabled_path(req: Any, od_config: Any, pipeline: Any, runner: Any, writer: DumpWriter,
                 record: RunRecord) -> dict[str, Any]:
    """The report the judge audits; key names and meanings follow the reference engine's."""
    sampling = getattr(req, "sampling_params", None)
    cache = record.cache_dit or cache_dit_state(pipeline)
    runner_cache = getattr(runner, "cache_backend", None)
    runner_cache_on = bool(runner_cache is not None and getattr(runner_cache, "is_enabled",
                                                                lambda: False)())
    attention = _attention_layers(pipeline)
    kv_dtype = getattr(od_config, "diffusion_kv_cache_dtype", None)
    quantization = getattr(od_config, "quantization_config", None)
    approximate: list[str] = []
    if cache["enabled"]:
        approximate.append(CACHE_DIT_PATH)
    if runner_cache_on:
        approximate.append(f"cache:{type(runner_cache).__name__}")
    if kv_dtype not in (None, "auto"):
        approximate.append("kv_cache_quantization")
    if quantization is not None:
        approximate.append("quantization")
    approximate += [f"attention:{name}" for name in sorted(set(attention.values()))
                    if name in APPROXIMATE_ATTENTION]
    backend = (CACHE_DIT_PATH if cache["enabled"]
               else type(runner_cache).__name__ if runner_cache_on else "none")
    adaln = [name for name, module in dit_modules(pipeline)
             if getattr(module, "adaln_cache", None) is not None]
    return {
        "engine": VLLM_OMNI_ENGINE,
        "request_id": getattr(req, "request_id", None),
        "pipeline": type(pipeline).__name__,
        DTYPE_KEY: _name(getattr(od_config, "dtype", None)),
        "quality": getattr(sampling, "quality", None),
        "attention": "+".join(sorted(set(attention.values()))) or "unknown",
        "attention_layers": attention,
        "kv_cache_dtype": kv_dtype,
        "quantization": _plain(quantization),
        "compile": "eager" if getattr(od_config, "enforce_eager", False) else "default",
        TEXT_ENCODER_TP_KEY: text_encoder_tp_size(od_config),
        "fa_deterministic": getattr(od_config, "fa_deterministic", None),
        "offload": {
            "cpu_offload": getattr(od_config, "enable_cpu_offload", None),
            "layerwise_offload": getattr(od_config, "enable_layerwise_offload", None),
            "distributed_layerwise_offload": getattr(
                od_config, "enable_distributed_layerwise_offload", None),
            "diffusion_offload_config": _plain(getattr(od_config, "diffusion_offload_config",
                                                       None)),
        },
        CACHE_KEY: {
            "backend": backend,
            "configured_backend": getattr(od_config, "cache_backend", None),
            "runner_backend": type(runner_cache).__name__ if runner_cache is not None else None,
            "runner_backend_enabled": runner_cache_on,
            "cache_dit": cache,
            # Steps the DiT output was served from cache (the judge's audit reads this key).
            REUSED_STEPS_KEY: cache["reused_steps"],
        },
        # vLLM-Omni 0.30.0 has no cross-step reference K/V reuse: every step recomputes it.
        REFERENCE_KV_KEY: {"mode": "recompute", REUSED_STEPS_KEY: []},
        # Exact memoisation, recorded and not flagged.
        "memoisation": {
            "adaln_cache": adaln,
            "prompt_embed_cache": getattr(runner, "prompt_embed_cache", None) is not None,
        },
        APPROXIMATE_KEY: approximate,
        "dit_forwards": record.dit_calls,
        "step_index_source": record.step_source,
        "decode_path": record.decode_path,
        POINTS_WRITTEN_KEY: list(writer.written),
        "points_missing": dict(sorted(writer.missing.items())),
        "dump_bytes": writer.bytes,
    }
