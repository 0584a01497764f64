"""The encoder stage's module capture inside the vLLM-Omni worker extension, on the fake.

The fake upstream is built to 0.30.0's structure (tests/engine/fake_vllm_omni): H3 calls its text
encoder through ``encode_ids`` (never the encoder's forward) and encodes with its VAEs through
methods of ``model``, a module registered twice (``remote.model`` and ``model``). These tests see
the capture record calls in every encoder, name each module once under H3's own path, accept every
name it reports back as ``within``, and name a planted divergence in a text-encoder layer or a
VAE module. The fake is on ``sys.path`` only inside these tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from engine.module_capture import CaptureRequest, ModuleCapture  # noqa: E402
from engine.vllm_omni.hooks import ENCODER_BLOCKS, ENCODER_ROOTS  # noqa: E402
from engine.vllm_omni.watch import capture_roots  # noqa: E402
from ref2va_accept.judging.localize._capture import divergence, read_log  # noqa: E402
from ref2va_contract.diagnostics import (  # noqa: E402
    CAPTURE_REPORT_KEY,
    DUMP_SUFFIX,
    ENABLED_PATH_FILE,
)
from tests.engine.fake_upstream import (  # noqa: E402
    STEPS,
    capture_report,
    first_broken,
    hook_count,
    log_lines,
    make_worker,
    run,
)
from tests.engine.fake_upstream import capture_request as _request  # noqa: E402

pytestmark = pytest.mark.engine

ENCODERS = {"stage": "encoders"}
# The fake's encoder calls, in the order they complete: the reference image through the video
# VAE, the audio through the audio VAE, then the text (with the image) through the text encoder.
CALLED = [
    "video_vae.model.encoder", "video_vae.model.quant_conv",
    "audio_vae.model.encoder", "audio_vae.model.pre_block", "audio_vae.model.mean_proj",
    "text_encoder.text_model.embed_tokens", "text_encoder.vision.patch_embed",
    "text_encoder.vision.blocks.0", "text_encoder.vision.merger",
    "text_encoder.text_model.layers.0", "text_encoder.text_model.layers.1",
]
# Hooked too, never called while encoding: the video VAE's decode half.
DECODE_HALF = ["video_vae.model.post_quant_conv", "video_vae.model.decoder"]


def test_a_block_level_encoder_capture_records_the_modules_h3_calls_in_every_encoder(
    upstream: SimpleNamespace, root: Path
) -> None:
    worker = make_worker(upstream)
    run(worker, _request(upstream, root / "e", ENCODERS))
    lines = log_lines(root / "e")
    assert [line["module"] for line in lines] == CALLED
    assert {line["step"] for line in lines} == {None} and {line["call"] for line in lines} == {0}
    report = capture_report(root / "e")
    assert (report["modules_hooked"], report["calls"]) == (len(CALLED + DECODE_HALF), len(CALLED))
    assert report["calls_by_root"] == {"text_encoder.vision": 3, "text_encoder.text_model": 3,
                                       "video_vae.model": 2, "audio_vae.model": 3}
    assert report["errors"] == []
    # the paths the contract follows in the wheel are the ones hooked here
    hooked = {path for path, _ in
              ModuleCapture.for_stage(CaptureRequest("encoders", None, None, False), root,
                                      capture_roots(worker.model_runner.pipeline, "encoders"),
                                      lambda: True, lambda: None).modules}
    assert set(ENCODER_BLOCKS) <= hooked


def test_hooks_on_the_encoders_direct_children_would_record_no_vae_call(
    upstream: SimpleNamespace, root: Path
) -> None:
    # What a capture rooted at the pipeline's attributes hooks (`video_vae.remote`,
    # `video_vae.model`, ...): the fake, like 0.30.0, encodes through methods, so none of those
    # forwards runs; hooked alone, they would leave the stage with no VAE call at all.
    worker = make_worker(upstream)
    pipeline = worker.model_runner.pipeline
    roots = [(name, getattr(pipeline, name)) for name in ("video_vae", "audio_vae")]
    capture = ModuleCapture.for_stage(CaptureRequest("encoders", None, None, False),
                                      root / "direct", roots, lambda: True, lambda: None)
    assert {path for path, _ in capture.modules} >= {"video_vae.remote", "video_vae.model",
                                                     "audio_vae.remote", "audio_vae.model"}
    capture.install()
    try:
        run(worker, _request(upstream, root / "req"))
    finally:
        capture.remove()
    assert capture.report()["calls"] == 0
    assert capture.report()["calls_by_root"] == {"video_vae": 0, "audio_vae": 0}


def test_a_module_registered_twice_is_hooked_once_under_h3s_name_and_every_name_is_accepted(
    upstream: SimpleNamespace, root: Path
) -> None:
    pipeline = make_worker(upstream).model_runner.pipeline
    # named_modules lists the VAE's model once, as remote.model: H3's own name never appears
    assert "video_vae.model.encoder" not in dict(pipeline.named_modules())
    assert pipeline.video_vae.model is pipeline.video_vae.remote.model
    roots = capture_roots(pipeline, "encoders")
    assert [path for path, _ in roots] == list(ENCODER_ROOTS)
    blocks = ModuleCapture.for_stage(CaptureRequest("encoders", None, None, False), root,
                                     roots, lambda: True, lambda: None).modules
    assert len({id(module) for _, module in blocks}) == len(blocks) == len(CALLED + DECODE_HALF)
    # every name a block-level capture reports is taken back as `within`, and names what it hooks
    for path, module in blocks:
        within = ModuleCapture.for_stage(CaptureRequest("encoders", None, path, False), root,
                                         roots, lambda: True, lambda: None).modules
        assert within[0] == (path, module)
        assert all(sub == path or sub.startswith(f"{path}.") for sub, _ in within)
    # and through the worker: a capture within a VAE module H3 calls records its calls
    worker = make_worker(upstream)
    run(worker, _request(upstream, root / "w", {**ENCODERS, "within": "audio_vae.model"}))
    assert [line["module"] for line in log_lines(root / "w")] == [
        "audio_vae.model.encoder", "audio_vae.model.pre_block", "audio_vae.model.mean_proj"]
    assert capture_report(root / "w")["calls_by_root"] == {"audio_vae.model": 3}


@pytest.mark.parametrize(("planted", "point"), [
    ("text_encoder.text_model.layers.1", "cond.text"),
    ("video_vae.model.encoder", "cond.image"),
    ("audio_vae.model.pre_block", "cond.audio"),
])
def test_an_encoder_capture_names_a_planted_divergence_in_any_encoder(
    upstream: SimpleNamespace, root: Path, planted: str, point: str
) -> None:
    from safetensors.torch import load_file

    moved = make_worker(upstream)
    moved.model_runner.pipeline.plant_divergence(planted)
    run(make_worker(upstream), _request(upstream, root / "plain", ENCODERS, points=[point]))
    run(moved, _request(upstream, root / "planted", ENCODERS, points=[point]))
    assert first_broken(log_lines(root / "plain"), log_lines(root / "planted")) == planted
    found = divergence(read_log(root / "plain"), read_log(root / "planted"))
    assert (found.kind, found.module) == ("differs", planted)
    # and the nudge reaches the conditioning the DiT is given
    file = f"{point}{DUMP_SUFFIX}"
    assert not torch.equal(load_file(root / "plain" / file)[point],
                           load_file(root / "planted" / file)[point])


def test_the_encoder_stage_is_captured_only_before_diffuse(
    upstream: SimpleNamespace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 0.30.0's VAEs encode the references before diffuse and decode after it: the video VAE's
    # decoder (hooked) runs in decode, and so does, here, the text encoder; neither is the
    # encoder stage's
    worker = make_worker(upstream)
    pipeline = worker.model_runner.pipeline
    real = type(pipeline).decode

    def decode(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.text_encoder.encode_ids(torch.zeros(3, 8))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(pipeline), "decode", decode)
    run(worker, _request(upstream, root / "e", ENCODERS))
    assert [(line["module"], line["call"]) for line in log_lines(root / "e")] == \
        [(module, 0) for module in CALLED]


def test_a_path_inside_the_text_encoder_is_checked_by_the_owner_alone(
    upstream: SimpleNamespace, root: Path
) -> None:
    from vllm_omni.diffusion.models.minimax_h3.encoder import MiniMaxH3Qwen3VLEncoder

    peer = make_worker(upstream, rank=1)
    # upstream's text encoder on a rank outside the encoder group: a stub with nothing inside
    peer.model_runner.pipeline.text_encoder = MiniMaxH3Qwen3VLEncoder(load_model=False)
    capture = {**ENCODERS, "within": "text_encoder.text_model.layers.1"}
    # the peer cannot see the layer and must not refuse alone (rank 0 would wait in a
    # collective); the owner, which loads the encoder, captures it
    run(peer, _request(upstream, root / "peer", capture))
    run(peer, _request(upstream, root / "peer-blocks", ENCODERS))  # its roots: the VAEs' alone
    run(make_worker(upstream), _request(upstream, root / "owner", capture))
    assert [line["module"] for line in log_lines(root / "owner")] == [
        "text_encoder.text_model.layers.1.mlp", "text_encoder.text_model.layers.1"]
    # a layer the owner lacks fails the request there, once the pipeline has run to the end
    owner = make_worker(upstream)
    with pytest.raises(RuntimeError, match=r"no module 'text_encoder\.text_model\.layers\.9'"):
        run(owner, _request(upstream, root / "missing",
                            {**capture, "within": "text_encoder.text_model.layers.9"}))
    assert owner.model_runner.pipeline.transformer._calls == STEPS
    assert CAPTURE_REPORT_KEY not in json.loads((root / "missing" / ENABLED_PATH_FILE).read_text())
    assert hook_count(owner.model_runner.pipeline) == 0
