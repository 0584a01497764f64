"""Decoders: video latents to RGB frames at the requested size and count, audio latents to a
stereo 32 kHz waveform. Frames are produced one at a time so a 15 s clip is never held twice."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from engine.reference.pipeline.encoders import to_unit_range
from engine.reference.pipeline.weights import ModelShape

# How much of each frame is the (resized) reference image: keeps the output visibly tied to it.
REFERENCE_WEIGHT = 0.55
REFERENCE_AUDIO_WEIGHT = 0.4


class VideoDecoder(nn.Module):
    """A learned linear patch decode (one latent token -> 16x16x3 pixels), then temporal
    interpolation between latent frames, tanh, and the reference image mixed in."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.patch = shape.patch
        self.proj = nn.Linear(shape.latent_channels, 3 * shape.patch * shape.patch)

    def latent_frames(self, latent: torch.Tensor, height: int, width: int) -> torch.Tensor:
        """(T, h, w, C) -> (T, height, width, 3) float32, before interpolation and tanh."""
        frames, rows, cols, _ = latent.shape
        patches = self.proj(latent.to(self.proj.weight.dtype)).to(torch.float32)
        pixels = patches.reshape(frames, rows, cols, self.patch, self.patch, 3)
        pixels = pixels.permute(0, 1, 3, 2, 4, 5).reshape(
            frames, rows * self.patch, cols * self.patch, 3
        )
        out: torch.Tensor = pixels[:, :height, :width].contiguous()
        return out


class FrameSource:
    """Output frame ``index`` of ``count``, computed on demand from the decoded latent frames."""

    def __init__(self, decoded: torch.Tensor, count: int, reference: np.ndarray | None) -> None:
        self.decoded = decoded
        self.count = count
        _, height, width, _ = decoded.shape
        self.reference = (
            to_unit_range(reference, height, width)
            if reference is not None
            else torch.zeros(height, width, 3)
        )

    def frame(self, index: int) -> torch.Tensor:
        """float32 (H, W, 3) in [-1, 1]."""
        last = self.decoded.shape[0] - 1
        position = index * last / (self.count - 1) if self.count > 1 else 0.0
        low = min(math.floor(position), last)
        high = min(low + 1, last)
        frac = position - low
        mixed = self.decoded[low] * (1.0 - frac) + self.decoded[high] * frac
        frame = torch.tanh(mixed) * (1.0 - REFERENCE_WEIGHT) + self.reference * REFERENCE_WEIGHT
        return frame.clamp(-1.0, 1.0)


def to_uint8(frame: torch.Tensor) -> np.ndarray:
    pixels = ((frame + 1.0) * 127.5).round().clamp(0, 255).to(torch.uint8)
    out: np.ndarray = pixels.numpy()
    return out


class AudioDecoder(nn.Module):
    """Each audio latent token -> one hop of stereo samples (linear), tanh, plus reference audio."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.hop = shape.audio_hop
        self.proj = nn.Linear(shape.latent_channels, 2 * shape.audio_hop)

    def forward(
        self, latent: torch.Tensor, samples: int, reference: np.ndarray | None
    ) -> torch.Tensor:
        """(A, C) -> (2, samples) float32 in [-1, 1]."""
        hops = self.proj(latent.to(self.proj.weight.dtype)).to(torch.float32)
        wave = hops.reshape(-1, 2, self.hop).permute(1, 0, 2).reshape(2, -1)[:, :samples]
        wave = torch.tanh(wave) * 0.5
        if reference is not None and reference.shape[1] > 0:
            repeats = -(-samples // reference.shape[1])
            tiled = torch.from_numpy(np.tile(reference, (1, repeats))[:, :samples].copy())
            wave = wave + tiled.to(torch.float32) * REFERENCE_AUDIO_WEIGHT
        return wave.clamp(-1.0, 1.0).contiguous()
