"""A small DiT over joint video and audio latent tokens (H3-shaped, two-CPU-core sized).

Each block: adaLN timestep modulation; windowed self-attention over [reference-image tokens +
the window's video tokens + the window's audio tokens]; cross-attention to the text and
reference-audio tokens; MLP. Windows are groups of latent frames with the audio tokens of the
same time span, so self-attention is linear in clip length; the reference tokens are keys and
values in every window. Their K/V are projected from timestep-modulated reference tokens, so they
depend on the step.

The cross-attention context does not: the DiT embeds the text and reference-audio tokens with its
context embedder (:class:`ConditionEmbedder`, as Wan2.1's transformer embeds its text context at
the top of every forward) and each block projects its K/V from that context. A plain pipeline
runs the DiT's forward once per step and so recomputes both at every step; ``text-kv-precompute``
computes them once per request and reuses them (see ``sampler._Kv``), bit for bit the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engine.reference.pipeline.encoders import ConditionEmbedder, sinusoid
from engine.reference.pipeline.weights import ModelShape

KeyValue = tuple[torch.Tensor, torch.Tensor]
# block index -> (K, V) as (tokens, hidden); the sampler decides whether it is computed or reused
KvProvider = Callable[[int], KeyValue]

ATTENTION_NAME = "windowed_matmul_softmax"


@dataclass(frozen=True)
class JointLayout:
    """Where each video and audio token sits in the windowed joint sequence of one request."""

    frames: int  # latent frames T
    rows: int  # latent rows h
    cols: int  # latent cols w
    audio: int  # audio latent tokens A
    windows: int
    window_length: int
    video_index: torch.Tensor  # (T*h*w,) flat positions in (windows * window_length)
    audio_index: torch.Tensor  # (A,)
    token_type: torch.Tensor  # (windows, window_length) 0 video, 1 audio (padding: 0)
    valid: torch.Tensor  # (windows * window_length,) bool
    key_bias: torch.Tensor  # (windows, 1, 1, reference + window_length): 0 or -inf

    @property
    def video_tokens(self) -> int:
        return self.frames * self.rows * self.cols


def joint_layout(
    shape: ModelShape, frames: int, rows: int, cols: int, audio: int, reference: int
) -> JointLayout:
    spatial = rows * cols
    windows = -(-frames // shape.window_frames)
    video_span = shape.window_frames * spatial
    audio_span = -(-audio // windows)
    length = video_span + audio_span
    video_index = torch.empty(frames * spatial, dtype=torch.long)
    audio_index = torch.empty(audio, dtype=torch.long)
    token_type = torch.zeros(windows, length, dtype=torch.long)
    token_type[:, video_span:] = 1
    valid = torch.zeros(windows * length, dtype=torch.bool)
    flat = torch.arange(frames * spatial)
    window, offset = flat // video_span, flat % video_span
    video_index.copy_(window * length + offset)
    flat_audio = torch.arange(audio)
    window, offset = flat_audio // audio_span, flat_audio % audio_span
    audio_index.copy_(window * length + video_span + offset)
    valid[video_index] = True
    valid[audio_index] = True
    key_bias = torch.zeros(windows, 1, 1, reference + length)
    key_bias[:, 0, 0, reference:] = torch.where(valid.reshape(windows, length), 0.0, float("-inf"))
    return JointLayout(
        frames,
        rows,
        cols,
        audio,
        windows,
        length,
        video_index,
        audio_index,
        token_type,
        valid,
        key_bias,
    )


def split_k_linear(x: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    """``layer(x)`` with its reduction split in two halves: the same sum in another order."""
    half = layer.in_features // 2
    low = F.linear(x[..., :half], layer.weight[:, :half])
    high = F.linear(x[..., half:], layer.weight[:, half:], layer.bias)
    return low + high


class Projection(nn.Linear):
    """A linear projection whose reduction order is a setting (``split_k``: two halves).

    The split runs inside this module's own forward, so a forward hook on it (the judge's
    localization pass) sees the changed output where it is made.
    """

    split_k = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.split_k:
            return split_k_linear(x, self)
        out: torch.Tensor = super().forward(x)
        return out


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    # scaling q (few elements) rather than the scores (many) keeps attention cheap
    scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-1, -2)
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    return torch.softmax(scores, dim=-1) @ v


class DiTBlock(nn.Module):
    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        width = shape.hidden
        self.heads = shape.heads
        self.modulation = nn.Linear(width, 6 * width)
        self.reference_modulation = nn.Linear(width, 2 * width)
        self.norm1 = nn.LayerNorm(width, elementwise_affine=False)
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.reference_kv = nn.Linear(width, 2 * width)
        self.norm_cross = nn.LayerNorm(width, elementwise_affine=False)
        self.cross_q = nn.Linear(width, width)
        self.cross_kv = nn.Linear(width, 2 * width)
        self.cross_out = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width, elementwise_affine=False)
        self.fc1 = nn.Linear(width, shape.mlp_ratio * width)
        self.fc2 = Projection(shape.mlp_ratio * width, width)

    def project_reference(self, reference: torch.Tensor, time_video: torch.Tensor) -> KeyValue:
        """The reference tokens' K/V at this step (modulated by the video timestep)."""
        shift, scale = self.reference_modulation(F.silu(time_video)).chunk(2, dim=-1)
        modulated = self.norm1(reference) * (1 + scale) + shift
        k, v = self.reference_kv(modulated).chunk(2, dim=-1)
        return k, v

    def project_condition(self, context: torch.Tensor) -> KeyValue:
        """Cross-attention K/V of the embedded context (:meth:`JointDiT.embed_condition`):
        step-independent."""
        k, v = self.cross_kv(context).chunk(2, dim=-1)
        return k, v

    def forward(
        self,
        hidden: torch.Tensor,  # (windows, length, width)
        modulation: torch.Tensor,  # (windows, length, 6 * width), per token type
        reference_kv: KeyValue,
        condition_kv: KeyValue,
        key_bias: torch.Tensor,
    ) -> torch.Tensor:
        windows, length, width = hidden.shape
        heads, head = self.heads, width // self.heads
        shift1, scale1, gate1, shift2, scale2, gate2 = modulation.chunk(6, dim=-1)

        x = self.norm1(hidden) * (1 + scale1) + shift1
        q, k, v = self.qkv(x).reshape(windows, length, 3, heads, head).permute(2, 0, 3, 1, 4)
        ref_k, ref_v = (
            t.reshape(-1, heads, head).transpose(0, 1).expand(windows, -1, -1, -1)
            for t in reference_kv
        )
        attended = _attend(q, torch.cat([ref_k, k], 2), torch.cat([ref_v, v], 2), key_bias)
        attended = attended.transpose(1, 2).reshape(windows, length, width)
        hidden = hidden + gate1 * self.out(attended)

        cq = self.cross_q(self.norm_cross(hidden)).reshape(-1, heads, head).transpose(0, 1)
        ck, cv = (t.reshape(-1, heads, head).transpose(0, 1) for t in condition_kv)
        crossed = _attend(cq, ck, cv, None).transpose(0, 1).reshape(windows, length, width)
        hidden = hidden + self.cross_out(crossed)

        x = F.gelu(self.fc1(self.norm2(hidden) * (1 + scale2) + shift2))
        out: torch.Tensor = hidden + gate2 * self.fc2(x)
        return out


class JointDiT(nn.Module):
    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        width, channels = shape.hidden, shape.latent_channels
        self.shape = shape
        self.video_in = nn.Linear(channels, width)
        self.audio_in = nn.Linear(channels, width)
        self.time_fc1 = nn.Linear(width, width)
        self.time_fc2 = nn.Linear(width, width)
        self.context_embedder = ConditionEmbedder(shape)
        self.blocks = nn.ModuleList(DiTBlock(shape) for _ in range(shape.blocks))
        self.final_norm = nn.LayerNorm(width, elementwise_affine=False)
        self.final_modulation = nn.Linear(width, 2 * width)
        self.video_out = nn.Linear(width, channels)
        self.audio_out = nn.Linear(width, channels)
        # The denoising step now running (set by the sampler; None outside the loop): what the
        # localization capture and a planted divergence key on, like vLLM-Omni's forward context.
        self.current_step: int | None = None

    def set_reduction_order(self, order: str) -> None:
        for block in self.blocks:
            assert isinstance(block, DiTBlock)
            block.fc2.split_k = order == "split_k"

    def embed_condition(self, condition: torch.Tensor) -> torch.Tensor:
        """Text + reference-audio tokens (tokens, hidden) -> the context the blocks attend to.

        A function of the conditioning alone (no timestep, no latents): the same at every step.
        """
        out: torch.Tensor = self.context_embedder(condition.to(self.video_in.weight.dtype))
        return out

    def time_embedding(self, sigma: float) -> torch.Tensor:
        dtype = self.time_fc1.weight.dtype
        feature = sinusoid(torch.tensor(sigma * 1000.0), self.shape.hidden).to(
            self.time_fc1.weight.device, dtype
        )
        embedded: torch.Tensor = self.time_fc2(F.silu(self.time_fc1(feature)))
        return embedded

    def positions(self, layout: JointLayout) -> tuple[torch.Tensor, torch.Tensor]:
        """Fixed position features of the video (T*h*w) and audio (A) tokens, on one time axis."""
        width = self.shape.hidden
        t = torch.arange(layout.frames).repeat_interleave(layout.rows * layout.cols)
        s = torch.arange(layout.rows * layout.cols).repeat(layout.frames)
        video = sinusoid(t.float(), width) + sinusoid(s.float() * 0.5 + 300.0, width)
        audio_time = torch.arange(layout.audio, dtype=torch.float32) * (
            layout.frames / max(1, layout.audio)
        )
        audio = sinusoid(audio_time, width) + sinusoid(torch.full_like(audio_time, 600.0), width)
        return video, audio

    def embed(
        self,
        layout: JointLayout,
        video: torch.Tensor,
        audio: torch.Tensor,
        positions: tuple[torch.Tensor, torch.Tensor],
    ) -> torch.Tensor:
        """Pack latents (T,h,w,C) and (A,C) into the windowed joint sequence."""
        dtype = self.video_in.weight.dtype
        video_tokens = self.video_in(video.reshape(-1, video.shape[-1]).to(dtype))
        audio_tokens = self.audio_in(audio.to(dtype))
        video_tokens = video_tokens + positions[0].to(dtype)
        audio_tokens = audio_tokens + positions[1].to(dtype)
        packed = torch.zeros(
            layout.windows * layout.window_length,
            self.shape.hidden,
            dtype=dtype,
            device=video_tokens.device,
        )
        packed.index_copy_(0, layout.video_index, video_tokens)
        packed.index_copy_(0, layout.audio_index, audio_tokens)
        return packed.reshape(layout.windows, layout.window_length, -1)

    def block_modulation(
        self, index: int, time_video: torch.Tensor, time_audio: torch.Tensor, layout: JointLayout
    ) -> torch.Tensor:
        block: DiTBlock = self.blocks[index]  # type: ignore[assignment]
        per_type = block.modulation(F.silu(torch.stack([time_video, time_audio])))
        out: torch.Tensor = per_type[layout.token_type]
        return out

    def unembed(
        self,
        hidden: torch.Tensor,
        layout: JointLayout,
        time_video: torch.Tensor,
        time_audio: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Joint sequence -> velocities (T,h,w,C) and (A,C), float32."""
        per_type = self.final_modulation(F.silu(torch.stack([time_video, time_audio])))
        shift, scale = per_type.chunk(2, dim=-1)
        flat = self.final_norm(hidden).reshape(-1, hidden.shape[-1])
        video = flat.index_select(0, layout.video_index) * (1 + scale[0]) + shift[0]
        audio = flat.index_select(0, layout.audio_index) * (1 + scale[1]) + shift[1]
        video_velocity = self.video_out(video).to(torch.float32)
        audio_velocity = self.audio_out(audio).to(torch.float32)
        return (
            video_velocity.reshape(layout.frames, layout.rows, layout.cols, -1),
            audio_velocity,
        )
