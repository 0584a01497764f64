"""Model shapes and seeded weights: generated at start-up, never downloaded, identified by hash."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

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


M = TypeVar("M", bound=nn.Module)

# torch.nn.init's fills that dispatch through __torch_function__ (so a mode can see them), and so
# the only ones the default init of Linear, Embedding and the conv layers runs.
DEFAULT_FILLS = frozenset({nn.init.kaiming_uniform_, nn.init.uniform_, nn.init.normal_,
                           nn.init.constant_})


class _SkipDefaultFills(TorchFunctionMode):
    """While active (on this thread only), torch.nn.init's default fills leave their tensor as
    allocated and are recorded, so a module can be built without drawing values that
    :func:`initialise` overwrites anyway (a fifth of an engine's model build)."""

    def __init__(self) -> None:
        super().__init__()
        self.skipped: list[torch.Tensor] = []

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func in DEFAULT_FILLS:
            tensor: torch.Tensor = args[0] if args else kwargs["tensor"]
            self.skipped.append(tensor)
            return tensor
        return func(*args, **kwargs)


def seeded(build: Callable[[], M], seed: int) -> M:
    """``build()`` with every parameter drawn by :func:`initialise` from ``seed``.

    The same values as ``initialise(build(), seed)``, without first filling the parameters with
    torch's default init. A tensor whose default fill was skipped must be one of the module's
    parameters (which :func:`initialise` draws, every one); anything else, a buffer say, would be
    left as uninitialised memory, so that is refused.
    """
    with _SkipDefaultFills() as mode:
        module = build()
    parameters = {id(parameter) for parameter in module.parameters()}
    unfilled = [tensor for tensor in mode.skipped if id(tensor) not in parameters]
    if unfilled:
        raise RuntimeError(
            f"seeded({getattr(build, '__name__', build)!r}): {len(unfilled)} tensor(s) other "
            f"than parameters were default-initialised (first of shape "
            f"{tuple(unfilled[0].shape)}); initialise() would leave them unfilled"
        )
    initialise(module, seed)
    return module


def initialise(module: nn.Module, seed: int) -> None:
    """Overwrite every parameter from one CPU generator, in name order (those under
    :data:`DRAWN_LAST` after the rest), so weights are a pure function of ``seed`` whatever
    torch's global RNG did before.

    Each parameter is drawn in place: ``normal_`` is what ``torch.randn`` runs on a fresh tensor,
    and the in-place scalings are the same elementwise operations, so the values are bit for bit
    those of drawing a new tensor, scaling it and copying it in (a test holds it to that).
    """
    generator = torch.Generator().manual_seed(seed)
    ordered = sorted(
        module.named_parameters(), key=lambda item: (item[0].startswith(DRAWN_LAST), item[0])
    )
    with torch.no_grad():
        for name, parameter in ordered:
            if parameter.dtype != torch.float32 or not parameter.is_contiguous():
                raise ValueError(
                    f"initialise: parameter {name} is {parameter.dtype}"
                    f"{'' if parameter.is_contiguous() else ', not contiguous'}; weights are "
                    "drawn as contiguous float32 (cast the model after initialising it)"
                )
            parameter.normal_(generator=generator)
            if parameter.dim() >= 2:
                # fan-in scaling keeps activations O(1) through the random network
                parameter.div_(float(parameter.shape[-1]) ** 0.5)
            elif name.endswith("bias"):
                parameter.mul_(0.02)


def weights_sha256(module: nn.Module) -> str:
    """sha256 over the float32 state_dict: names and bytes, in name order."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode("utf-8") + b"\0")
        digest.update(str(tuple(tensor.shape)).encode("ascii"))
        # The array's own buffer: hashing needs no copy of its bytes.
        digest.update(tensor.detach().to(torch.float32).contiguous().numpy())
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
