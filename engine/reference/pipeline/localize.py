"""The reference engine's side of the localization pass: which modules make a stage, the
request's module capture (:mod:`engine.module_capture`), the stop once a capture is whole, and a
planted divergence for tests.

A capture with ``stop`` ends its generation the way a cancelled one ends: at a step boundary, out
of the monitor's ``step_done`` (:class:`StopWhenWhole`, after the capture's last step; the
encoders' capture stops before the denoise). The generator then writes ``enabled_path.json``,
its capture report saying where it stopped, and raises
:class:`~engine.reference.errors.CaptureStopped`, which the routes answer with the contract's
``CAPTURE_STOPPED_STATUS``.

The ``capture_hooks_off`` fault (:mod:`engine.reference.faults`) keeps the capture's hooks from
ever seeing their stage: the engine reports its capture with its modules hooked and zero calls,
as a real server whose hooks never fire would.

Module paths are the model's own (``dit.blocks.0.fc2``, ``text_encoder.layers.1.qkv``): the
ReferenceModel's attribute names, as ``named_modules`` gives them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from engine.module_capture import (
    CaptureRefused,
    ModuleCapture,
    parse_capture,
    refuse_points_after_stop,
)
from engine.reference.errors import ProfileError, bad_request
from engine.reference.generator import StepMonitor
from engine.reference.pipeline.model import ReferenceModel
from ref2va_contract.diagnostics import ACCEPTANCE_FIELD, CAPTURE_DIT

logger = logging.getLogger(__name__)

ENCODER_ROOTS = ("text_encoder", "image_encoder", "audio_encoder")
# One part in 2**12: far above any rounding, far below anything that breaks the output.
PLANTED_SCALE = 1.0 + 2.0**-12


def stage_roots(model: ReferenceModel, stage: str) -> list[tuple[str, nn.Module]]:
    if stage == CAPTURE_DIT:
        return [("dit", model.dit)]
    return [(name, getattr(model, name)) for name in ENCODER_ROOTS]


class Phase:
    """Where the request is, for the capture: encoding, or the DiT at a step."""

    def __init__(self, model: ReferenceModel) -> None:
        self.model = model
        self.encoding = False

    def in_stage(self, stage: str) -> bool:
        if stage == CAPTURE_DIT:
            return self.model.dit.current_step is not None
        return self.encoding

    def step(self) -> int | None:
        return self.model.dit.current_step


def open_capture(
    model: ReferenceModel, phase: Phase, target: tuple[Path, frozenset[str]] | None,
    extra_params: Mapping[str, Any], steps: int, *, hooks_off: bool = False,
) -> ModuleCapture | None:
    """The request's capture, hooks not yet installed, or None; a 400 for a block it cannot
    honour. ``target``: the acceptance block as parse_request read it (None: no block).
    ``hooks_off`` (the ``capture_hooks_off`` fault): the hooks are installed but never see their
    stage running, so the capture reports the modules it hooked and no call."""
    if target is None:
        return None
    try:
        request = parse_capture(extra_params[ACCEPTANCE_FIELD], steps)
        if request is None:
            return None
        refuse_points_after_stop(request, target[1])
        capture = ModuleCapture.for_stage(
            request, target[0], stage_roots(model, request.stage),
            lambda: not hooks_off and phase.in_stage(request.stage), phase.step)
    except CaptureRefused as exc:
        raise bad_request(str(exc)) from None
    return capture


class CaptureWhole(Exception):
    """Raised by :class:`StopWhenWhole` after the capture's last step: caught by the generator."""


class StopWhenWhole:
    """The generation's monitor for a capture that stops: after the step that completes the
    capture, ``step_done`` raises (where a cancelled generation's raises), once the monitor it
    wraps has had its say (a real cancel still wins)."""

    def __init__(self, monitor: StepMonitor, last_step: int) -> None:
        self.monitor, self.last_step = monitor, last_step

    def step_done(self, step: int, total: int) -> None:
        self.monitor.step_done(step, total)
        if step - 1 >= self.last_step:  # step_done counts from 1
            raise CaptureWhole

    def idle(self, seconds: float) -> None:
        self.monitor.idle(seconds)


def plant_divergence(model: ReferenceModel, spec: str | None) -> None:
    """Nudge one module's output (``MODULE@STEP`` or ``MODULE``): a divergence at a known place."""
    if spec is None:
        return
    path, _, at = spec.partition("@")
    step = int(at) if at else None
    modules = dict(model.named_modules())
    if path not in modules or not path:
        raise ProfileError(f"plant-divergence: no module {path!r} in the reference model")

    def nudge(module: nn.Module, args: Any, output: Any) -> Any:
        if step is not None and model.dit.current_step != step:
            return None
        if isinstance(output, torch.Tensor) and output.is_floating_point():
            return output * PLANTED_SCALE
        return None

    modules[path].register_forward_hook(nudge)
    logger.warning("plant-divergence: %s's output is nudged by 2**-12 %s", path,
                   f"at step {step}" if step is not None else "at every call")
