"""The localization pass's module capture inside the vLLM-Omni worker extension, on the fake.

The fake upstream (tests/engine/fake_vllm_omni) builds its DiT with 0.30.0's module names and can
plant a divergence (a nudge of one part in 2**12) in one module at one step, so these tests see
the capture log name the module a real server would, and the judge's comparator find it. The fake
is on ``sys.path`` only inside these tests and its modules are dropped afterwards.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from engine import module_capture  # noqa: E402
from engine.vllm_omni.hooks import UPSTREAM_NAMES  # noqa: E402
from engine.vllm_omni.request_block import DiagnosticsRefused  # noqa: E402
from engine.vllm_omni.watch import ENCODER_MODULES  # noqa: E402
from ref2va_accept.judging.localize.capture import parting, read_log  # noqa: E402
from ref2va_contract.diagnostics import (  # noqa: E402
    ACCEPTANCE_FIELD,
    CAPTURE_DIR,
    CAPTURE_KEY,
    CAPTURE_LOG_FILE,
    CAPTURE_REPORT_KEY,
    DUMP_DIR_KEY,
    DUMP_SUFFIX,
    ENABLED_PATH_FILE,
    POINTS_KEY,
)
from tests.engine.fake_upstream import make_worker  # noqa: E402

pytestmark = pytest.mark.engine

STEPS = 6
STEP = 2  # the step captured, and the step the divergence is planted at
PLANTED = "transformer.blocks.1.mlp.fc2"
# The fake DiT's blocks, in the order their calls complete (tests/engine/fake_vllm_omni).
BLOCKS = [
    "transformer.video_patch_proj", "transformer.audio_patch_proj", "transformer.condition_proj",
    "transformer.token_refiner", "transformer.time_embedder", "transformer.blocks.0",
    "transformer.blocks.1", "transformer.blocks.2", "transformer.final_layer",
]
SHA256 = re.compile(r"^[0-9a-f]{64}$")




def _request(up: SimpleNamespace, dump: Path, capture: Any = None,
             points: Any = ("cond.text",), *, quality: str | None = "lossless") -> Any:
    block: dict[str, Any] = {DUMP_DIR_KEY: str(dump), POINTS_KEY: list(points)}
    if capture is not None:
        block[CAPTURE_KEY] = capture
    generator = torch.Generator().manual_seed(11)
    prompt = {"text": torch.randn(3, 8, generator=generator),
              "image": torch.randn(4, 8, generator=generator),
              "audio": torch.randn(2, 8, generator=generator)}
    sampling = up.sampling(num_inference_steps=STEPS, seed=5, quality=quality,
                           extra_args={"task": "ref2va", ACCEPTANCE_FIELD: block})
    return up.request(prompt=prompt, sampling_params=sampling, request_id="video_sync-1")


def _run(worker: Any, req: Any) -> Any:
    return worker.execute_model(req, worker.od_config, None).output


def _dit(step: int = STEP, within: str | None = None, tensors: bool = False) -> dict[str, Any]:
    return {"stage": "dit", "step": step, "within": within, "tensors": tensors}


def _lines(folder: Path) -> list[dict[str, Any]]:
    text = (folder / CAPTURE_LOG_FILE).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def _digests(entries: list[dict[str, Any]]) -> list[str]:
    return [entry["sha256"] for entry in entries]


def _hooks(pipeline: Any) -> int:
    return sum(len(module._forward_hooks) for module in pipeline.modules())


def _first_broken(plain: list[dict[str, Any]], planted: list[dict[str, Any]]) -> str:
    """The first call whose outputs differ while its inputs are equal; the calls before it are
    equal (written here apart from the judge's comparator, which the tests check as well)."""
    assert [(x["module"], x["call"]) for x in plain] == \
        [(y["module"], y["call"]) for y in planted]
    for x, y in zip(plain, planted, strict=True):
        if _digests(x["outputs"]) == _digests(y["outputs"]):
            continue
        assert _digests(x["inputs"]) == _digests(y["inputs"]), f"{x['module']}'s inputs differ"
        return str(x["module"])
    raise AssertionError("every call's outputs are equal")


def test_a_block_level_dit_capture_logs_each_block_once_at_its_step(
    upstream: SimpleNamespace, root: Path
) -> None:
    _run(make_worker(upstream), _request(upstream, root / "c", _dit()))
    lines = _lines(root / "c")
    # one line per block call, in completion order; one DiT forward only (every call index 0)
    assert [line["module"] for line in lines] == BLOCKS
    assert [line["index"] for line in lines] == list(range(len(BLOCKS)))
    assert {line["call"] for line in lines} == {0}
    assert {line["step"] for line in lines} == {STEP}
    for line in lines:
        assert line["inputs"] and line["outputs"]
        for entry in line["inputs"] + line["outputs"]:
            assert SHA256.match(entry["sha256"]) and "file" not in entry
    # and that forward is step 2's: the time embedder was given t = 1 - 2/6
    t = torch.tensor([1.0 - STEP / STEPS], dtype=torch.float32)
    embedder = lines[BLOCKS.index("transformer.time_embedder")]
    assert embedder["inputs"][0] == {"shape": [1], "dtype": "F32",
                                     "sha256": hashlib.sha256(t.numpy().tobytes()).hexdigest()}
    assert not (root / "c" / CAPTURE_DIR).exists()
    report = json.loads((root / "c" / ENABLED_PATH_FILE).read_text())
    assert report[CAPTURE_REPORT_KEY] == {
        "stage": "dit", "step": STEP, "first_step": None, "within": None, "tensors": False,
        "modules_hooked": len(BLOCKS), "calls": len(BLOCKS), "bytes_written": 0,
        "seconds": report[CAPTURE_REPORT_KEY]["seconds"], "errors": []}
    # the request's own points are written as ever
    assert (root / "c" / f"cond.text{DUMP_SUFFIX}").exists()


def test_a_capture_from_a_first_step_logs_every_step_up_to_its_last(
    upstream: SimpleNamespace, root: Path
) -> None:
    # The judge's level 1 when the frozen points skip steps: steps 1..3, each line naming its step
    _run(make_worker(upstream), _request(upstream, root / "r", {**_dit(step=3), "first_step": 1}))
    lines = _lines(root / "r")
    assert [line["step"] for line in lines] == [s for s in (1, 2, 3) for _ in BLOCKS]
    assert [line["module"] for line in lines] == BLOCKS * 3
    assert {line["call"] for line in lines} == {0}  # call indexes count per step


def test_a_step_served_from_the_cache_captures_no_call(
    upstream: SimpleNamespace, root: Path
) -> None:
    # the toy cache serves step 3 from step 2's output: no module runs at step 3
    worker = make_worker(upstream, cache_backend="cache_dit")
    _run(worker, _request(upstream, root / "cached", _dit(step=3), quality=None))
    assert _lines(root / "cached") == []
    assert json.loads((root / "cached" / ENABLED_PATH_FILE).read_text())[
        CAPTURE_REPORT_KEY]["calls"] == 0


def test_a_capture_within_a_block_logs_its_submodules_and_writes_their_tensors(
    upstream: SimpleNamespace, root: Path
) -> None:
    from safetensors.torch import load_file

    worker = make_worker(upstream)
    _run(worker, _request(upstream, root / "w", _dit(within="transformer.blocks.1",
                                                        tensors=True)))
    lines = _lines(root / "w")
    block = worker.model_runner.pipeline.transformer.blocks[1]
    inside = {f"transformer.blocks.1.{name}".rstrip(".") for name, _ in block.named_modules()}
    assert {line["module"] for line in lines} == inside
    assert len(lines) == len(inside)  # each module called once, at step 2 only
    assert {"transformer.blocks.1.mlp.fc2", "transformer.blocks.1.attn.qkv_proj",
            "transformer.blocks.1.attn.attention"} <= inside
    order = [line["module"] for line in lines]
    # completion order: every submodule before the module around it, the block last
    assert order[-1] == "transformer.blocks.1"
    assert order.index("transformer.blocks.1.mlp.fc2") < order.index("transformer.blocks.1.mlp")
    written = 0
    for line in lines:
        for entry in line["inputs"] + line["outputs"]:
            tensor = next(iter(load_file(root / "w" / entry["file"]).values()))
            assert entry["file"].startswith(f"{CAPTURE_DIR}/")
            assert hashlib.sha256(tensor.contiguous().numpy().tobytes()).hexdigest() == \
                entry["sha256"]
            assert list(tensor.shape) == entry["shape"]
            written += tensor.numel() * tensor.element_size()
    report = json.loads((root / "w" / ENABLED_PATH_FILE).read_text())[CAPTURE_REPORT_KEY]
    assert report["within"] == "transformer.blocks.1" and report["tensors"] is True
    assert report["bytes_written"] == written > 0
    assert report["modules_hooked"] == len(inside) and report["errors"] == []


def test_a_planted_divergence_is_found_at_its_block_then_at_its_module(
    upstream: SimpleNamespace, root: Path
) -> None:
    planted = make_worker(upstream)
    planted.model_runner.pipeline.plant_divergence(PLANTED, step=STEP)
    for name, within in (("blocks", None), ("inside", "transformer.blocks.1")):
        _run(make_worker(upstream), _request(upstream, root / f"plain-{name}", _dit(within=within)))
        _run(planted, _request(upstream, root / f"planted-{name}", _dit(within=within)))
    assert _first_broken(_lines(root / "plain-blocks"),
                         _lines(root / "planted-blocks")) == "transformer.blocks.1"
    assert _first_broken(_lines(root / "plain-inside"), _lines(root / "planted-inside")) == PLANTED
    # the judge's comparator reads the logs as written and names the same places
    for name, module in (("blocks", "transformer.blocks.1"), ("inside", PLANTED)):
        found = parting(read_log(root / f"plain-{name}"), read_log(root / f"planted-{name}"))
        assert (found.kind, found.module) == ("differs", module)


def test_an_encoder_capture_names_the_planted_text_encoder_layer(
    upstream: SimpleNamespace, root: Path
) -> None:
    from safetensors.torch import load_file

    planted = make_worker(upstream)
    planted.model_runner.pipeline.plant_divergence("text_encoder.layers.1")
    encoders = {"stage": "encoders"}
    _run(make_worker(upstream), _request(upstream, root / "plain", encoders))
    _run(planted, _request(upstream, root / "planted", encoders))
    plain, moved = _lines(root / "plain"), _lines(root / "planted")
    # the fake has a text encoder and no VAEs: the encoder stage is its layers, before diffuse
    assert [line["module"] for line in plain] == ["text_encoder.layers.0", "text_encoder.layers.1"]
    assert _first_broken(plain, moved) == "text_encoder.layers.1"
    found = parting(read_log(root / "plain"), read_log(root / "planted"))
    assert (found.kind, found.module) == ("differs", "text_encoder.layers.1")
    # and the nudge reaches the conditioning the DiT is given
    point = f"cond.text{DUMP_SUFFIX}"
    assert not torch.equal(load_file(root / "plain" / point)["cond.text"],
                           load_file(root / "planted" / point)["cond.text"])
    report = json.loads((root / "planted" / ENABLED_PATH_FILE).read_text())[CAPTURE_REPORT_KEY]
    assert (report["stage"], report["step"], report["calls"]) == ("encoders", None, 2)


def test_the_encoder_stage_is_captured_only_before_diffuse(
    upstream: SimpleNamespace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 0.30.0's VAEs encode the references before diffuse and decode after it: a call of an
    # encoder module once diffuse has begun is not the encoder stage's
    worker = make_worker(upstream)
    pipeline = worker.model_runner.pipeline
    real = type(pipeline).decode

    def decode(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.text_encoder(torch.zeros(3, 8))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(pipeline), "decode", decode)
    _run(worker, _request(upstream, root / "e", {"stage": "encoders"}))
    assert [(line["module"], line["call"]) for line in _lines(root / "e")] == [
        ("text_encoder.layers.0", 0), ("text_encoder.layers.1", 0)]


@pytest.mark.parametrize("fails", [False, True])
def test_the_capture_hooks_are_removed_after_the_request(
    upstream: SimpleNamespace, root: Path, monkeypatch: pytest.MonkeyPatch, fails: bool
) -> None:
    worker = make_worker(upstream)
    pipeline = worker.model_runner.pipeline
    before = _hooks(pipeline)
    during: list[int] = []
    real = type(pipeline).decode

    def decode(self: Any, *args: Any, **kwargs: Any) -> Any:
        during.append(_hooks(self))
        if fails:
            raise RuntimeError("decoder failed")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(pipeline), "decode", decode)
    req = _request(upstream, root / "h", _dit(within="transformer.blocks.1"))
    if fails:
        with pytest.raises(RuntimeError, match="decoder failed"):
            _run(worker, req)
    else:
        _run(worker, req)
    inside = len(list(pipeline.transformer.blocks[1].modules()))
    assert during == [before + inside]  # one hook per module of the block while it ran
    assert _hooks(pipeline) == before
    assert len(_lines(root / "h")) == inside  # what was captured before the failure stays


@pytest.mark.parametrize(("capture", "named"), [
    (_dit(within="transformer.blocks.9"), "'transformer.blocks.9'"),
    ({"stage": "encoders", "within": "video_vae.encoder"}, "'video_vae.encoder'"),
    (_dit(step=STEPS), "capture.step must be an integer in 0..5"),
    ({"stage": "vae"}, "capture.stage must be one of"),
    ({"stage": "encoders", "step": 1}, "capture.step must be null"),
    ({**_dit(), "layer": 3}, "capture must be an object with keys"),
    ("dit", "capture must be an object with keys"),
    ({**_dit(), "tensors": "yes"}, "capture.tensors must be true or false"),
    (_dit(within=""), "capture.within must be a module path"),
])
def test_an_unknown_module_or_a_malformed_capture_is_refused_on_every_rank_before_running(
    upstream: SimpleNamespace, root: Path, capture: Any, named: str
) -> None:
    for rank in (0, 1):
        worker = make_worker(upstream, rank=rank)
        with pytest.raises(DiagnosticsRefused) as refused:
            _run(worker, _request(upstream, root / f"r{rank}", capture))
        assert named in str(refused.value)
        assert f"extra_params.{ACCEPTANCE_FIELD}.{CAPTURE_KEY}" in str(refused.value)
        assert worker.model_runner.pipeline.transformer._calls == 0
        assert _hooks(worker.model_runner.pipeline) == 0
    assert {p.name for p in root.iterdir()} == set()


def test_a_capture_inside_a_compiled_block_is_refused_on_every_rank(
    upstream: SimpleNamespace, root: Path
) -> None:
    # As vLLM-Omni's regional compile does without --enforce-eager (vllm_omni/diffusion/
    # compile.py): the block's forward is swapped for a compiled one, which would never call a
    # hook added inside it later. The block's own hooks still run.
    workers = [make_worker(upstream, rank=rank) for rank in (0, 1)]
    try:
        for worker in workers:
            block = worker.model_runner.pipeline.transformer.blocks[1]
            block.forward = torch.compile(block.forward, backend="eager")
            with pytest.raises(DiagnosticsRefused) as refused:
                _run(worker, _request(upstream, root / "in", _dit(within="transformer.blocks.1")))
            assert "transformer.blocks.1.attn runs inside transformer.blocks.1" in \
                str(refused.value)
            assert "--enforce-eager" in str(refused.value)
            assert worker.model_runner.pipeline.transformer._calls == 0
        assert not (root / "in").exists()
        _run(workers[0], _request(upstream, root / "blocks", _dit()))
        assert [line["module"] for line in _lines(root / "blocks")] == BLOCKS
        _run(workers[0], _request(upstream, root / "other", _dit(within="transformer.blocks.0")))
        assert _lines(root / "other")[-1]["module"] == "transformer.blocks.0"
    finally:
        torch._dynamo.reset()  # no compiled code of the fake outlives the test


def test_a_path_inside_the_text_encoder_is_checked_by_the_owner_alone(
    upstream: SimpleNamespace, root: Path
) -> None:
    from torch import nn

    class Stub(nn.Module):
        """Upstream's text encoder on a rank outside the encoder group: no modules inside."""

        def forward(self, x: Any) -> Any:
            return torch.zeros(x.shape[0], 64)

    peer = make_worker(upstream, rank=1)
    peer.model_runner.pipeline.text_encoder = Stub()
    capture = {"stage": "encoders", "within": "text_encoder.layers.1"}
    # the peer cannot see the layer and must not refuse alone (rank 0 would wait in a
    # collective); the owner, which loads the encoder, captures it
    _run(peer, _request(upstream, root / "peer", capture))
    _run(make_worker(upstream), _request(upstream, root / "owner", capture))
    assert [line["module"] for line in _lines(root / "owner")] == ["text_encoder.layers.1"]
    # a layer the owner lacks fails the request there, once the pipeline has run to the end
    owner = make_worker(upstream)
    with pytest.raises(RuntimeError, match=r"no module 'text_encoder\.layers\.9'"):
        _run(owner, _request(upstream, root / "missing", {**capture,
                                                          "within": "text_encoder.layers.9"}))
    assert owner.model_runner.pipeline.transformer._calls == STEPS
    assert CAPTURE_REPORT_KEY not in json.loads((root / "missing" / ENABLED_PATH_FILE).read_text())
    assert _hooks(owner.model_runner.pipeline) == 0


def test_a_request_without_a_capture_installs_no_capture_hook(
    upstream: SimpleNamespace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed: list[object] = []
    real = module_capture.ModuleCapture.install

    def install(self: module_capture.ModuleCapture) -> None:
        installed.append(self)
        real(self)

    monkeypatch.setattr(module_capture.ModuleCapture, "install", install)
    worker = make_worker(upstream)
    pipeline = worker.model_runner.pipeline
    during: list[int] = []
    real_decode = type(pipeline).decode

    def decode(self: Any, *args: Any, **kwargs: Any) -> Any:
        during.append(_hooks(self) - len(self.transformer._forward_hooks))
        return real_decode(self, *args, **kwargs)

    monkeypatch.setattr(type(pipeline), "decode", decode)
    _run(worker, _request(upstream, root / "n", points=["cond.text", "dit.step002.video"]))
    assert installed == []
    assert during == [0]  # only the dump's hook on the DiT itself, none on a module inside
    assert not (root / "n" / CAPTURE_LOG_FILE).exists()
    assert CAPTURE_REPORT_KEY not in json.loads((root / "n" / ENABLED_PATH_FILE).read_text())


def test_the_fake_uses_only_module_names_the_contract_checks_in_0_30_0(
    upstream: SimpleNamespace,
) -> None:
    # Every attribute on the way to every module of the fake DiT is a `Class.attr` that the
    # contract (tests/contract) finds assigned in that class in the 0.30.0 wheel, so a module
    # path in a capture of the fake is one a real server's capture can have.
    listed = {name for _, kind, name in UPSTREAM_NAMES if kind == "instance_attribute"}
    pipeline = make_worker(upstream).model_runner.pipeline
    unlisted = []
    for path, module in pipeline.transformer.named_modules(prefix="transformer"):
        if type(module).__name__ == "ModuleList":
            continue  # its children are indices (blocks.0), not attributes
        for name, _ in module.named_children():
            if f"{type(module).__name__}.{name}" not in listed:
                unlisted.append(f"{path}.{name} ({type(module).__name__}.{name})")
    assert unlisted == []
    roots = ("transformer", *ENCODER_MODULES)
    assert {f"MiniMaxH3Pipeline.{name}" for name in roots} <= listed
    assert {name for name, _ in pipeline.named_children()} <= set(roots)
