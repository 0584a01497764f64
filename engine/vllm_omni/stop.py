"""Stopping a request once its module capture is whole, on every rank, the way upstream stops a
cancelled one.

vLLM-Omni 0.30.0 cancels a diffusion request cooperatively: H3 declares
``supports_request_cancellation``, its denoise loop calls ``check_request_cancellation`` at every
step boundary (``diffusion/models/minimax_h3/denoise_loop.py``), which, once every rank agrees
(an all-reduce), drains the device and raises ``DiffusionRequestAbortedError``; the model runner
catches it around ``pipeline.forward`` and answers ``DiffusionOutput(aborted=True)``
(``diffusion/worker/diffusion_model_runner.py``). A client's abort reaches that flag through the
engine (``DELETE /v1/videos/{id}``); the sync route that the judge uses has no disconnect
watcher, and an abort raised in a worker without the engine's abort leaves the frontend waiting
(``postprocess_output`` re-raises it and the stage process sends no result), so the extension
cannot use the abort's answer.

So a capture with ``stop`` is stopped from inside the workers, every rank deciding alike from
the request itself (no message between ranks): the DiT's forward pre-hook raises upstream's
``DiffusionRequestAbortedError`` when a step after the capture's last one begins (``diffuse``
returning stops a capture of the last step), the encoders' capture stops as ``diffuse`` is
entered; the device is synchronized first, as upstream's check does. The runner catches the
error as it catches a cancel, every rank returns from ``execute_model`` at the same step, and the
extension (:mod:`engine.vllm_omni.extension`) writes ``enabled_path.json`` on the owner and
answers :func:`stopped_output`: an error with the contract's ``CAPTURE_STOPPED_STATUS``, which the
engine carries to the HTTP answer as a client error. Where the error is not caught upstream (a
version whose runner does not), the extension catches it itself. vllm_omni is imported inside
functions: this module imports anywhere.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from engine.module_capture import CaptureRequest
from engine.vllm_omni.enabled_path import dit_modules
from engine.vllm_omni.watch import current_step
from ref2va_contract.diagnostics import CAPTURE_DIT, CAPTURE_STOPPED_STATUS

logger = logging.getLogger(__name__)


class CaptureStopped(RuntimeError):
    """The stop, where vLLM-Omni has no ``DiffusionRequestAbortedError`` to raise."""


def _abort_error() -> type[BaseException]:
    try:
        from vllm_omni.diffusion.data import (  # noqa: PLC0415 - lazy
            DiffusionRequestAbortedError,
        )
    except ImportError:
        return CaptureStopped
    return DiffusionRequestAbortedError  # type: ignore[no-any-return]


def _synchronize() -> None:
    """Drain the device's queued work before unwinding, as upstream's cancellation does."""
    try:
        from vllm_omni.platforms import current_omni_platform  # noqa: PLC0415 - lazy
    except ImportError:
        return
    current_omni_platform.synchronize()


@dataclass
class Stop:
    """One request's stop: where, and whether it fired on this rank."""

    wanted: CaptureRequest
    fired: bool = False
    dit_calls: int = 0  # DiT forwards seen in diffuse (the step where none is published)

    def fire(self) -> None:
        self.fired = True
        _synchronize()
        logger.info("diagnostics: %s", self.wanted.stop_message())
        raise _abort_error()(self.wanted.stop_message())

    def is_mine(self, exc: BaseException) -> bool:
        """Whether ``exc`` is this stop's own error (a fired stop's, not a client's abort)."""
        return self.fired and isinstance(exc, _abort_error())


def stopped_output(stop: Stop) -> Any:
    """What the worker answers for a request it stopped: an error the engine carries to the HTTP
    answer with the contract's status (a 4xx is a client error there), the marker opening it."""
    from vllm_omni.diffusion.data import DiffusionOutput  # noqa: PLC0415 - lazy

    return DiffusionOutput(error=stop.wanted.stop_message(),
                           error_status_code=CAPTURE_STOPPED_STATUS,
                           error_type="CaptureStopped")


@contextmanager
def stopping(pipeline: Any, stop: Stop | None) -> Iterator[None]:
    """Install the stop on this rank's pipeline for one request; removed whatever happens.

    Entered after :func:`engine.vllm_omni.watch.watched` on the owner, so the dump's hook on the
    DiT has written the last step's point, and the capture's hooks its calls, before the stop's
    wrapper and hook run."""
    if stop is None:
        yield
        return
    wanted = stop.wanted
    bound = getattr(pipeline, "diffuse", None)
    had_own = "diffuse" in vars(pipeline)
    own = vars(pipeline).get("diffuse")
    handles: list[Any] = []

    def diffuse(*args: Any, **kwargs: Any) -> Any:
        stop.dit_calls = 0
        if wanted.stage != CAPTURE_DIT:
            stop.fire()  # the encoders ran: stop before the denoise
        assert bound is not None
        result = bound(*args, **kwargs)
        stop.fire()  # the loop ended: the capture's last step was the last one
        return result

    def before_dit(module: Any, args: Any) -> None:
        step = current_step()
        if step is None:
            step = stop.dit_calls
        stop.dit_calls += 1
        if wanted.step is not None and step > wanted.step:
            stop.fire()

    try:
        if bound is not None:
            pipeline.diffuse = diffuse
        if wanted.stage == CAPTURE_DIT:
            for _, module in dit_modules(pipeline):
                handles.append(module.register_forward_pre_hook(before_dit))
        yield
    finally:
        for handle in handles:
            handle.remove()
        if bound is not None:
            if had_own:
                pipeline.diffuse = own
            else:
                delattr(pipeline, "diffuse")
