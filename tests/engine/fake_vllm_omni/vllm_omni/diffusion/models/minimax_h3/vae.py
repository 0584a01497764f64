"""Toys of H3's VAE adapters (vae.py), with 0.30.0's structure: method calls and an alias.

Upstream wraps a module loaded from the checkpoint (``remote``) and registers its inner model a
second time as ``model`` (``self.model = self.remote.model``), so ``named_modules`` lists it only
as ``remote.model``. Encoding goes through methods, never through a forward of the adapter or of
``remote``/``model``: ``MiniMaxH3VideoVAE.encode_image`` calls ``self.model.encode_images``
(checkpoint code, which runs ``encoder`` and ``quant_conv``); ``MiniMaxH3AudioVAE.encode_waveform``
calls ``self.model.encoder``, ``pre_block`` and ``mean_proj`` itself. So a hook on ``video_vae``,
``remote`` or ``model`` never fires, and one on the modules those methods call does. The video
adapter also holds upstream's two residency proxies (``encoder_component``,
``decoder_component``: modules with nothing inside). The checkpoint's classes are not in the
wheel; the toys here have only the children the wheel's own code reaches (``self.model.encoder``,
``self.model.quant_conv``, ...), plus the audio decoder, kept on ``remote`` (not hooked).
"""

from __future__ import annotations

import torch
from torch import nn

WIDTH = 8


class _VideoVAEModel(nn.Module):
    """The checkpoint's video VAE (remote code upstream)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(WIDTH, WIDTH)
        self.quant_conv = nn.Linear(WIDTH, WIDTH)
        self.post_quant_conv = nn.Linear(WIDTH, WIDTH)
        self.decoder = nn.Linear(WIDTH, WIDTH)

    def encode_images(self, image: torch.Tensor) -> list[torch.Tensor]:
        return [self.quant_conv(torch.tanh(self.encoder(image)))]

    def decode_base(self, latent: torch.Tensor) -> torch.Tensor:
        return self.decoder(torch.tanh(self.post_quant_conv(latent)))


class _AudioVAEModel(nn.Module):
    """The checkpoint's audio VAE (remote code upstream)."""

    attn_proj = True

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(WIDTH, WIDTH)
        self.pre_block = nn.Linear(WIDTH, WIDTH)
        self.mean_proj = nn.Linear(WIDTH, WIDTH)

    @staticmethod
    def preprocess(waveform: torch.Tensor, sample_rate: int) -> torch.Tensor:
        return waveform * 0.5


class _Remote(nn.Module):
    """The checkpoint's component wrapper (``component_cls(model)`` upstream)."""

    def __init__(self, model: nn.Module, decoder: nn.Module | None = None) -> None:
        super().__init__()
        self.model = model
        if decoder is not None:
            self.decoder = decoder

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.decoder(latent))


class _VideoVAEPartProxy(nn.Module):
    """Residency proxy for one half of the video VAE: a module with nothing inside."""

    def __init__(self, vae: MiniMaxH3VideoVAE, part: str) -> None:
        super().__init__()
        object.__setattr__(self, "_vae", vae)
        object.__setattr__(self, "_part", part)


class MiniMaxH3VideoVAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.remote = _Remote(_VideoVAEModel())
        self.model = self.remote.model
        self.encoder_component = _VideoVAEPartProxy(self, "encoder")
        self.decoder_component = _VideoVAEPartProxy(self, "decoder")

    def encode_image(self, image: torch.Tensor) -> torch.Tensor:
        latent = self.model.encode_images(image)[0]
        return latent.float()

    def decode_latent(self, latent: torch.Tensor) -> torch.Tensor:
        return self.model.decode_base(latent)


class MiniMaxH3AudioVAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.remote = _Remote(_AudioVAEModel(), decoder=nn.Linear(WIDTH, WIDTH))
        self.model = self.remote.model
        self.sample_rate = 32000

    def encode_waveform(self, waveform: torch.Tensor, sample_rate: int) -> tuple[torch.Tensor, int]:
        audio = self.model.preprocess(waveform.float(), sample_rate)
        latent = self.model.encoder(audio)
        if bool(getattr(self.model, "attn_proj", False)):
            latent = self.model.pre_block(latent)
        latent = self.model.mean_proj(latent).float()
        return latent, int(latent.shape[0])

    def decode_latent(self, latent: torch.Tensor) -> torch.Tensor:
        return self.remote.decode(latent)


__all__ = ["MiniMaxH3AudioVAE", "MiniMaxH3VideoVAE"]
