"""A tiny torch pipeline with H3's method names, call order and module structure (0.30.0).

forward -> _prepare_encoder_conditioning_inputs (the reference image through ``video_vae``'s
``encode_image`` and the audio through ``audio_vae``'s ``encode_waveform``, both FP32; the text,
with the image, through the Qwen3-VL text encoder's ``encode_ids``, BF16) -> diffuse (one DiT
forward per step returning FP32 (video, audio), the step index published in the forward context
first) -> decode (through the VAEs' ``decode_latent``; FP32 video frames and audio) -> uint8
frames. Cache-DiT is installed per request the way H3's quality policy does (server
cache_backend "cache_dit" and no quality), through the request-scoped runtime and its backend,
which sets ``_cache_dit_targets`` on the pipeline.

The modules keep 0.30.0's attribute paths (``transformer.blocks.N.mlp.fc2``,
``text_encoder.text_model.layers.N``, ``video_vae.model.encoder``, ...; see
minimax_h3_transformer.py, encoder.py, vae.py), so a capture of the fake names the paths a real
server's does; tests/contract holds them to the wheel. Only the ``transformer`` is built, as under
``--task-type ref2va`` (``transformers_ref`` exists only in the combined partition).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.distributed as dist
from torch import nn

from vllm_omni.diffusion.cache.cachedit.runtime import (
    CacheDiTRequestSpec,
    RequestScopedCacheDiTRuntime,
)
from vllm_omni.diffusion.data import DiffusionOutput, OmniDiffusionConfig
from vllm_omni.diffusion.forward_context import (
    get_forward_context,
    is_forward_context_available,
    set_forward_context_denoise_step_idx,
)
from vllm_omni.diffusion.models.minimax_h3.encoder import TEXT_WIDTH, MiniMaxH3Qwen3VLEncoder
from vllm_omni.diffusion.models.minimax_h3.minimax_h3_transformer import (
    AUDIO_ROWS,
    VIDEO_ROWS,
    WIDTH,
    MiniMaxH3DiTModel,
)
from vllm_omni.diffusion.models.minimax_h3.vae import MiniMaxH3AudioVAE, MiniMaxH3VideoVAE

GENERIC_CACHE_KEY = "minimax_h3.generic"
AUDIO_SAMPLE_RATE = 32000
# One part in 2**12, as the reference engine's planted divergence.
PLANTED_SCALE = 1.0 + 2.0**-12


def _denoise_step() -> int | None:
    return get_forward_context().denoise_step_idx if is_forward_context_available() else None


class MiniMaxH3Pipeline(nn.Module):
    _dit_modules: ClassVar[list[str]] = ["transformer", "transformers_ref"]

    def __init__(self, *, od_config: OmniDiffusionConfig) -> None:
        super().__init__()
        self.od_config = od_config
        self.partition = "ref2va"
        self._dit_modules = ["transformer"]  # as upstream, without the combined partition
        # The same weights in every pipeline (and on every rank), the caller's RNG left alone.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(7)
            self.transformer = MiniMaxH3DiTModel()
            self.text_encoder = MiniMaxH3Qwen3VLEncoder(load_model=True)
            self.video_vae = MiniMaxH3VideoVAE()
            self.audio_vae = MiniMaxH3AudioVAE()
        self._cache_dit_runtime = RequestScopedCacheDiTRuntime(self)

    def plant_divergence(self, path: str, step: int | None = None) -> None:
        """For tests (no upstream counterpart): nudge one module's output at one denoise step.

        ``path`` is the module's pipeline attribute path (``transformer.blocks.1.mlp.fc2``,
        ``text_encoder.text_model.layers.1``); ``step`` None nudges every call (the encoders run
        outside the denoise loop). The output is scaled by PLANTED_SCALE: a divergence at a known
        place.
        """
        def nudge(module: nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor | None:
            if step is not None and _denoise_step() != step:
                return None
            return output * PLANTED_SCALE

        self.get_submodule(path).register_forward_hook(nudge)

    def is_cache_dit_enabled(self) -> bool:
        return self._cache_dit_runtime.is_enabled

    @staticmethod
    def _is_output_owner_rank() -> bool:
        return not dist.is_available() or not dist.is_initialized() or dist.get_rank() == 0

    def _encode_text_hidden(self, text: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        if not self.text_encoder.is_loaded:
            # Upstream broadcasts the encoder group's result to a rank outside it.
            return torch.zeros(text.shape[0], TEXT_WIDTH, dtype=torch.bfloat16)
        return self.text_encoder.encode_ids(text, pixel_values=image)

    def _prepare_encoder_conditioning_inputs(self, conditioning: dict[str, Any],
                                             sampling: Any) -> dict[str, Any]:
        steps = int(sampling.num_inference_steps or 4)
        cache_on = self.od_config.cache_backend == "cache_dit" and sampling.quality is None
        self.transformer.reset_request()
        self._cache_dit_runtime.prepare(
            CacheDiTRequestSpec(GENERIC_CACHE_KEY, self.od_config.cache_config, steps)
            if cache_on else None)
        visual = self.video_vae.encode_image(conditioning["image"])
        audio, _ = self.audio_vae.encode_waveform(conditioning["audio"], AUDIO_SAMPLE_RATE)
        return {
            "text_embeddings": self._encode_text_hidden(conditioning["text"],
                                                        conditioning["image"]),
            "visual_condition": visual,
            "audio_condition": audio,
            "seed": int(sampling.seed if sampling.seed is not None else 42),
            "num_steps": steps,
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
            v_video, v_audio = self.transformer(video_rows=video, audio_rows=audio, t=t,
                                                prompt_embeds=text_embeddings)
            video = video - v_video / num_steps
            audio = audio - v_audio / num_steps
        set_forward_context_denoise_step_idx(None)
        return video, audio

    def decode(self, video_latent: torch.Tensor, audio_latent: torch.Tensor, *, height: int,
               width: int) -> tuple[torch.Tensor, torch.Tensor]:
        video = torch.sigmoid(self.video_vae.decode_latent(video_latent))
        frames = video.reshape(3, 4, WIDTH)[..., None].expand(3, 4, WIDTH, 3)
        audio = self.audio_vae.decode_latent(audio_latent).reshape(2, -1)
        return frames[:, :height, :width].contiguous(), audio

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
