"""The seeded weights and their hash: built faster at start-up, bit for bit what they were.

The engine builds its model without torch's default init (``seeded``), draws every parameter in
place and hashes the arrays' own buffers. Each is held here to the way it was done before (a
default-initialised module, a fresh ``torch.randn`` per parameter scaled and copied in, a hash
over ``tobytes()`` copies), on the reference shape that the campaign's quality figures were
calibrated on, and the hash to the value those figures were measured with.
"""

from __future__ import annotations

import hashlib
import threading

import pytest
import torch
from torch import nn

from engine.reference.pipeline.model import ReferenceModel
from engine.reference.pipeline.weights import (
    DRAWN_LAST,
    WEIGHTS_SEED,
    ModelShape,
    initialise,
    seeded,
    weights_sha256,
)
from tests.engine.reference_pins import REFERENCE_WEIGHTS_SHA256

pytestmark = pytest.mark.engine


def drawn_as_before(module: nn.Module, seed: int) -> None:
    """``initialise`` as it was: a new tensor per parameter, scaled, then copied in."""
    generator = torch.Generator().manual_seed(seed)
    ordered = sorted(
        module.named_parameters(), key=lambda item: (item[0].startswith(DRAWN_LAST), item[0])
    )
    with torch.no_grad():
        for name, parameter in ordered:
            values = torch.randn(parameter.shape, generator=generator, dtype=torch.float32)
            if parameter.dim() >= 2:
                values = values / float(parameter.shape[-1]) ** 0.5
            elif name.endswith("bias"):
                values = values * 0.02
            parameter.copy_(values)


def hashed_as_before(module: nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode("utf-8") + b"\0")
        digest.update(str(tuple(tensor.shape)).encode("ascii"))
        digest.update(tensor.detach().to(torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()


@pytest.mark.parametrize("salt", [0, 7])
def test_the_reference_model_is_what_it_was(salt: int) -> None:
    seed = WEIGHTS_SEED + salt
    fast = seeded(lambda: ReferenceModel(ModelShape()), seed)
    before = ReferenceModel(ModelShape())
    drawn_as_before(before, seed)
    kept = before.state_dict()
    assert list(fast.state_dict()) == list(kept)
    for name, tensor in fast.state_dict().items():
        assert torch.equal(tensor, kept[name]), name
    assert weights_sha256(fast) == hashed_as_before(before)
    if salt == 0:
        assert weights_sha256(fast) == REFERENCE_WEIGHTS_SHA256
    else:
        assert weights_sha256(fast) != REFERENCE_WEIGHTS_SHA256


class _WithBuffer(nn.Module):
    """A buffer filled by a torch.nn.init function: ``seeded`` would leave it unfilled."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.register_buffer("table", nn.init.uniform_(torch.empty(3, 4)))


def test_seeded_refuses_a_default_filled_tensor_that_is_not_a_parameter() -> None:
    with pytest.raises(RuntimeError, match=r"other than parameters.*\(3, 4\)"):
        seeded(_WithBuffer, 1)
    # The same module built plainly and initialised has its buffer filled: only seeded refuses.
    plain = _WithBuffer()
    initialise(plain, 1)
    assert torch.isfinite(plain.table).all() and bool((plain.table != 0).any())


def test_seeded_draws_every_parameter_and_skips_nothing_outside_its_build() -> None:
    small = seeded(lambda: nn.Sequential(nn.Linear(8, 16), nn.Embedding(5, 8)), 3)
    reference = nn.Sequential(nn.Linear(8, 16), nn.Embedding(5, 8))
    drawn_as_before(reference, 3)
    for (name, got), (_, want) in zip(
        small.state_dict().items(), reference.state_dict().items(), strict=True
    ):
        assert torch.equal(got, want), name
    # Outside seeded, and on other threads while it runs, torch's default init is untouched.
    after = nn.Linear(64, 64)
    weight = after.weight.detach()
    assert bool((weight != 0).any()) and float(weight.abs().max()) <= 1 / 8
    seen: list[torch.Tensor] = []

    def build() -> nn.Linear:
        thread = threading.Thread(target=lambda: seen.append(nn.init.constant_(
            torch.zeros(3), 2.0)))
        thread.start()
        thread.join()
        return nn.Linear(2, 2)

    seeded(build, 0)
    assert torch.equal(seen[0], torch.full((3,), 2.0))


def test_initialise_refuses_weights_that_are_not_float32() -> None:
    half = nn.Linear(4, 4).to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"parameter bias is torch.bfloat16"):
        initialise(half, 0)
