"""The flow-matching sampler: Euler steps from t=1 to 0 over the joint latents, with optional
classifier-free guidance, Cache-DiT, reference-K/V reuse and text-K/V precompute.

Every optimization here must either be bit-exact with the plain path (text-K/V precompute: the
DiT's context embedding and every block's cross-attention K/V of it, the same ops on the same
tensors, computed once per request instead of at every step) or be recorded as the
approximation it is (what :class:`DenoiseRecord` collects for ``enabled_path.json``).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Protocol

import torch

from engine.reference.pipeline.cache import DBCache, RequestPaths
from engine.reference.pipeline.costs import DeviceClock
from engine.reference.pipeline.diagnostics import Dumps, NoDumps, step_point
from engine.reference.pipeline.dit import DiTBlock, JointDiT, JointLayout, KeyValue


def shifted_sigmas(steps: int, shift: float) -> list[float]:
    """sigma' = shift*s / (1 + (shift-1)*s) for s = 1 .. 0 in ``steps`` equal steps (float64)."""
    sigmas = []
    for index in range(steps + 1):
        s = 1.0 - index / steps
        sigmas.append(shift * s / (1.0 + (shift - 1.0) * s))
    return sigmas


@dataclass
class DenoiseRecord:
    computed_steps: list[int] = field(default_factory=list)
    reused_steps: list[int] = field(default_factory=list)
    reused_blocks: dict[str, list[int]] = field(default_factory=dict)
    reference_kv_reused_steps: list[int] = field(default_factory=list)
    residual_diffs: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class SamplerInputs:
    layout: JointLayout
    video: torch.Tensor  # (T, h, w, C) float32 noise
    audio: torch.Tensor  # (A, C) float32 noise
    video_sigmas: list[float]
    audio_sigmas: list[float]
    reference: torch.Tensor  # (R, hidden) reference-image tokens
    conditions: tuple[torch.Tensor, ...]  # (cond,) or (cond, uncond) cross-attention tokens
    guidance: float | None


class _Monitor(Protocol):
    """What the sampler needs of the server's StepMonitor (structural, to avoid an import cycle)."""

    def step_done(self, step: int, total: int) -> None: ...
    def idle(self, seconds: float) -> None: ...


class _Kv:
    """Where each forward's conditioning and each block's K/V come from: computed now, or
    reused across steps where allowed.

    The plain path is what a pipeline that calls the DiT's forward once per step does: at the
    top of every forward (every step, every guidance branch) it embeds the cross-attention
    context (:meth:`JointDiT.embed_condition`) and every block projects its K/V from it, though
    neither depends on the step. ``text_kv_precompute`` keeps both from the first forward of
    each branch for the rest of the request. ``clock.work`` counts what was computed.
    """

    def __init__(
        self, dit: JointDiT, inputs: SamplerInputs, clock: DeviceClock, text_kv_precompute: bool
    ) -> None:
        self.dit = dit
        self.inputs = inputs
        self.clock = clock
        self.text_kv_precompute = text_kv_precompute
        # Per guidance branch: the embedded context of the current forward (of the whole
        # request under text-kv-precompute) and, under text-kv-precompute, each block's K/V.
        self.context: list[torch.Tensor | None] = [None for _ in inputs.conditions]
        self.condition_store: list[dict[int, KeyValue]] = [{} for _ in inputs.conditions]
        self.reference_store: dict[int, KeyValue] = {}
        self.time_video = torch.empty(0)
        self.time_audio = torch.empty(0)

    def begin_step(self, step: int, refresh_reference: bool) -> None:
        self.time_video = self.dit.time_embedding(self.inputs.video_sigmas[step])
        self.time_audio = self.dit.time_embedding(self.inputs.audio_sigmas[step])
        if refresh_reference:
            self.reference_store = {}

    def begin_forward(self, branch: int) -> None:
        """The top of one DiT forward: embed this branch's context unless it is kept."""
        if self.text_kv_precompute and self.context[branch] is not None:
            return
        self.context[branch] = self.dit.embed_condition(self.inputs.conditions[branch])
        self.clock.work.context += 1

    def reference(self, index: int) -> KeyValue:
        # shared by both guidance branches: it depends on the step, not on the prompt
        if index not in self.reference_store:
            block: DiTBlock = self.dit.blocks[index]  # type: ignore[assignment]
            self.reference_store[index] = block.project_reference(
                self.inputs.reference, self.time_video
            )
            self.clock.work.reference_kv += 1
        return self.reference_store[index]

    def condition(self, branch: int, index: int) -> KeyValue:
        store = self.condition_store[branch]
        if self.text_kv_precompute and index in store:
            return store[index]
        context = self.context[branch]
        assert context is not None, "begin_forward embeds the context before any block runs"
        block: DiTBlock = self.dit.blocks[index]  # type: ignore[assignment]
        kv = block.project_condition(context)
        self.clock.work.text_kv += 1
        if self.text_kv_precompute:
            store[index] = kv
        return kv

    def run(self, branch: int, index: int, hidden: torch.Tensor) -> torch.Tensor:
        layout = self.inputs.layout
        modulation = self.dit.block_modulation(index, self.time_video, self.time_audio, layout)
        self.clock.work.blocks += 1
        out: torch.Tensor = self.dit.blocks[index](
            hidden,
            modulation,
            self.reference(index),
            self.condition(branch, index),
            layout.key_bias,
        )
        return out


def denoise(
    dit: JointDiT,
    inputs: SamplerInputs,
    paths: RequestPaths,
    *,
    text_kv_precompute: bool,
    clock: DeviceClock,
    monitor: _Monitor,
    dumps: Dumps | NoDumps,
    unseeded_noise_step: int | None = None,
    record: DenoiseRecord | None = None,
) -> tuple[torch.Tensor, torch.Tensor, DenoiseRecord]:
    """The denoise loop; ``record`` (filled as the steps run) stays the caller's when the
    monitor stops the loop early."""
    layout = inputs.layout
    record = DenoiseRecord() if record is None else record
    positions = dit.positions(layout)
    valid = layout.valid.reshape(layout.windows, layout.window_length, 1).to(
        inputs.reference.device
    )
    caches = [
        DBCache(paths.cache, paths.force_refresh_steps) if paths.cache is not None else None
        for _ in inputs.conditions
    ]
    kv = _Kv(dit, inputs, clock, text_kv_precompute)

    try:
        video, audio = _steps(dit, inputs, paths, kv, caches, record, valid, positions, clock,
                              monitor, dumps, unseeded_noise_step)
    finally:
        dit.current_step = None
    return video, audio, record


def _steps(
    dit: JointDiT,
    inputs: SamplerInputs,
    paths: RequestPaths,
    kv: _Kv,
    caches: list[DBCache | None],
    record: DenoiseRecord,
    valid: torch.Tensor,
    positions: tuple[torch.Tensor, torch.Tensor],
    clock: DeviceClock,
    monitor: _Monitor,
    dumps: Dumps | NoDumps,
    unseeded_noise_step: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    layout = inputs.layout
    steps = len(inputs.video_sigmas) - 1
    blocks = len(dit.blocks)
    video, audio = inputs.video, inputs.audio
    for step in range(steps):
        dit.current_step = step
        refresh = paths.reference_kv_refreshes(step)
        kv.begin_step(step, refresh)
        if not refresh:
            record.reference_kv_reused_steps.append(step)
        velocities = []
        step_reused = False
        for branch, cache in enumerate(caches):
            kv.begin_forward(branch)
            hidden = dit.embed(layout, video, audio, positions)
            if cache is None:
                for index in range(blocks):
                    hidden = kv.run(branch, index, hidden)
            else:
                first, last = cache.config.Fn_compute_blocks, cache.config.Bn_compute_blocks
                start = hidden
                for index in range(first):
                    hidden = kv.run(branch, index, hidden)
                fn_residual = hidden - start
                middle = list(range(first, blocks - last))
                if cache.reuse(step, fn_residual, valid):
                    assert cache.middle_residual is not None
                    hidden = hidden + cache.middle_residual
                    cache.reused()
                    step_reused = True
                    record.reused_blocks[str(step)] = middle
                else:
                    middle_in = hidden
                    for index in middle:
                        hidden = kv.run(branch, index, hidden)
                    cache.computed(fn_residual, hidden - middle_in)
                if cache.last_diff is not None:
                    record.residual_diffs[str(step)] = round(cache.last_diff, 6)
                for index in range(blocks - last, blocks):
                    hidden = kv.run(branch, index, hidden)
            velocities.append(dit.unembed(hidden, layout, kv.time_video, kv.time_audio))

        (record.reused_steps if step_reused else record.computed_steps).append(step)
        video_velocity, audio_velocity = velocities[0]
        if inputs.guidance is not None:
            scale = inputs.guidance
            uncond_video, uncond_audio = velocities[1]
            video_velocity = uncond_video + scale * (video_velocity - uncond_video)
            audio_velocity = uncond_audio + scale * (audio_velocity - uncond_audio)
        point = step_point(step)
        if dumps.wants(point):
            joint = torch.cat(
                [video_velocity.reshape(-1, video_velocity.shape[-1]), audio_velocity]
            )
            dumps.put(point, joint)
        video_dt = inputs.video_sigmas[step + 1] - inputs.video_sigmas[step]
        audio_dt = inputs.audio_sigmas[step + 1] - inputs.audio_sigmas[step]
        video = video + video_dt * video_velocity
        audio = audio + audio_dt * audio_velocity
        if unseeded_noise_step == step + 1:
            video, audio = _unseeded_noise(video), _unseeded_noise(audio)
        charge = clock.close_step()
        if charge > 0:
            monitor.idle(charge)
        monitor.step_done(step + 1, steps)
    return video, audio


def _unseeded_noise(latent: torch.Tensor) -> torch.Tensor:
    """A small perturbation from OS entropy: the `nondeterministic` fault, never a normal path."""
    rng = torch.Generator().manual_seed(secrets.randbits(63))
    noise = torch.randn(latent.shape, generator=rng, dtype=torch.float32)
    return latent + 1e-3 * noise.to(device=latent.device, dtype=latent.dtype)
