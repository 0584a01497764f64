"""The localization pass's module capture inside the vLLM-Omni worker extension, on the fake.

The fake upstream (tests/engine/fake_vllm_omni) builds its DiT with 0.30.0's module names and can
plant a divergence (a nudge of one part in 2**12) in one module at one step, so these tests see
the capture log name the module a real server would, and the judge's comparator find it. The
encoder stage's tests are in test_vllm_omni_capture_encoders.py; tests/contract holds every path
the fake's capture hooks to the 0.30.0 wheel. The fake is on ``sys.path`` only inside these tests
and its modules are dropped afterwards.
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
from engine.vllm_omni.request_block import DiagnosticsRefused  # noqa: E402
from ref2va_accept.judging.localize._capture import divergence, read_log  # noqa: E402
from ref2va_contract.diagnostics import (  # noqa: E402
    ACCEPTANCE_FIELD,
    CAPTURE_DIR,
    CAPTURE_KEY,
    CAPTURE_LOG_FILE,
    CAPTURE_REPORT_KEY,
    DUMP_SUFFIX,
    ENABLED_PATH_FILE,
)
from tests.engine.fake_upstream import (  # noqa: E402
    STEPS,
    first_broken,
    hook_count,
    log_lines,
    make_worker,
    run,
)
from tests.engine.fake_upstream import capture_request as _request  # noqa: E402

pytestmark = pytest.mark.engine

STEP = 2  # the step captured, and the step the divergence is planted at
PLANTED = "transformer.blocks.1.mlp.fc2"
# The fake DiT's blocks, in the order their calls complete (tests/engine/fake_vllm_omni).
BLOCKS = [
    "transformer.video_patch_proj", "transformer.audio_patch_proj", "transformer.condition_proj",
    "transformer.token_refiner", "transformer.time_embedder", "transformer.blocks.0",
    "transformer.blocks.1", "transformer.blocks.2", "transformer.final_layer",
]
SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _dit(step: int = STEP, within: str | None = None, tensors: bool = False) -> dict[str, Any]:
    return {"stage": "dit", "step": step, "within": within, "tensors": tensors}


def test_a_block_level_dit_capture_logs_each_block_once_at_its_step(
    upstream: SimpleNamespace, root: Path
) -> None:
    run(make_worker(upstream), _request(upstream, root / "c", _dit()))
    lines = log_lines(root / "c")
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
        "modules_hooked": len(BLOCKS), "calls": len(BLOCKS),
        "calls_by_root": {"transformer": len(BLOCKS)}, "bytes_written": 0,
        "seconds": report[CAPTURE_REPORT_KEY]["seconds"], "errors": [],
        "stopped": None}
    # the request's own points are written as ever
    assert (root / "c" / f"cond.text{DUMP_SUFFIX}").exists()


def test_a_capture_from_a_first_step_logs_every_step_up_to_its_last(
    upstream: SimpleNamespace, root: Path
) -> None:
    # The judge's level 1 when the frozen points skip steps: steps 1..3, each line naming its step
    run(make_worker(upstream), _request(upstream, root / "r", {**_dit(step=3), "first_step": 1}))
    lines = log_lines(root / "r")
    assert [line["step"] for line in lines] == [s for s in (1, 2, 3) for _ in BLOCKS]
    assert [line["module"] for line in lines] == BLOCKS * 3
    assert {line["call"] for line in lines} == {0}  # call indexes count per step


def test_a_step_served_from_the_cache_captures_no_call(
    upstream: SimpleNamespace, root: Path
) -> None:
    # the toy cache serves step 3 from step 2's output: no module runs at step 3
    worker = make_worker(upstream, cache_backend="cache_dit")
    run(worker, _request(upstream, root / "cached", _dit(step=3), quality=None))
    assert log_lines(root / "cached") == []
    report = json.loads((root / "cached" / ENABLED_PATH_FILE).read_text())[CAPTURE_REPORT_KEY]
    assert (report["calls"], report["calls_by_root"]) == (0, {"transformer": 0})


def test_a_capture_within_a_block_logs_its_submodules_and_writes_their_tensors(
    upstream: SimpleNamespace, root: Path
) -> None:
    from safetensors.torch import load_file

    worker = make_worker(upstream)
    run(worker, _request(upstream, root / "w", _dit(within="transformer.blocks.1",
                                                        tensors=True)))
    lines = log_lines(root / "w")
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
        run(make_worker(upstream), _request(upstream, root / f"plain-{name}", _dit(within=within)))
        run(planted, _request(upstream, root / f"planted-{name}", _dit(within=within)))
    assert first_broken(log_lines(root / "plain-blocks"),
                         log_lines(root / "planted-blocks")) == "transformer.blocks.1"
    assert first_broken(log_lines(root / "plain-inside"),
                        log_lines(root / "planted-inside")) == PLANTED
    # the judge's comparator reads the logs as written and names the same places
    for name, module in (("blocks", "transformer.blocks.1"), ("inside", PLANTED)):
        found = divergence(read_log(root / f"plain-{name}"), read_log(root / f"planted-{name}"))
        assert (found.kind, found.module) == ("differs", module)


@pytest.mark.parametrize("fails", [False, True])
def test_the_capture_hooks_are_removed_after_the_request(
    upstream: SimpleNamespace, root: Path, monkeypatch: pytest.MonkeyPatch, fails: bool
) -> None:
    worker = make_worker(upstream)
    pipeline = worker.model_runner.pipeline
    before = hook_count(pipeline)
    during: list[int] = []
    real = type(pipeline).decode

    def decode(self: Any, *args: Any, **kwargs: Any) -> Any:
        during.append(hook_count(self))
        if fails:
            raise RuntimeError("decoder failed")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(pipeline), "decode", decode)
    req = _request(upstream, root / "h", _dit(within="transformer.blocks.1"))
    if fails:
        with pytest.raises(RuntimeError, match="decoder failed"):
            run(worker, req)
    else:
        run(worker, req)
    inside = len(list(pipeline.transformer.blocks[1].modules()))
    assert during == [before + inside]  # one hook per module of the block while it ran
    assert hook_count(pipeline) == before
    assert len(log_lines(root / "h")) == inside  # what was captured before the failure stays


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
            run(worker, _request(upstream, root / f"r{rank}", capture))
        assert named in str(refused.value)
        assert f"extra_params.{ACCEPTANCE_FIELD}.{CAPTURE_KEY}" in str(refused.value)
        assert worker.model_runner.pipeline.transformer._calls == 0
        assert hook_count(worker.model_runner.pipeline) == 0
    assert {p.name for p in root.iterdir()} == set()


def test_a_capture_inside_a_compiled_block_is_refused_on_every_rank(
    upstream: SimpleNamespace, root: Path
) -> None:
    # As vLLM-Omni's regional compile does without --enforce-eager on a platform with inductor
    # (vllm_omni/diffusion/compile.py; never on the NPU, whose platform reports no inductor
    # support, so the 910C compiles nothing): the block's forward is swapped for a compiled one,
    # which would never call a hook added inside it later. The block's own hooks still run.
    workers = [make_worker(upstream, rank=rank) for rank in (0, 1)]
    try:
        for worker in workers:
            block = worker.model_runner.pipeline.transformer.blocks[1]
            block.forward = torch.compile(block.forward, backend="eager")
            with pytest.raises(DiagnosticsRefused) as refused:
                run(worker, _request(upstream, root / "in", _dit(within="transformer.blocks.1")))
            assert "transformer.blocks.1.attn runs inside transformer.blocks.1" in \
                str(refused.value)
            assert "--enforce-eager" in str(refused.value)
            assert worker.model_runner.pipeline.transformer._calls == 0
        assert not (root / "in").exists()
        run(workers[0], _request(upstream, root / "blocks", _dit()))
        assert [line["module"] for line in log_lines(root / "blocks")] == BLOCKS
        run(workers[0], _request(upstream, root / "other", _dit(within="transformer.blocks.0")))
        assert log_lines(root / "other")[-1]["module"] == "transformer.blocks.0"
    finally:
        torch._dynamo.reset()  # no compiled code of the fake outlives the test


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
        during.append(hook_count(self) - len(self.transformer._forward_hooks))
        return real_decode(self, *args, **kwargs)

    monkeypatch.setattr(type(pipeline), "decode", decode)
    run(worker, _request(upstream, root / "n", points=["cond.text", "dit.step002.video"]))
    assert installed == []
    assert during == [0]  # only the dump's hook on the DiT itself, none on a module inside
    assert not (root / "n" / CAPTURE_LOG_FILE).exists()
    assert CAPTURE_REPORT_KEY not in json.loads((root / "n" / ENABLED_PATH_FILE).read_text())
