"""A toy of H3's Qwen3-VL text encoder (encoder.py), with 0.30.0's structure and names.

``MiniMaxH3Qwen3VLEncoder`` holds ``vision`` (``patch_embed``, ``blocks.N``, ``merger``) and
``text_model`` (``embed_tokens``, ``layers.N``), and is reached the way H3 reaches it: the
pipeline calls ``encode_ids`` (not the encoder's own forward, so a hook on ``text_encoder``
never fires), which calls ``vision`` and ``text_model``, which calls each of its ``layers``. A
rank outside the encoder group gets the parameter-free stub upstream builds (``load_model``
False: neither ``vision`` nor ``text_model``). What each module computes is a toy.
"""

from __future__ import annotations

import torch
from torch import nn

WIDTH, TEXT_WIDTH, NUM_LAYERS = 8, 64, 2


class MiniMaxH3Qwen3VLVisionBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mlp = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.mlp(x))


class MiniMaxH3Qwen3VLVisionModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.patch_embed = nn.Linear(WIDTH, WIDTH)
        self.blocks = nn.ModuleList([MiniMaxH3Qwen3VLVisionBlock()])
        self.merger = nn.Linear(WIDTH, TEXT_WIDTH)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        hidden = self.patch_embed(pixel_values)
        for blk in self.blocks:
            hidden = blk(hidden)
        return self.merger(hidden)


class MiniMaxH3Qwen3VLTextDecoderLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mlp = nn.Linear(TEXT_WIDTH, TEXT_WIDTH)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.mlp(hidden))


class MiniMaxH3Qwen3VLTextModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # A token embedding upstream; the toy's prompt is already a float tensor.
        self.embed_tokens = nn.Linear(WIDTH, TEXT_WIDTH)
        self.layers = nn.ModuleList([MiniMaxH3Qwen3VLTextDecoderLayer()
                                     for _ in range(NUM_LAYERS)])

    def forward(self, inputs_embeds: torch.Tensor) -> torch.Tensor:
        hidden = inputs_embeds
        for decoder_layer in self.layers:
            hidden = decoder_layer(hidden)
        return hidden


class MiniMaxH3Qwen3VLEncoder(nn.Module):
    def __init__(self, *, load_model: bool = True) -> None:
        super().__init__()
        if not load_model:
            return
        self.vision = MiniMaxH3Qwen3VLVisionModel()
        self.text_model = MiniMaxH3Qwen3VLTextModel()

    @property
    def is_loaded(self) -> bool:
        return hasattr(self, "text_model")

    def _encode(self, input_ids: torch.Tensor, *,
                pixel_values: torch.Tensor | None = None) -> torch.Tensor:
        inputs_embeds = self.text_model.embed_tokens(input_ids)
        if pixel_values is not None:
            inputs_embeds = inputs_embeds + self.vision(pixel_values).mean(0)
        return self.text_model(inputs_embeds).to(torch.bfloat16)

    def encode_ids(self, input_ids: torch.Tensor, *,
                   pixel_values: torch.Tensor | None = None) -> torch.Tensor:
        if not self.is_loaded:
            raise RuntimeError("MiniMax H3 text encoder is only loaded on the encoder TP ranks")
        return self._encode(input_ids, pixel_values=pixel_values)

    def forward(self, input_ids: torch.Tensor, *,
                pixel_values: torch.Tensor | None = None) -> torch.Tensor:
        """Upstream's hook-compatible entry point (model-level CPU offload); H3 calls
        ``encode_ids`` otherwise."""
        return self.encode_ids(input_ids, pixel_values=pixel_values)
