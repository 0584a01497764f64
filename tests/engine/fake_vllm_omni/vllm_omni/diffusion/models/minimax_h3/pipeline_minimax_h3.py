"""A tiny torch pipeline with H3's method names and call order (pipeline_minimax_h3.py).

forward -> _prepare_encoder_conditioning_inputs (text BF16, visual FP32, audio FP32) -> diffuse
(one DiT forward per step returning FP32 (video, audio), the step index published in the forward
context) -> decode (FP32 video frames and audio) -> uint8 frames. A toy step cache, installed per
request the way H3's quality policy does (server cache_backend "cache_dit" and no quality), serves
every other step after two warmup steps from the previous output and records which.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.distributed as dist
from torch import nn

from vllm_omni.diffusion.attention.layer import Attention
from vllm_omni.diffusion.data import DiffusionOutput, OmniDiffusionConfig
from vllm_omni.diffusion.forward_context import set_forward_context_denoise_step_idx

GENERIC_CACHE_KEY = "minimax_h3.generic"
WARMUP_STEPS = 2
VIDEO_ROWS, AUDIO_ROWS, WIDTH = 12, 6, 8


class MiniMaxH3DiTModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(7)
        self.video_in = nn.Parameter(torch.randn(WIDTH, WIDTH, generator=generator) / WIDTH)
        self.audio_in = nn.Parameter(torch.randn(WIDTH, WIDTH, generator=generator) / WIDTH)
        self.attn = Attention(prefix="blocks.0.attn")
        self.cache_on = False
        self._cached_steps: list[int] = []
        self._last: tuple[torch.Tensor, torch.Tensor] | None = None
        self._calls = 0
        # A test may make steps from this one on compute differently (a changed reduction).
        self.perturb_from_step: int | None = None

    def forward(self, *, video_rows: torch.Tensor, audio_rows: torch.Tensor,
                t: float) -> tuple[torch.Tensor, torch.Tensor]:
        step = self._calls
        self._calls += 1
        if self.cache_on and self._last is not None and step >= WARMUP_STEPS and step % 2:
            self._cached_steps.append(step)
            return self._last[0].clone(), self._last[1].clone()
        joint = self.attn(torch.cat([video_rows @ self.video_in, audio_rows @ self.audio_in]))
        if self.perturb_from_step is not None and step >= self.perturb_from_step:
            joint = joint * (1.0 + 1e-6)
        video = (joint[:VIDEO_ROWS] * (1.0 - t)).float()
        audio = (joint[VIDEO_ROWS:] * t).float()
        self._last = (video, audio)
        return video, audio

    def reset_request(self, cache_on: bool) -> None:
        self.cache_on = cache_on
        self._cached_steps = []
        self._last = None
        self._calls = 0


class CacheRuntime:
    """Stands in for RequestScopedCacheDiTRuntime: installed per request, keyed."""

    def __init__(self, pipeline: MiniMaxH3Pipeline) -> None:
        self._pipeline = pipeline
        self._installation_key: str | None = None

    @property
    def is_enabled(self) -> bool:
        return self._installation_key is not None

    def prepare(self, key: str | None) -> None:
        self._installation_key = key
        if key is None:
            if hasattr(self._pipeline, "_cache_dit_targets"):
                del self._pipeline._cache_dit_targets
        else:
            self._pipeline._cache_dit_targets = (self._pipeline.transformer,)


class MiniMaxH3Pipeline(nn.Module):
    _dit_modules: ClassVar[list[str]] = ["transformer", "transformers_ref"]

    def __init__(self, *, od_config: OmniDiffusionConfig) -> None:
        super().__init__()
        self.od_config = od_config
        self.transformer = MiniMaxH3DiTModel()
        self._cache_dit_runtime = CacheRuntime(self)

    def is_cache_dit_enabled(self) -> bool:
        return self._cache_dit_runtime.is_enabled

    @staticmethod
    def _is_output_owner_rank() -> bool:
        return not dist.is_available() or not dist.is_initialized() or dist.get_rank() == 0

    def _prepare_encoder_conditioning_inputs(self, conditioning: dict[str, Any],
                                             sampling: Any) -> dict[str, Any]:
        cache_on = self.od_config.cache_backend == "cache_dit" and sampling.quality is None
        self._cache_dit_runtime.prepare(GENERIC_CACHE_KEY if cache_on else None)
        self.transformer.reset_request(cache_on)
        return {
            "text_embeddings": conditioning["text"].to(torch.bfloat16),
            "visual_condition": conditioning["image"],
            "audio_condition": conditioning["audio"],
            "seed": int(sampling.seed if sampling.seed is not None else 42),
            "num_steps": int(sampling.num_inference_steps or 4),
        }

    def diffuse(self, *, text_embeddings: torch.Tensor, visual_condition: torch.Tensor,
                audio_condition: torch.Tensor, seed: int,
                num_steps: int) -> tuple[torch.Tensor, torch.Tensor]:
        noise = torch.Generator().manual_seed(seed)
        video = torch.randn(VIDEO_ROWS, WIDTH, generator=noise) + visual_condition.mean()
        audio = torch.randn(AUDIO_ROWS, WIDTH, generator=noise) + audio_condition.mean()
        video = video + text_embeddings.float().mean()
        for step in range(num_steps):
            set_forward_context_denoise_step_idx(step)
            t = 1.0 - step / num_steps
            v_video, v_audio = self.transformer(video_rows=video, audio_rows=audio, t=t)
            video = video - v_video / num_steps
            audio = audio - v_audio / num_steps
        set_forward_context_denoise_step_idx(None)
        return video, audio

    def decode(self, video_latent: torch.Tensor, audio_latent: torch.Tensor, *, height: int,
               width: int) -> tuple[torch.Tensor, torch.Tensor]:
        frames = torch.sigmoid(video_latent.reshape(3, 4, WIDTH)[..., None].expand(3, 4, WIDTH, 3))
        return frames[:, :height, :width].contiguous(), torch.tanh(audio_latent.reshape(2, -1))

    @torch.no_grad()
    def forward(self, request: Any) -> DiffusionOutput:
        prompt = request.prompt
        context = self._prepare_encoder_conditioning_inputs(prompt, request.sampling_params)
        video_latent, audio_latent = self.diffuse(
            text_embeddings=context["text_embeddings"],
            visual_condition=context["visual_condition"],
            audio_condition=context["audio_condition"],
            seed=context["seed"], num_steps=context["num_steps"])
        video, audio = self.decode(video_latent, audio_latent, height=4, width=WIDTH)
        return DiffusionOutput(output=((video * 255).round().to(torch.uint8), audio))
