"""The watched request: wrappers installed on the pipeline instance, removed afterwards.

:func:`watched` wraps the H3 pipeline's stages (:data:`PIPELINE_METHODS`) on the instance and
hooks the DiT's forward for one request, hands each wanted tensor to the :class:`DumpWriter`, and
restores everything, whatever happened. A request that asks for a module capture
(:mod:`engine.module_capture`) also gets the capture's hooks on the chosen stage's modules for
that request alone, live at its steps (the DiT) or before ``diffuse`` (the encoders).
vLLM-Omni's forward context is imported inside :func:`current_step`: this module imports on a
machine that has no vllm_omni.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from engine.module_capture import (
    CaptureRefused,
    CaptureRequest,
    ModuleCapture,
    chosen,
)
from engine.vllm_omni.dump_writer import DumpWriter, RunRecord
from engine.vllm_omni.enabled_path import cache_dit_state, dit_modules
from engine.vllm_omni.hooks import ENCODER_ROOTS
from engine.vllm_omni.request_block import STEP_POINT, DiagnosticsRefused, step_point
from ref2va_contract.diagnostics import (
    ACCEPTANCE_FIELD,
    CAPTURE_DIT,
    CAPTURE_ENCODERS,
    CAPTURE_KEY,
    CAPTURE_LOG_FILE,
)

# Keys of the request context that H3's _prepare_encoder_conditioning_inputs returns.
CONDITIONING_KEYS = {
    "cond.text": "text_embeddings",
    "cond.image": "visual_condition",
    "cond.audio": "audio_condition",
}
PIPELINE_METHODS = ("_prepare_encoder_conditioning_inputs", "diffuse", "decode", "decode_to_mp4")
# Encoder modules that upstream builds differently per rank: H3 loads its text encoder only on the
# first text_encoder_tp_size ranks and leaves a parameter-free stub on the others, so a path
# inside it cannot be checked alike on every rank. The owner (rank 0, always a loading rank)
# checks it, and a miss fails the request once the pipeline has run everywhere.
OWNER_CHECKED_ENCODERS = ("text_encoder",)


def current_step() -> int | None:
    from vllm_omni.diffusion.forward_context import (  # noqa: PLC0415 - lazy
        get_forward_context,
        is_forward_context_available,
    )

    if not is_forward_context_available():
        return None
    step = get_forward_context().denoise_step_idx
    return step if isinstance(step, int) else None


def _attribute_path(pipeline: Any, path: str) -> Any:
    found = pipeline
    for name in path.split("."):
        found = getattr(found, name, None)
    return found


def capture_roots(pipeline: Any, stage: str) -> list[tuple[str, Any]]:
    """The modules that make a capture stage, by their path from the pipeline: the DiT modules
    H3 built (``transformer``; ``transformers_ref`` only in the combined partition, never under
    ``--task-type ref2va``), or the encoders' :data:`~engine.vllm_omni.hooks.ENCODER_ROOTS`:
    the modules H3's code calls into inside the text encoder and the VAEs (which encode the
    references before ``diffuse``), whose children are the blocks
    (``text_encoder.text_model.layers.N``, ``video_vae.model.encoder``, ...). A root that is
    absent is skipped: the text encoder's stub on a rank that does not load it has neither
    ``vision`` nor ``text_model``."""
    if stage == CAPTURE_DIT:
        return dit_modules(pipeline)
    found = [(path, _attribute_path(pipeline, path)) for path in ENCODER_ROOTS]
    return [(path, module) for path, module in found if hasattr(module, "named_modules")]


def check_capture(wanted: CaptureRequest, pipeline: Any) -> None:
    """On every rank: refuse what no rank could capture, as all ranks do.

    That is a ``within`` path that no module of the stage has, or a module that runs inside a
    compiled one (never on the 910C: vLLM-Omni's NPU platform reports no inductor support, so
    its model runner compiles nothing there; the refusal holds where the runner compiles, on
    CUDA for one). Only the owner builds the capture; the others check here so that a refused
    request fails on every rank before any collective starts.
    """
    if wanted.within is not None and (wanted.stage == CAPTURE_ENCODERS and
                                      wanted.within.split(".")[0] in OWNER_CHECKED_ENCODERS):
        return
    roots = capture_roots(pipeline, wanted.stage)
    try:
        modules = chosen(wanted, roots)
    except CaptureRefused as exc:
        raise DiagnosticsRefused(str(exc)) from None
    compiled = [f"{name}.{path}".rstrip(".") for name, root in roots
                for path, module in root.named_modules() if _compiled(module)]
    for path, _ in modules:
        around = next((c for c in compiled if path.startswith(f"{c}.")), None)
        if around is not None:
            raise DiagnosticsRefused(
                f"extra_params.{ACCEPTANCE_FIELD}.{CAPTURE_KEY}: {path} runs inside {around}, "
                "which this server compiled (torch.compile), so a hook added to it now would "
                "never run; capture at block level or within a module that is not compiled, or "
                "start the server with --enforce-eager")


def _compiled(module: Any) -> bool:
    """Whether torch.compile traced this module's forward when the server set it up.

    Dynamo keeps the graph it traced, without re-checking the hooks of the modules it inlined
    (torch._dynamo.config.skip_nnmodule_hook_guards), so a hook added later inside never runs;
    the module's own hooks, called around its forward, still do. Where the platform supports
    inductor (``supports_torch_inductor``: not the NPU) and ``--enforce-eager`` is off,
    vLLM-Omni's model runner compiles the DiT blocks regionally (``_repeated_blocks``;
    vllm_omni/diffusion/compile.py swaps ``forward``, or ``_omni_original_forward`` under an
    offload hook, for the compiled one) or whole
    (``nn.Module.compile``, which sets ``_compiled_call_impl``).
    """
    if getattr(module, "_compiled_call_impl", None) is not None:
        return True
    return any(hasattr(getattr(module, name, None), "_torchdynamo_orig_callable")
               for name in ("forward", "_omni_original_forward"))


@dataclass
class Phase:
    """Where the watched request is, for the capture: encoding, or inside ``diffuse``."""

    encoding: bool = True  # from the start of the request until diffuse is entered
    in_diffuse: bool = False

    def in_stage(self, wanted: CaptureRequest) -> bool:
        return self.in_diffuse if wanted.stage == CAPTURE_DIT else self.encoding


def _open_capture(pipeline: Any, writer: DumpWriter, phase: Phase) -> ModuleCapture | None:
    """The owner's capture with its hooks installed, or None (a failure is held in the writer).

    A raise here, on the owner alone, would leave the other ranks waiting in a collective: a
    ``within`` path only the owner could check, or a log that cannot be opened, fails the request
    after the pipeline instead, the way a point that cannot be written does.
    """
    wanted = writer.target.capture
    if wanted is None:
        return None
    try:
        capture = ModuleCapture.for_stage(wanted, writer.target.folder,
                                          capture_roots(pipeline, wanted.stage),
                                          lambda: phase.in_stage(wanted), current_step)
    except CaptureRefused as exc:
        writer.failures.append(str(exc))
        return None
    try:
        capture.install()
    except OSError as exc:
        capture.remove()
        writer.failures.append(f"capture: cannot open {CAPTURE_LOG_FILE} in "
                               f"{writer.target.folder}: {exc.strerror or exc}")
        return None
    return capture


@contextmanager
def watched(pipeline: Any, writer: DumpWriter, record: RunRecord
            ) -> Iterator[ModuleCapture | None]:
    """Install the per-request wrappers and hooks; remove them whatever happens.

    Yields the request's module capture (hooks installed, removed on exit), or None.
    """
    originals: dict[str, tuple[bool, Any]] = {}
    handles: list[Any] = []
    phase = Phase()
    capture: ModuleCapture | None = None

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
            phase.encoding = False
            phase.in_diffuse = True
            try:
                video, audio = bound(*args, **kwargs)
            finally:
                phase.in_diffuse = False
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
        if not phase.in_diffuse:
            return
        step = current_step()
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
        capture = _open_capture(pipeline, writer, phase)
        yield capture
    finally:
        if capture is not None:
            capture.remove()
        for handle in handles:
            handle.remove()
        for name, (had_own, own) in originals.items():
            if had_own:
                setattr(pipeline, name, own)
            else:
                delattr(pipeline, name)
