"""Model shapes and seeded weights: generated at start-up, never downloaded, identified by hash."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

import torch
from torch import nn

from engine.reference.constants import DIT_BLOCKS

logger = logging.getLogger(__name__)

# The model's own seed; a profile's seed-salt is added so a test can stand up "another model".
WEIGHTS_SEED = 20_261_130


@dataclass(frozen=True)
class ModelShape:
    """Every size the pipeline is built with (H3-shaped, scaled down for two CPU cores)."""

    hidden: int = 64
    heads: int = 2
    blocks: int = DIT_BLOCKS  # profiles check Cache-DiT's Fn/Bn against it
    mlp_ratio: int = 4
    latent_channels: int = 16  # video and audio latents share it, so the joint output is one tensor
    patch: int = 16  # one video latent token per 16x16 pixels, as H3
    text_tokens: int = 64  # prompt bytes, padded or cut
    text_layers: int = 2
    image_size: int = 32  # reference images are resized to this square before patchifying
    image_patch: int = 8
    audio_hop: int = 1280  # 32 kHz / 25: one audio latent token and one ref-audio token per hop
    audio_ref_tokens: int = 32  # the first 1.28 s of a reference clip conditions the audio
    window_frames: int = 4  # latent frames per self-attention window (keeps attention linear)
    # The DiT's context embedder (encoders.ConditionEmbedder), step-invariant: sized so that
    # recomputing it at every step is about two thirds of a 112x64 B0 request on one thread.
    context_width: int = 384
    context_heads: int = 6
    context_layers: int = 18

    @property
    def image_tokens(self) -> int:
        return (self.image_size // self.image_patch) ** 2


# Parameters drawn after all others: modules added to the model later, so that adding them left
# every earlier weight as it was (the reference campaign's quality figures were calibrated on it).
DRAWN_LAST = ("dit.context_embedder.",)


def initialise(module: nn.Module, seed: int) -> None:
    """Overwrite every parameter from one CPU generator, in name order (those under
    :data:`DRAWN_LAST` after the rest), so weights are a pure function of ``seed`` whatever
    torch's global RNG did before."""
    generator = torch.Generator().manual_seed(seed)
    ordered = sorted(
        module.named_parameters(), key=lambda item: (item[0].startswith(DRAWN_LAST), item[0])
    )
    with torch.no_grad():
        for name, parameter in ordered:
            values = torch.randn(parameter.shape, generator=generator, dtype=torch.float32)
            if parameter.dim() >= 2:
                # fan-in scaling keeps activations O(1) through the random network
                values = values / float(parameter.shape[-1]) ** 0.5
            elif name.endswith("bias"):
                values = values * 0.02
            parameter.copy_(values)


def weights_sha256(module: nn.Module) -> str:
    """sha256 over the float32 state_dict: names and bytes, in name order."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode("utf-8") + b"\0")
        digest.update(str(tuple(tensor.shape)).encode("ascii"))
        digest.update(tensor.detach().to(torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()


def resolve_device(requested: str) -> torch.device:
    """The device a profile asks for; ``auto`` takes an accelerator only when torch sees one."""
    if requested == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        npu = getattr(torch, "npu", None)
        if npu is not None and npu.is_available():
            return torch.device("npu")
        return torch.device("cpu")
    return torch.device(requested)


def resolve_dtype(requested: str) -> torch.dtype:
    return torch.bfloat16 if requested == "bfloat16" else torch.float32
