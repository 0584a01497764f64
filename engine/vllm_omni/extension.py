"""Request-owned comparison points and ``enabled_path.json`` inside vLLM-Omni 0.30.0's workers.

Loaded with ``--worker-extension-cls engine.vllm_omni.extension.Ref2VADiagnostics``. vLLM-Omni
mixes the class in ahead of its diffusion worker (``type(name, (extension, worker), {})`` in
``vllm_omni/diffusion/worker/diffusion_worker.py``), so :meth:`Ref2VADiagnostics.execute_model`
sees every request first and hands it on with ``super()``.

A request opts in through ``extra_params.acceptance = {"dump_dir": ABS_PATH, "points": [...] |
"all"}``: the HTTP form's ``extra_params`` is merged into ``sampling_params.extra_args``
(``vllm_omni/entrypoints/openai/serving_video.py``), which reaches the worker unchanged. For such
a request, and only for it, the extension wraps the H3 pipeline's stages on the instance
(``_prepare_encoder_conditioning_inputs``, ``diffuse``, ``decode``) and hooks the DiT's forward,
copies the wanted tensors to the CPU as they are, writes one ``<point>.safetensors`` each, then
restores everything, whatever happened. A request without the block goes straight to upstream's
``execute_model``: no wrapper, no copy. A block with ``capture`` (the judge's localization pass)
also hooks the modules of one stage for that request (:mod:`engine.module_capture`): the DiT
(``transformer``; ``transformers_ref`` too in the combined partition, which ``--task-type ref2va``
does not build) at one denoising step, or the encoders before ``diffuse``, inside the modules H3's
code calls (``text_encoder.vision``, ``text_encoder.text_model``, ``video_vae.model``,
``audio_vae.model``: :data:`engine.vllm_omni.hooks.ENCODER_ROOTS`); module paths are the
pipeline's attribute paths (``transformer.blocks.7.mlp.fc2``,
``text_encoder.text_model.layers.3``). Its summary goes into ``enabled_path.json`` under
``capture``.

A capture with ``stop`` (the judge's localization pass) ends the request once the capture is
whole, on every rank at the same step, the way upstream stops a cancelled request
(:mod:`engine.vllm_omni.stop`); the owner writes ``enabled_path.json`` (its capture report saying
where it stopped) and every rank answers an error with the contract's ``CAPTURE_STOPPED_STATUS``.

Only the output-owner rank writes (worker rank 0, which is also the rank whose reply the
executor returns). Every rank validates the block identically (the capture's ``within`` path
included, but for one inside the text encoder, which only some ranks load: see
:data:`engine.vllm_omni.watch.OWNER_CHECKED_ENCODERS`), so a refused request fails on all ranks
before any collective starts; a failure while writing is held until the pipeline has finished on
every rank, then fails the request on rank 0, so no peer is left waiting in a collective.

The request block and its checks live in :mod:`engine.vllm_omni.request_block`, the dump writer
in :mod:`engine.vllm_omni.dump_writer`, the per-request wrappers in :mod:`engine.vllm_omni.watch`
and the ``enabled_path.json`` report in :mod:`engine.vllm_omni.enabled_path`. Imports of torch,
vllm_omni, safetensors and cache_dit happen inside functions there: this module and those import
on a machine that has none of them.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from engine.vllm_omni.dump_writer import DumpWriter, RunRecord
from engine.vllm_omni.enabled_path import enabled_path
from engine.vllm_omni.request_block import (
    DiagnosticsRefused,
    allowed_roots,
    is_dummy,
    num_steps,
    parse_request,
    request_field,
)
from engine.vllm_omni.stop import Stop, stopped_output, stopping
from engine.vllm_omni.watch import check_capture, watched
from ref2va_contract.diagnostics import (
    ACCEPTANCE_FIELD,
    CAPTURE_REPORT_KEY,
    DUMP_DIR_KEY,
    ENABLED_PATH_FILE,
)

logger = logging.getLogger(__name__)


class Ref2VADiagnostics:
    """Worker extension: request-owned comparison points for the Ref2VA acceptance suite.

    Mixed in ahead of vLLM-Omni's ``DiffusionWorker``; its own helpers carry a ``_ref2va``
    prefix so that they cannot shadow a worker attribute.
    """

    # Provided by DiffusionWorker, the class this one is mixed in ahead of.
    rank: int
    model_runner: Any
    od_config: Any

    def execute_model(self, req: Any, od_config: Any, *args: Any, **kwargs: Any) -> Any:
        upstream: Callable[..., Any] = super().execute_model  # type: ignore[misc]
        if isinstance(req, list):
            # DP multi-concurrency: one wave of several requests; not supported for dumps.
            if any(request_field(getattr(item, "req", item)) is not None for item in req):
                raise DiagnosticsRefused(
                    f"extra_params.{ACCEPTANCE_FIELD} is not supported with data-parallel "
                    "multi-concurrency (several requests in one wave); run one request at a time")
            return upstream(req, od_config, *args, **kwargs)
        block = request_field(req)
        if block is None or is_dummy(req):
            return upstream(req, od_config, *args, **kwargs)
        # Every rank validates (and creates the folder) the same way, so a refusal fails the
        # request on all ranks before any collective starts.
        target = parse_request(block, num_steps(req), allowed_roots())
        pipeline = self.model_runner.pipeline
        if target.capture is not None:
            check_capture(target.capture, pipeline)
        try:
            target.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DiagnosticsRefused(
                f"extra_params.{ACCEPTANCE_FIELD}.{DUMP_DIR_KEY} {target.folder}: "
                f"cannot create the folder: {exc.strerror}") from None
        wanted = target.capture
        stop = Stop(wanted) if wanted is not None and wanted.stop else None

        def run() -> Any:
            try:
                return upstream(req, od_config, *args, **kwargs)
            except BaseException as exc:
                if stop is None or not stop.is_mine(exc):
                    raise
                return None  # a runner that does not catch the stop as it catches a cancel

        if not self._ref2va_is_owner(pipeline):
            with stopping(pipeline, stop):
                output = run()
            return stopped_output(stop) if stop is not None and stop.fired else output
        writer = DumpWriter(target)
        record = RunRecord()
        started = time.perf_counter()
        with watched(pipeline, writer, record) as capture, stopping(pipeline, stop):
            output = run()
        writer.note_unwritten()
        report = self._ref2va_enabled_path(req, od_config, pipeline, writer, record)
        if capture is not None:
            if stop is not None and stop.fired:
                capture.stopped = wanted.stopped_where()  # type: ignore[union-attr]
            report[CAPTURE_REPORT_KEY] = capture.report()
        report["dump_seconds"] = round(writer.seconds, 3)
        report["rank"] = self.rank  # the owner that wrote: exactly one rank per request
        report["request_seconds"] = round(time.perf_counter() - started, 3)
        path = target.folder / ENABLED_PATH_FILE
        path.write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n",
                        encoding="utf-8")
        logger.info("diagnostics: request %s: %d points (%.1f MiB, %.3f s) and %s in %s",
                    getattr(req, "request_id", "?"), len(writer.written), writer.bytes / 2**20,
                    writer.seconds, ENABLED_PATH_FILE, target.folder)
        writer.raise_failures()
        if stop is not None and stop.fired:
            return stopped_output(stop)
        return output

    def execute_model_batch(self, scheduler_output: Any, od_config: Any) -> Any:
        _refuse_scheduled(scheduler_output, "request-batch")
        return super().execute_model_batch(scheduler_output, od_config)  # type: ignore[misc]

    def execute_stepwise(self, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
        _refuse_scheduled(scheduler_output, "step-mode")
        return super().execute_stepwise(scheduler_output, *args, **kwargs)  # type: ignore[misc]

    def _ref2va_is_owner(self, pipeline: Any) -> bool:
        """Worker rank 0, confirmed by the pipeline's own output-owner test where it has one."""
        if self.rank != 0:
            return False
        test = getattr(pipeline, "_is_output_owner_rank", None)
        return bool(test()) if callable(test) else True

    def _ref2va_enabled_path(self, req: Any, od_config: Any, pipeline: Any, writer: DumpWriter,
                             record: RunRecord) -> dict[str, Any]:
        return enabled_path(req, od_config, pipeline, self.model_runner, writer, record)


def _refuse_scheduled(scheduler_output: Any, mode: str) -> None:
    for new_req in getattr(scheduler_output, "scheduled_new_reqs", None) or ():
        if request_field(getattr(new_req, "req", None)) is not None:
            raise DiagnosticsRefused(
                f"extra_params.{ACCEPTANCE_FIELD} is not supported in vLLM-Omni's {mode} "
                "execution: comparison points are written only on the single-request "
                "execute_model path")
