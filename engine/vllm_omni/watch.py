"""The watched request: wrappers installed on the pipeline instance, removed afterwards.

:func:`watched` wraps the H3 pipeline's stages (:data:`PIPELINE_METHODS`) on the instance and
hooks the DiT's forward for one request, hands each wanted tensor to the :class:`DumpWriter`, and
restores everything, whatever happened. vLLM-Omni's forward context is imported inside
:func:`_current_step`: this module imports on a machine that has no vllm_omni.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from engine.vllm_omni.dump_writer import DumpWriter, RunRecord
from engine.vllm_omni.enabled_path import cache_dit_state, dit_modules
from engine.vllm_omni.request_block import STEP_POINT, step_point

# Keys of the request context that H3's _prepare_encoder_conditioning_inputs returns.
CONDITIONING_KEYS = {
    "cond.text": "text_embeddings",
    "cond.image": "visual_condition",
    "cond.audio": "audio_condition",
}
PIPELINE_METHODS = ("_prepare_encoder_conditioning_inputs", "diffuse", "decode", "decode_to_mp4")


def _current_step() -> int | None:
    from vllm_omni.diffusion.forward_context import (  # noqa: PLC0415 - lazy
        get_forward_context,
        is_forward_context_available,
    )

    if not is_forward_context_available():
        return None
    step = get_forward_context().denoise_step_idx
    return step if isinstance(step, int) else None


@contextmanager
def watched(pipeline: Any, writer: DumpWriter, record: RunRecord) -> Iterator[None]:
    """Install the per-request wrappers and hooks; remove them whatever happens."""
    originals: dict[str, tuple[bool, Any]] = {}
    handles: list[Any] = []
    in_diffuse = [False]

    def wrap(name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        bound = getattr(pipeline, name, None)
        if bound is None:
            return
        originals[name] = (name in vars(pipeline), vars(pipeline).get(name))
        setattr(pipeline, name, make(bound))

    def conditioning(bound: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            context = bound(*args, **kwargs)
            for point, key in CONDITIONING_KEYS.items():
                writer.put(point, context.get(key), absent=f"the request context has no {key}")
            return context
        return wrapper

    def diffuse(bound: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            in_diffuse[0] = True
            try:
                video, audio = bound(*args, **kwargs)
            finally:
                in_diffuse[0] = False
            # Read while the request's Cache-DiT installation is still the live one.
            record.cache_dit = cache_dit_state(pipeline)
            writer.put("latent.video", video)
            writer.put("latent.audio", audio)
            return video, audio
        return wrapper

    def decode(bound: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            video, audio = bound(*args, **kwargs)
            record.decode_path = "decode"
            writer.put("decoded.video", video)
            writer.put("decoded.audio", audio)
            return video, audio
        return wrapper

    def decode_to_mp4(bound: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            record.decode_path = "decode_to_mp4"
            reason = "preencode_mp4: the worker encoded the MP4 without a decoded tensor"
            for point in ("decoded.video", "decoded.audio"):
                if writer.wants(point):
                    writer.missing[point] = reason
            return bound(*args, **kwargs)
        return wrapper

    def on_dit_forward(module: Any, args: Any, output: Any) -> None:
        if not in_diffuse[0]:
            return
        step = _current_step()
        if step is None:
            # Should not happen in 0.30.0 (the loop publishes it); fall back, and say so.
            step, record.step_source = record.dit_calls, "call_count"
        record.dit_calls += 1
        if not isinstance(output, tuple | list) or len(output) != 2:
            writer.failures.append(f"DiT forward at step {step} returned {type(output).__name__}, "
                                   "expected (video, audio)")
            return
        writer.put(step_point(step, "video"), output[0])
        writer.put(step_point(step, "audio"), output[1])

    try:
        wrap("_prepare_encoder_conditioning_inputs", conditioning)
        wrap("diffuse", diffuse)
        wrap("decode", decode)
        wrap("decode_to_mp4", decode_to_mp4)
        points = writer.target.points
        if points is None or any(STEP_POINT.match(point) for point in points):
            for _, module in dit_modules(pipeline):
                handles.append(module.register_forward_hook(on_dit_forward))
        yield
    finally:
        for handle in handles:
            handle.remove()
        for name, (had_own, own) in originals.items():
            if had_own:
                setattr(pipeline, name, own)
            else:
                delattr(pipeline, name)
