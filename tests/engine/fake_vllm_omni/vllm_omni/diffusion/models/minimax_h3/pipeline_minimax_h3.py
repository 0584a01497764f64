"""A tiny torch pipeline with H3's method names, call order and DiT module names.

forward -> _prepare_encoder_conditioning_inputs (the text through a toy ``text_encoder``, BF16;
visual FP32, audio FP32) -> diffuse (one DiT forward per step returning FP32 (video, audio), the
step index published in the forward context) -> decode (FP32 video frames and audio) -> uint8
frames. A toy step cache, installed per request the way H3's quality policy does (server
cache_backend "cache_dit" and no quality), serves every other step after two warmup steps from the
previous output and records which.

The DiT's modules carry 0.30.0's attribute and class names (minimax_h3_transformer.py:
``blocks.N.attn.qkv_proj``, ``blocks.N.mlp.fc2``, ``final_layer.video_out``, ...), tiny and
without tensor parallelism, so module paths in a capture are the ones a real server writes; a
test in tests/engine/test_vllm_omni_capture.py holds them to the names engine/vllm_omni/hooks.py
checks against the wheel. What each module computes is a toy.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
import torch.distributed as dist
from torch import nn

from vllm_omni.diffusion.attention.layer import Attention
from vllm_omni.diffusion.data import DiffusionOutput, OmniDiffusionConfig
from vllm_omni.diffusion.forward_context import (
    get_forward_context,
    is_forward_context_available,
    set_forward_context_denoise_step_idx,
)

GENERIC_CACHE_KEY = "minimax_h3.generic"
WARMUP_STEPS = 2
VIDEO_ROWS, AUDIO_ROWS, WIDTH = 12, 6, 8
FFN_WIDTH, TEXT_WIDTH, NUM_BLOCKS = 16, 64, 3
# One part in 2**12, as the reference engine's planted divergence.
PLANTED_SCALE = 1.0 + 2.0**-12


def _rms(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class MiniMaxH3TimeEmbedder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj_in = nn.Linear(WIDTH, FFN_WIDTH)
        self.proj_out = nn.Linear(FFN_WIDTH, WIDTH)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = WIDTH // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
        args = t.float()[:, None] * freqs[None]
        hidden = self.proj_in(torch.cat([torch.cos(args), torch.sin(args)], dim=-1))
        return self.proj_out(nn.functional.silu(hidden))


class MiniMaxH3Attention(nn.Module):
    def __init__(self, *, prefix: str) -> None:
        super().__init__()
        self.qkv_proj = nn.Linear(WIDTH, WIDTH, bias=False)
        self.out_proj = nn.Linear(WIDTH, WIDTH, bias=False)
        # Upstream passes the module's own prefix (``blocks.N.attn``) to the attention layer.
        self.attention = Attention(prefix=prefix)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_proj(self.attention(self.qkv_proj(x)))


class MiniMaxH3MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, 2 * FFN_WIDTH, bias=False)
        self.fc2 = nn.Linear(FFN_WIDTH, WIDTH, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.fc1(x).chunk(2, dim=-1)
        return self.fc2(nn.functional.silu(gate) * up)


class MiniMaxH3AdalnProj(nn.Module):
    def __init__(self, expand_ratio: int) -> None:
        super().__init__()
        self.expand_ratio = expand_ratio
        self.linear = nn.Linear(WIDTH, expand_ratio * WIDTH)

    def forward(self, t_emb: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(self.linear(nn.functional.silu(t_emb)).chunk(self.expand_ratio, dim=-1))


class MiniMaxH3TokenRefinerBlock(nn.Module):
    def __init__(self, *, prefix: str) -> None:
        super().__init__()
        self.attn = MiniMaxH3Attention(prefix=f"{prefix}.attn")
        self.mlp = MiniMaxH3MLP()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(_rms(x))
        return x + self.mlp(_rms(x))


class MiniMaxH3TokenRefiner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([MiniMaxH3TokenRefinerBlock(prefix="token_refiner.blocks.0")])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return _rms(x)


class MiniMaxH3DiTBlock(nn.Module):
    def __init__(self, *, prefix: str) -> None:
        super().__init__()
        self.attn = MiniMaxH3Attention(prefix=f"{prefix}.attn")
        self.mlp = MiniMaxH3MLP()
        self.adaln_proj = MiniMaxH3AdalnProj(expand_ratio=6)

    def forward(self, x: torch.Tensor, *, t_emb: torch.Tensor) -> torch.Tensor:
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.adaln_proj(t_emb)
        x = x + gate_msa * self.attn(_rms(x) * (1 + scale_msa) + shift_msa)
        return x + gate_mlp * self.mlp(_rms(x) * (1 + scale_mlp) + shift_mlp)


class MiniMaxH3FinalLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.adaln_proj = MiniMaxH3AdalnProj(expand_ratio=2)
        self.video_out = nn.Linear(WIDTH, WIDTH)
        self.audio_out = nn.Linear(WIDTH, WIDTH)

    def forward(self, video: torch.Tensor, audio: torch.Tensor, *,
                t_emb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        shift, scale = self.adaln_proj(t_emb)
        return (self.video_out(_rms(video) * (1 + scale) + shift),
                self.audio_out(_rms(audio) * (1 + scale) + shift))


class MiniMaxH3DiTModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.video_patch_proj = nn.Linear(WIDTH, WIDTH)
        self.audio_patch_proj = nn.Linear(WIDTH, WIDTH)
        self.condition_proj = nn.Linear(TEXT_WIDTH, WIDTH)
        self.time_embedder = MiniMaxH3TimeEmbedder()
        self.token_refiner = MiniMaxH3TokenRefiner()
        self.blocks = nn.ModuleList(
            [MiniMaxH3DiTBlock(prefix=f"blocks.{i}") for i in range(NUM_BLOCKS)])
        self.final_layer = MiniMaxH3FinalLayer()
        self.cache_on = False
        self._cached_steps: list[int] = []
        self._last: tuple[torch.Tensor, torch.Tensor] | None = None
        self._calls = 0
        # A test may make steps from this one on compute differently (a changed reduction).
        self.perturb_from_step: int | None = None

    def forward(self, *, video_rows: torch.Tensor, audio_rows: torch.Tensor, t: float,
                prompt_embeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        step = self._calls
        self._calls += 1
        if self.cache_on and self._last is not None and step >= WARMUP_STEPS and step % 2:
            self._cached_steps.append(step)
            return self._last[0].clone(), self._last[1].clone()
        video = self.video_patch_proj(video_rows)
        audio = self.audio_patch_proj(audio_rows)
        text = self.token_refiner(self.condition_proj(prompt_embeds.float()))
        t_emb = self.time_embedder(torch.tensor([t], dtype=torch.float32))
        joint = torch.cat([video, audio, text])
        for block in self.blocks:
            joint = block(joint, t_emb=t_emb)
        if self.perturb_from_step is not None and step >= self.perturb_from_step:
            joint = joint * (1.0 + 1e-6)
        video, audio = self.final_layer(joint[:VIDEO_ROWS],
                                        joint[VIDEO_ROWS:VIDEO_ROWS + AUDIO_ROWS], t_emb=t_emb)
        video = (video * (1.0 - t)).float()
        audio = (audio * t).float()
        self._last = (video, audio)
        return video, audio

    def reset_request(self, cache_on: bool) -> None:
        self.cache_on = cache_on
        self._cached_steps = []
        self._last = None
        self._calls = 0


class ToyTextEncoder(nn.Module):
    """Stands in for H3's Qwen3-VL text encoder: upstream's pipeline attribute, a toy inside."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(WIDTH, TEXT_WIDTH),
                                     nn.Linear(TEXT_WIDTH, TEXT_WIDTH)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


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


def _denoise_step() -> int | None:
    return get_forward_context().denoise_step_idx if is_forward_context_available() else None


class MiniMaxH3Pipeline(nn.Module):
    _dit_modules: ClassVar[list[str]] = ["transformer", "transformers_ref"]

    def __init__(self, *, od_config: OmniDiffusionConfig) -> None:
        super().__init__()
        self.od_config = od_config
        # The same weights in every pipeline (and on every rank), the caller's RNG left alone.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(7)
            self.text_encoder = ToyTextEncoder()
            self.transformer = MiniMaxH3DiTModel()
        self._cache_dit_runtime = CacheRuntime(self)

    def plant_divergence(self, path: str, step: int | None = None) -> None:
        """For tests (no upstream counterpart): nudge one module's output at one denoise step.

        ``path`` is the module's pipeline attribute path (``transformer.blocks.1.mlp.fc2``,
        ``text_encoder.layers.1``); ``step`` None nudges every call (the encoders run outside
        the denoise loop). The output is scaled by PLANTED_SCALE: a divergence at a known place.
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

    def _prepare_encoder_conditioning_inputs(self, conditioning: dict[str, Any],
                                             sampling: Any) -> dict[str, Any]:
        cache_on = self.od_config.cache_backend == "cache_dit" and sampling.quality is None
        self._cache_dit_runtime.prepare(GENERIC_CACHE_KEY if cache_on else None)
        self.transformer.reset_request(cache_on)
        return {
            "text_embeddings": self.text_encoder(conditioning["text"]).to(torch.bfloat16),
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
            v_video, v_audio = self.transformer(video_rows=video, audio_rows=audio, t=t,
                                                prompt_embeds=text_embeddings)
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
