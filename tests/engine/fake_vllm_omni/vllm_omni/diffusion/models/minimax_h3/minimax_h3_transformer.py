"""A tiny DiT with 0.30.0's module names (minimax_h3_transformer.py): ``blocks.N.attn.qkv_proj``,
``blocks.N.mlp.fc2``, ``final_layer.video_out``, ... tiny and without tensor parallelism, so module
paths in a capture are the ones a real server writes; tests/contract holds every path to the
wheel. Called the way upstream calls it: the denoise loop calls the model, the model each block
(through ``nn.Module.__call__``, so hooks fire). What each module computes is a toy, and so is the
step cache (``cache_on``: after two warm-up steps, every other step is served from the previous
output and recorded in ``_cached_steps``, which the fake ``cache_dit.summary`` reads).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from vllm_omni.diffusion.attention.layer import Attention

WARMUP_STEPS = 2
VIDEO_ROWS, AUDIO_ROWS, WIDTH = 12, 6, 8
FFN_WIDTH, TEXT_WIDTH, NUM_BLOCKS = 16, 64, 3


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

    def reset_request(self) -> None:
        """A new request: the step counter and the toy cache's record start again."""
        self._cached_steps = []
        self._last = None
        self._calls = 0
