"""Conditioning encoders: prompt bytes, reference images and reference audio to tokens."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from engine.reference.pipeline.weights import ModelShape


def sinusoid(positions: torch.Tensor, width: int) -> torch.Tensor:
    """Fixed sinusoidal features of ``positions`` (any float tensor) -> (..., width) float32."""
    half = width // 2
    frequencies = torch.exp(
        -math.log(10_000.0) * torch.arange(half, dtype=torch.float32) / max(1, half)
    )
    angles = positions.to(torch.float32)[..., None] * frequencies
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


class _EncoderLayer(nn.Module):
    """A pre-norm transformer layer over one short sequence."""

    def __init__(self, width: int, heads: int, mlp_ratio: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width, elementwise_affine=False)
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width, elementwise_affine=False)
        self.fc1 = nn.Linear(width, mlp_ratio * width)
        self.fc2 = nn.Linear(mlp_ratio * width, width)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        length, width = tokens.shape
        head = width // self.heads
        q, k, v = self.qkv(self.norm1(tokens)).reshape(length, 3, self.heads, head).unbind(1)
        q, k, v = (x.transpose(0, 1) for x in (q, k, v))  # (heads, length, head)
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(head), dim=-1)
        attended = (weights @ v).transpose(0, 1).reshape(length, width)
        tokens = tokens + self.out(attended)
        out: torch.Tensor = tokens + self.fc2(F.gelu(self.fc1(self.norm2(tokens))))
        return out


class TextEncoder(nn.Module):
    """UTF-8 bytes of the prompt (fixed length) -> embeddings -> a small transformer."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.length = shape.text_tokens
        self.embed = nn.Embedding(257, shape.hidden)  # byte + 1; 0 is padding
        self.layers = nn.ModuleList(
            _EncoderLayer(shape.hidden, shape.heads, shape.mlp_ratio)
            for _ in range(shape.text_layers)
        )
        self.norm = nn.LayerNorm(shape.hidden, elementwise_affine=False)
        self.register_buffer(
            "position", sinusoid(torch.arange(self.length), shape.hidden), persistent=False
        )

    def token_ids(self, prompt: str) -> torch.Tensor:
        raw = list(prompt.encode("utf-8")[: self.length])
        ids = [byte + 1 for byte in raw] + [0] * (self.length - len(raw))
        return torch.tensor(ids, dtype=torch.long)

    def forward(self, prompt: str) -> torch.Tensor:
        device = self.embed.weight.device
        tokens = self.embed(self.token_ids(prompt).to(device))
        tokens = tokens + self.position.to(tokens.dtype)
        for layer in self.layers:
            tokens = layer(tokens)
        out: torch.Tensor = self.norm(tokens)
        return out


CONTEXT_LAYER_SCALE = 0.1


class ConditionEmbedder(nn.Module):
    """The DiT's own embedding of its cross-attention context (text + reference-audio tokens).

    Modelled on the context embedding that video DiTs run at the top of their ``forward()``
    (Wan2.1's ``WanModel.text_embedding``: the text encoder's output projected into the DiT's
    width inside the transformer), made a little deeper: the tokens are lifted to a wide width,
    refined by a stack of transformer layers and projected back, as a residual. It reads only
    the conditioning tokens, never the timestep or the latents, so its output is the same at
    every denoising step: a pipeline that calls the DiT's forward once per step recomputes it
    (and every block's cross-attention K/V of it) fifty times per request, and a server that
    caches step-invariant conditioning (``text-kv-precompute``) computes it once, with the same
    ops on the same inputs, hence the same bits.

    Its size is chosen for the CI reference campaign, not for realism of proportions: at the CI
    resolution (112x64) recomputing it at every step is about two thirds of B0's request, so
    the lossless candidate that skips it is measurably faster from real work alone.
    """

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        width = shape.context_width
        self.lift = nn.Linear(shape.hidden, width)
        self.layers = nn.ModuleList(
            _EncoderLayer(width, shape.context_heads, shape.mlp_ratio)
            for _ in range(shape.context_layers)
        )
        self.norm = nn.LayerNorm(width, elementwise_affine=False)
        self.project = nn.Linear(width, shape.hidden)
        # LayerScale (CaiT) on the residual: the refinement corrects the encoders' tokens rather
        # than replacing them. Fixed, not drawn, and part of the weights' hash.
        self.register_buffer("layer_scale", torch.full((shape.hidden,), CONTEXT_LAYER_SCALE))

    def forward(self, condition: torch.Tensor) -> torch.Tensor:
        """(tokens, hidden) -> (tokens, hidden): the context every block cross-attends to."""
        tokens = self.lift(condition)
        for layer in self.layers:
            tokens = layer(tokens)
        refined = self.project(self.norm(tokens)) * self.layer_scale
        out: torch.Tensor = condition + refined
        return out


class ImageEncoder(nn.Module):
    """Reference images resized to a small square, patchified, projected to tokens."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.size = shape.image_size
        self.patch = shape.image_patch
        self.proj = nn.Linear(3 * self.patch * self.patch, shape.hidden)
        grid = self.size // self.patch
        self.register_buffer(
            "position", sinusoid(torch.arange(grid * grid), shape.hidden), persistent=False
        )

    def forward(self, images: list[np.ndarray]) -> torch.Tensor:
        """(R, hidden) for R = tokens per image x max(1, images); no image encodes a blank one."""
        device, dtype = self.proj.weight.device, self.proj.weight.dtype
        pictures = [to_unit_range(image, self.size, self.size) for image in images] or [
            torch.zeros(self.size, self.size, 3)
        ]
        tokens = []
        for picture in pictures:
            grid = self.size // self.patch
            patches = picture.reshape(grid, self.patch, grid, self.patch, 3)
            patches = patches.permute(0, 2, 1, 3, 4).reshape(grid * grid, -1)
            tokens.append(self.proj(patches.to(device, dtype)) + self.position.to(dtype))
        return torch.cat(tokens, dim=0)


class AudioEncoder(nn.Module):
    """Reference waveforms in hops of 1280 stereo samples -> linear -> tokens (zeros if absent)."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.hop = shape.audio_hop
        self.count = shape.audio_ref_tokens
        self.proj = nn.Linear(2 * self.hop, shape.hidden)
        self.register_buffer(
            "position", sinusoid(torch.arange(self.count), shape.hidden), persistent=False
        )

    def forward(self, clips: list[np.ndarray]) -> torch.Tensor:
        device, dtype = self.proj.weight.device, self.proj.weight.dtype
        waves = [torch.from_numpy(np.ascontiguousarray(clip)) for clip in clips] or [
            torch.zeros(2, 0)
        ]
        tokens = []
        for wave in waves:
            framed = torch.zeros(2, self.count * self.hop)
            used = min(wave.shape[1], framed.shape[1])
            framed[:, :used] = wave[:, :used].to(torch.float32)
            hops = framed.reshape(2, self.count, self.hop).permute(1, 0, 2).reshape(self.count, -1)
            tokens.append(self.proj(hops.to(device, dtype)) + self.position.to(dtype))
        return torch.cat(tokens, dim=0)


def to_unit_range(rgb: np.ndarray, height: int, width: int) -> torch.Tensor:
    """uint8 (H, W, 3) -> float32 (height, width, 3) in [-1, 1], bilinear, no antialiasing."""
    image = torch.from_numpy(np.ascontiguousarray(rgb)).to(torch.float32)
    image = image.permute(2, 0, 1)[None] / 127.5 - 1.0
    resized = F.interpolate(image, size=(height, width), mode="bilinear", align_corners=False)
    return resized[0].permute(1, 2, 0).contiguous()
