"""The torch reference pipeline behind the generator seam: encode, denoise, decode, report.

Start-up builds the model from a fixed seed plus the profile's seed-salt and logs its hash. Each
request resolves which paths it runs (quality policy, cache, reference-K/V reuse), optionally
dumps comparison points, and, when it asked for diagnostics, writes ``enabled_path.json`` once
the last frame is decoded, stating what actually ran. A module capture with ``stop`` ends the
request once the capture is whole (:mod:`engine.reference.pipeline.localize`), its
``enabled_path.json`` written then.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from typing import Any, NoReturn

import numpy as np
import torch

from engine.module_capture import ModuleCapture
from engine.reference.errors import CaptureStopped, bad_request
from engine.reference.generator import (
    GeneratedMedia,
    GenerationSpec,
    StepMonitor,
    VideoGenerator,
    audio_sample_count,
    video_latent_frames,
)
from engine.reference.pipeline.cache import (
    LATENT_FRAME_HOLD_PATH,
    RequestPaths,
    hold_latent_frames,
    resolve_paths,
)
from engine.reference.pipeline.costs import DeviceClock, resolve_cost_model
from engine.reference.pipeline.decoders import FrameSource, to_uint8
from engine.reference.pipeline.diagnostics import (
    Dumps,
    NoDumps,
    allowed_roots,
    open_dumps,
    parse_request,
)
from engine.reference.pipeline.dit import ATTENTION_NAME, joint_layout
from engine.reference.pipeline.localize import (
    CaptureWhole,
    Phase,
    StopWhenWhole,
    open_capture,
    plant_divergence,
)
from engine.reference.pipeline.model import ReferenceModel
from engine.reference.pipeline.sampler import (
    DenoiseRecord,
    SamplerInputs,
    denoise,
    shifted_sigmas,
)
from engine.reference.pipeline.weights import (
    WEIGHTS_SEED,
    ModelShape,
    resolve_device,
    resolve_dtype,
    seeded,
    weights_sha256,
)
from engine.reference.profile import EngineArgs, LaunchProfile
from ref2va_contract.diagnostics import (
    APPROXIMATE_KEY,
    CACHE_DIT_PATH,
    CACHE_KEY,
    CAPTURE_DIT,
    CAPTURE_REPORT_KEY,
    DTYPE_KEY,
    REFERENCE_KV_KEY,
    REFERENCE_KV_REUSE_PATH,
    REUSED_STEPS_KEY,
    TEXT_ENCODER_TP_KEY,
)

logger = logging.getLogger(__name__)


def set_deterministic_kernels() -> None:
    """``torch.use_deterministic_algorithms(True, warn_only=True)`` for eager execution.

    The public call also sets ``torch._inductor.config.deterministic``, and importing that pulls
    in the whole compiler stack (dynamo, sympy): about 2 s of CPU per engine start and a slower
    interpreter exit, for a flag that only compiled graphs read. Nothing here compiles, so only
    the eager kernels' flag is set; ``torch.are_deterministic_algorithms_enabled()`` reads it.
    """
    torch._C._set_deterministic_algorithms(True, warn_only=True)



class TorchGenerator:
    """H3-shaped Ref2VA generation with a tiny, seeded, real diffusion model."""

    def __init__(
        self,
        args: EngineArgs,
        *,
        profile_name: str | None = None,
        declared: str | None = None,
        shape: ModelShape | None = None,
    ) -> None:
        self.args = args
        self.profile_name = profile_name
        self.declared = declared
        self.shape = shape or ModelShape()
        # Bit-exact reruns need fixed intra-op threading and deterministic kernels.
        torch.set_num_threads(args.torch_threads)
        set_deterministic_kernels()
        self.device = resolve_device(args.device)
        self.dtype = resolve_dtype(args.dtype)
        shape = self.shape
        model = seeded(lambda: ReferenceModel(shape), WEIGHTS_SEED + args.seed_salt)
        self.weights_sha256 = weights_sha256(model)
        model.dit.set_reduction_order(args.reduction_order)
        self.model = model.to(self.device, self.dtype).eval()
        plant_divergence(self.model, args.plant_divergence)
        self.phase = Phase(self.model)
        self.cost_model, self.cost_source = resolve_cost_model(args)
        self.roots = allowed_roots()
        logger.info(
            "reference pipeline: weights sha256 %s, dtype %s, device %s, threads %d, "
            "cost model %s (%s)",
            self.weights_sha256,
            self.dtype,
            self.device,
            args.torch_threads,
            self.cost_model.model_dump(),
            self.cost_source,
        )

    # -- per request -------------------------------------------------------------------------
    def validate(self, spec: GenerationSpec) -> None:
        """Raise a 400 for what this request asks and the server cannot honour."""
        self._paths(spec)
        target = parse_request(spec.extra_params, spec.num_inference_steps, self.roots)
        open_capture(self.model, self.phase, target, spec.extra_params, spec.num_inference_steps)

    def _paths(self, spec: GenerationSpec) -> RequestPaths:
        return resolve_paths(self.args, spec.quality, spec.extra_params, spec.num_inference_steps)

    def _audio_shift(self, spec: GenerationSpec) -> float:
        shift = spec.extra_params.get("audio_flow_shift")
        if shift is None:
            return spec.flow_shift
        if (
            isinstance(shift, bool)
            or not isinstance(shift, int | float)
            or not (math.isfinite(shift) and shift > 0)
        ):
            raise bad_request(
                f"extra_params.audio_flow_shift must be a positive, finite number, got {shift!r}."
            )
        return float(shift)

    def generate(self, spec: GenerationSpec, monitor: StepMonitor) -> GeneratedMedia:
        paths = self._paths(spec)
        audio_shift = self._audio_shift(spec)
        target = parse_request(spec.extra_params, spec.num_inference_steps, self.roots)
        capture = open_capture(self.model, self.phase, target, spec.extra_params,
                               spec.num_inference_steps, hooks_off=spec.capture_hooks_off)
        if capture is not None:
            capture.install()
        try:
            return self._generate(spec, monitor, paths, audio_shift, open_dumps(target), capture)
        except BaseException:
            if capture is not None:
                capture.remove()
            raise

    def _generate(
        self,
        spec: GenerationSpec,
        monitor: StepMonitor,
        paths: RequestPaths,
        audio_shift: float,
        dumps: Dumps | NoDumps,
        capture: ModuleCapture | None,
    ) -> GeneratedMedia:
        clock = DeviceClock(self.cost_model)
        stages: dict[str, float] = {}
        model, shape = self.model, self.shape
        guidance = spec.guidance_scale if spec.guidance_scale and spec.guidance_scale > 1 else None

        started = time.perf_counter()
        self.phase.encoding = True
        with torch.inference_mode():
            text = model.text_encoder(spec.prompt)
            image = model.image_encoder([item.rgb for item in spec.images])
            ref_audio = model.audio_encoder([item.samples for item in spec.audios])
            conditions: tuple[torch.Tensor, ...] = (torch.cat([text, ref_audio]),)
            if guidance is not None:
                negative = model.text_encoder(spec.negative_prompt)
                conditions += (torch.cat([negative, ref_audio]),)
        self.phase.encoding = False
        for point, tensor in (
            ("cond.text", text),
            ("cond.image", image),
            ("cond.audio", ref_audio),
        ):
            if dumps.wants(point):
                dumps.put(point, tensor)
        stages["encode"] = time.perf_counter() - started
        stopping = capture is not None and capture.request.stop
        if stopping and capture is not None and capture.request.stage != CAPTURE_DIT:
            # The encoders' capture is whole: stop before the denoise.
            self._stop(spec, paths, DenoiseRecord(), clock, stages, dumps, capture)

        frames = video_latent_frames(spec.num_frames)
        rows, cols = math.ceil(spec.height / shape.patch), math.ceil(spec.width / shape.patch)
        samples = audio_sample_count(spec.num_frames, spec.fps)
        audio_tokens = max(1, -(-samples // shape.audio_hop))
        # Noise from a CPU generator, so it is the same wherever the model runs.
        noise = torch.Generator().manual_seed(spec.seed)
        video_noise = torch.randn(
            frames, rows, cols, shape.latent_channels, generator=noise, dtype=torch.float32
        )
        audio_noise = torch.randn(
            audio_tokens, shape.latent_channels, generator=noise, dtype=torch.float32
        )
        layout = joint_layout(shape, frames, rows, cols, audio_tokens, image.shape[0])
        inputs = SamplerInputs(
            layout=layout,
            video=video_noise.to(self.device),
            audio=audio_noise.to(self.device),
            video_sigmas=shifted_sigmas(spec.num_inference_steps, spec.flow_shift),
            audio_sigmas=shifted_sigmas(spec.num_inference_steps, audio_shift),
            reference=image,
            conditions=conditions,
            guidance=guidance,
        )
        started = time.perf_counter()
        record = DenoiseRecord()
        if stopping and capture is not None and capture.request.step is not None:
            monitor = StopWhenWhole(monitor, capture.request.step)
        try:
            with torch.inference_mode():
                video_latent, audio_latent, record = denoise(
                    model.dit,
                    inputs,
                    paths,
                    text_kv_precompute=self.args.text_kv_precompute,
                    clock=clock,
                    monitor=monitor,
                    dumps=dumps,
                    unseeded_noise_step=spec.unseeded_noise_step,
                    record=record,
                )
        except CaptureWhole:
            stages["denoise"] = time.perf_counter() - started
            assert capture is not None
            self._stop(spec, paths, record, clock, stages, dumps, capture)
        stages["denoise"] = time.perf_counter() - started
        for point, tensor in (("latent.video", video_latent), ("latent.audio", audio_latent)):
            if dumps.wants(point):
                dumps.put(point, tensor)

        waveform: np.ndarray | None = None
        if spec.generate_sound:
            started = time.perf_counter()
            reference_audio = spec.audios[0].samples if spec.audios else None
            with torch.inference_mode():
                wave = model.audio_decoder(audio_latent, samples, reference_audio)
            if dumps.wants("decoded.audio"):
                dumps.put("decoded.audio", wave)
            waveform = wave.cpu().numpy()
            stages["decode_audio"] = time.perf_counter() - started

        report = self._enabled_path(spec, paths, record, clock, stages)
        if capture is not None:
            # The capture ends with the DiT: what it saw goes into enabled_path.json.
            capture.remove()
            report[CAPTURE_REPORT_KEY] = capture.report()
        media = GeneratedMedia(
            width=spec.width,
            height=spec.height,
            fps=spec.fps,
            num_frames=spec.num_frames,
            frames=iter(()),
            audio=waveform,
            stage_durations=stages,
        )
        if paths.latent_frame_stride is not None:  # what the decode reads, not what was dumped
            video_latent = hold_latent_frames(video_latent, paths.latent_frame_stride)
        media.frames = self._frames(spec, video_latent, monitor, clock, dumps, stages, report)
        logger.info(
            "denoised %d steps: %d computed, %d reused by cache, reference K/V reused at %d; "
            "declared device time %.3f s",
            spec.num_inference_steps,
            len(record.computed_steps),
            len(record.reused_steps),
            len(record.reference_kv_reused_steps),
            clock.total_ms / 1000.0,
        )
        return media

    def _stop(
        self,
        spec: GenerationSpec,
        paths: RequestPaths,
        record: DenoiseRecord,
        clock: DeviceClock,
        stages: dict[str, float],
        dumps: Dumps | NoDumps,
        capture: ModuleCapture,
    ) -> NoReturn:
        """End a request whose capture is whole: its enabled_path.json (what ran until here, and
        where it stopped), then :class:`CaptureStopped`."""
        capture.remove()
        capture.stopped = capture.request.stopped_where()
        report = self._enabled_path(spec, paths, record, clock, stages)
        report[CAPTURE_REPORT_KEY] = capture.report()
        dumps.finish(report)
        logger.info("capture whole (%s): request stopped after %d of %d steps",
                    capture.request.stage, len(record.computed_steps) + len(record.reused_steps),
                    spec.num_inference_steps)
        raise CaptureStopped(capture.request.stop_message())

    def _frames(
        self,
        spec: GenerationSpec,
        latent: torch.Tensor,
        monitor: StepMonitor,
        clock: DeviceClock,
        dumps: Dumps | NoDumps,
        stages: dict[str, float],
        report: dict[str, Any],
    ) -> Iterator[np.ndarray]:
        """Frames one at a time; the decode stage and ``enabled_path.json`` close after the last."""
        started = time.perf_counter()
        with torch.inference_mode():
            decoded = self.model.video_decoder.latent_frames(latent, spec.height, spec.width)
            reference = spec.images[0].rgb if spec.images else None
            source = FrameSource(decoded.cpu(), spec.num_frames, reference)
            charge = clock.charge_decode(spec.num_frames)
        if charge > 0:
            monitor.idle(charge)
        spent = time.perf_counter() - started
        if dumps.wants("decoded.video"):
            # The one case that holds every frame: the point is the whole float video.
            with torch.inference_mode():
                video = torch.stack([source.frame(index) for index in range(spec.num_frames)])
            dumps.put("decoded.video", video)
            spent += time.perf_counter() - started
            for index in range(spec.num_frames):
                yield to_uint8(video[index])
            del video
        else:
            for index in range(spec.num_frames):
                tick = time.perf_counter()
                with torch.inference_mode():
                    frame = to_uint8(source.frame(index))
                spent += time.perf_counter() - tick
                yield frame
        stages["decode_video"] = spent
        report["stages"] = dict(stages)
        report["device_time_s"] = round(clock.total_ms / 1000.0, 6)
        dumps.finish(report)

    def _enabled_path(
        self,
        spec: GenerationSpec,
        paths: RequestPaths,
        record: DenoiseRecord,
        clock: DeviceClock,
        stages: dict[str, float],
    ) -> dict[str, Any]:
        approximate = []
        if paths.cache is not None:
            approximate.append(CACHE_DIT_PATH)
        if paths.reference_kv_mode == "reuse":
            approximate.append(REFERENCE_KV_REUSE_PATH)
        if self.dtype != torch.float32:
            approximate.append("reduced_precision")
        if paths.latent_frame_stride is not None:
            approximate.append(LATENT_FRAME_HOLD_PATH)
        totals = clock.totals
        return {
            "weights_sha256": self.weights_sha256,
            DTYPE_KEY: str(self.dtype).removeprefix("torch."),
            "device": str(self.device),
            "attention": ATTENTION_NAME,
            "compile": "eager",
            TEXT_ENCODER_TP_KEY: self.args.text_encoder_tp_size,
            "threads": self.args.torch_threads,
            "text_kv": "precomputed" if self.args.text_kv_precompute else "per_step",
            "reduction_order": self.args.reduction_order,
            "latent_frame_stride": paths.latent_frame_stride,
            "guidance": "cfg" if spec.guidance_scale and spec.guidance_scale > 1 else "off",
            CACHE_KEY: {
                "backend": CACHE_DIT_PATH if paths.cache is not None else "none",
                "config": paths.cache.model_dump() if paths.cache is not None else {},
                "computed_steps": record.computed_steps,
                REUSED_STEPS_KEY: record.reused_steps,
                "reused_blocks": record.reused_blocks,
                "residual_diffs": record.residual_diffs,
                "force_refresh_steps": sorted(paths.force_refresh_steps),
            },
            REFERENCE_KV_KEY: {
                "mode": paths.reference_kv_mode,
                "refresh_interval": (
                    None if paths.reference_kv_mode == "recompute" else paths.reference_kv_interval
                ),
                REUSED_STEPS_KEY: record.reference_kv_reused_steps,
            },
            "quality": spec.quality,
            "declared": self.declared,
            "profile": self.profile_name,
            APPROXIMATE_KEY: approximate,
            "cost_model": {**self.cost_model.model_dump(), "source": self.cost_source},
            "work": {
                "blocks": totals.blocks,
                "context": totals.context,
                "text_kv": totals.text_kv,
                "reference_kv": totals.reference_kv,
            },
            "device_time_s": round(clock.total_ms / 1000.0, 6),
            "stages": dict(stages),
        }


def build_generator(args: EngineArgs, profile: LaunchProfile | None = None) -> VideoGenerator:
    """The generator a profile's args describe: the torch reference pipeline.

    ``profile`` (optional) only labels ``enabled_path.json`` with the profile's name and declared
    kind; the args alone decide what runs.
    """
    return TorchGenerator(
        args,
        profile_name=profile.name if profile is not None else None,
        declared=profile.declared if profile is not None else None,
    )
