"""Every module path the capture hooks on the fake vLLM-Omni is one H3 0.30.0 has.

The module capture's tests run in the fake upstream (tests/engine/fake_vllm_omni); what they
prove about names holds on a real server only if the fake is built like 0.30.0. So for each
stage, every module the capture hooks on the fake at block level, and every module inside each
block (what a `within` capture hooks), is followed statically in the wheel from
MiniMaxH3Pipeline (tests/contract/module_paths.py): through the wheel's classes, the alias H3's
VAEs register (`model`, also `remote.model`), and, inside the checkpoint's own VAE code, only
what the wheel's code reaches (`self.model.encoder`).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from engine.vllm_omni.hooks import ENCODER_BLOCKS, H3
from tests.contract.module_paths import Reached, follow
from tests.contract.upstream import Upstream

torch = pytest.importorskip("torch")

from engine.module_capture import block_level, inside  # noqa: E402
from engine.vllm_omni.watch import capture_roots  # noqa: E402
from tests.engine.fake_upstream import FAKE, drop_fake_modules  # noqa: E402

PIPELINE = "MiniMaxH3Pipeline"


@pytest.fixture
def fake_pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The fake's H3 pipeline; the fake is importable only inside the test."""
    drop_fake_modules()
    monkeypatch.syspath_prepend(str(FAKE))
    try:
        from vllm_omni.diffusion.data import OmniDiffusionConfig
        from vllm_omni.diffusion.models.minimax_h3.pipeline_minimax_h3 import MiniMaxH3Pipeline

        yield MiniMaxH3Pipeline(od_config=OmniDiffusionConfig())
    finally:
        drop_fake_modules()


def _hooked(pipeline: Any, stage: str) -> SimpleNamespace:
    roots = capture_roots(pipeline, stage)
    blocks = [path for path, _ in block_level(roots)]
    within = [sub for path in blocks for sub, _ in inside(roots, path)]
    return SimpleNamespace(blocks=blocks, all=within)


@pytest.mark.parametrize("stage", ["dit", "encoders"])
def test_every_path_the_capture_hooks_on_the_fake_is_in_the_wheel(
        upstream: Upstream, fake_pipeline: Any, stage: str) -> None:
    hooked = _hooked(fake_pipeline, stage)
    assert hooked.blocks and set(hooked.blocks) <= set(hooked.all)
    missing = {path: found for path in hooked.all
               if isinstance(found := follow(upstream, H3, PIPELINE, path), str)}
    assert missing == {}, "\n".join(f"{path}: {why}" for path, why in missing.items())


def test_a_module_the_wheel_lacks_is_named_when_the_fake_grows_one(
        upstream: Upstream, fake_pipeline: Any) -> None:
    fake_pipeline.text_encoder.text_model.norm = torch.nn.LayerNorm(4)
    hooked = _hooked(fake_pipeline, "encoders")
    assert "text_encoder.text_model.norm" in hooked.blocks
    found = follow(upstream, H3, PIPELINE, "text_encoder.text_model.norm")
    assert isinstance(found, str) and "MiniMaxH3Qwen3VLTextModel" in found \
        and "assigns no self.norm" in found


def test_the_fakes_encoder_blocks_are_h3s_own(upstream: Upstream, fake_pipeline: Any) -> None:
    blocks = _hooked(fake_pipeline, "encoders").blocks
    assert set(ENCODER_BLOCKS) <= set(blocks)
    assert any(path.startswith("text_encoder.text_model.layers.") for path in blocks)
    # the VAE modules under the name H3's code uses, reached through the checkpoint's model
    found = follow(upstream, H3, PIPELINE, "video_vae.model.encoder")
    assert isinstance(found, Reached) and "model.encoder" in found.reach


@pytest.mark.parametrize(("path", "said"), [
    # the fake's paths before it was rebuilt to 0.30.0
    ("text_encoder.layers.0", "class MiniMaxH3Qwen3VLEncoder (and its bases in the wheel) "
                              "assigns no self.layers"),
    ("video_vae.encoder", "class MiniMaxH3VideoVAE (and its bases in the wheel) assigns no "
                          "self.encoder"),
    ("audio_vae.model.decoder", "MiniMaxH3AudioVAE never reaches self.remote.model.decoder or "
                                "self.model.decoder"),
    ("transformer.blocks.first", "is a module list: expected an index, found 'first'"),
])
def test_a_path_h3_does_not_have_is_refused_naming_where(
        upstream: Upstream, path: str, said: str) -> None:
    found = follow(upstream, H3, PIPELINE, path)
    assert isinstance(found, str) and said in found
