"""The vLLM-Omni worker extension against a small fake upstream (tests/engine/fake_vllm_omni).

The worker class is built the way vLLM-Omni 0.30.0 builds it: the extension, named by its
qualified name, mixed in ahead of the worker. The fake is on ``sys.path`` only inside these tests
and its modules are dropped afterwards, so no other test sees a fake ``vllm_omni``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from engine.vllm_omni import extension, watch  # noqa: E402
from engine.vllm_omni.request_block import FIXED_POINTS, DiagnosticsRefused  # noqa: E402
from ref2va_accept.judging import enabled_path_problems  # noqa: E402
from ref2va_accept.tensors import compare_dumps, read_header  # noqa: E402
from ref2va_contract.diagnostics import (  # noqa: E402
    ACCEPTANCE_FIELD,
    APPROXIMATE_KEY,
    CACHE_DIT_PATH,
    CACHE_KEY,
    DTYPE_KEY,
    DUMP_DIR_KEY,
    DUMP_SUFFIX,
    ENABLED_PATH_FILE,
    POINTS_KEY,
    POINTS_WRITTEN_KEY,
    REFERENCE_KV_KEY,
    REUSED_STEPS_KEY,
)
from ref2va_contract.launch import DIAGNOSTICS_ROOT_ENV  # noqa: E402
from tests.engine.fake_upstream import fail_writes_of, make_worker  # noqa: E402

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[2]
STEPS = 6




def _request(up: SimpleNamespace, dump: Path | str | None = None, points: Any = "all", *,
             seed: int = 5, quality: str | None = "lossless", request_id: str = "video_sync-1",
             steps: int = STEPS) -> Any:
    extra: dict[str, Any] = {"task": "ref2va"}
    if dump is not None:
        extra[ACCEPTANCE_FIELD] = {DUMP_DIR_KEY: str(dump), POINTS_KEY: points}
    generator = torch.Generator().manual_seed(11)
    prompt = {"text": torch.randn(3, 8, generator=generator),
              "image": torch.randn(4, 8, generator=generator),
              "audio": torch.randn(2, 8, generator=generator)}
    sampling = up.sampling(num_inference_steps=steps, seed=seed, quality=quality,
                           extra_args=extra)
    return up.request(prompt=prompt, sampling_params=sampling, request_id=request_id)


def _run(worker: Any, req: Any) -> tuple[Any, Any]:
    output = worker.execute_model(req, worker.od_config, None)
    return output.output


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


def _all_points(steps: int = STEPS) -> set[str]:
    return set(FIXED_POINTS) | {f"dit.step{s:03d}.{k}" for s in range(steps)
                                for k in ("video", "audio")}


def test_extension_module_imports_without_torch_or_vllm_omni() -> None:
    code = ("import sys; sys.modules['torch'] = None; sys.modules['vllm_omni'] = None; "
            "sys.modules['safetensors'] = None; "
            "import engine.vllm_omni, engine.vllm_omni.extension, engine.vllm_omni.hooks, "
            "engine.vllm_omni.request_block, engine.vllm_omni.dump_writer, "
            "engine.vllm_omni.watch, engine.vllm_omni.enabled_path")
    # As the launch profiles' PYTHONPATH (${workdir}:${workdir}/src) has it, without site-packages
    # (-S): the extension and the contract it imports need the standard library only.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])}
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_extension_is_mixed_in_ahead_of_themake_worker(upstream: SimpleNamespace) -> None:
    bases = upstream.worker_class.__mro__
    assert bases[1] is extension.Ref2VADiagnostics
    assert bases[2].__name__ == "DiffusionWorker"


def test_every_point_is_written_on_rank_0_and_none_on_rank_1(
    upstream: SimpleNamespace, root: Path
) -> None:
    _run(make_worker(upstream, rank=0), _request(upstream, root / "r0"))
    _run(make_worker(upstream, rank=1), _request(upstream, root / "r1"))
    assert _files(root / "r0") == {f"{p}{DUMP_SUFFIX}" for p in _all_points()} | {ENABLED_PATH_FILE}
    assert _files(root / "r1") == set()


def test_a_request_without_the_field_installs_nothing_and_writes_nothing(
    upstream: SimpleNamespace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    watched: list[object] = []
    real = extension.watched
    monkeypatch.setattr(extension, "watched", lambda *a: watched.append(a) or real(*a))
    worker = make_worker(upstream)
    _run(worker, _request(upstream, None))
    assert watched == []
    assert _files(root) == set()
    # and the same worker does install them when a request asks
    _run(worker, _request(upstream, root / "asked", ["cond.text"]))
    assert len(watched) == 1


def test_only_the_requested_points_are_written_as_they_are(
    upstream: SimpleNamespace, root: Path
) -> None:
    points = ["cond.text", "cond.image", "dit.step002.audio", "latent.video", "decoded.audio"]
    _run(make_worker(upstream), _request(upstream, root / "some", points))
    assert _files(root / "some") == {f"{p}{DUMP_SUFFIX}" for p in points} | {ENABLED_PATH_FILE}
    dtypes = {p: next(iter(read_header(root / "some" / f"{p}{DUMP_SUFFIX}").values())).dtype
              for p in points}
    assert dtypes == {"cond.text": "BF16", "cond.image": "F32", "dit.step002.audio": "F32",
                      "latent.video": "F32", "decoded.audio": "F32"}
    report = json.loads((root / "some" / ENABLED_PATH_FILE).read_text())
    assert sorted(report["points_written"]) == sorted(points)
    assert report["points_missing"] == {}


def test_output_is_bit_identical_with_and_without_dumps_and_methods_are_restored(
    upstream: SimpleNamespace, root: Path
) -> None:
    worker = make_worker(upstream)
    pipeline = worker.model_runner.pipeline
    plain_video, plain_audio = _run(worker, _request(upstream, None))
    watched_video, watched_audio = _run(worker, _request(upstream, root / "w"))
    assert torch.equal(plain_video, watched_video)
    assert torch.equal(plain_audio, watched_audio)
    for name in watch.PIPELINE_METHODS:
        assert name not in vars(pipeline)
    assert not pipeline.transformer._forward_hooks
    # a fresh worker that never saw a dump request gives the same bytes too
    fresh_video, _ = _run(make_worker(upstream), _request(upstream, None))
    assert torch.equal(fresh_video, watched_video)


def test_methods_are_restored_when_the_request_fails(
    upstream: SimpleNamespace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = make_worker(upstream)
    pipeline = worker.model_runner.pipeline

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("decoder failed")

    monkeypatch.setattr(type(pipeline), "decode", broken)
    with pytest.raises(RuntimeError, match="decoder failed"):
        _run(worker, _request(upstream, root / "f"))
    for name in watch.PIPELINE_METHODS:
        assert name not in vars(pipeline)
    assert not pipeline.transformer._forward_hooks


def test_a_write_failure_fails_the_request_after_the_pipeline_finished(
    upstream: SimpleNamespace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_writes_of(monkeypatch, "latent.video")
    worker = make_worker(upstream)
    with pytest.raises(RuntimeError, match=r"latent\.video: could not write"):
        _run(worker, _request(upstream, root / "full"))
    # every DiT step still ran (no rank left behind in a collective) and no partial file stays
    assert worker.model_runner.pipeline.transformer._calls == STEPS
    names = _files(root / "full")
    assert f"latent.video{DUMP_SUFFIX}" not in names
    assert not [n for n in names if n.endswith(".partial")]
    assert f"decoded.video{DUMP_SUFFIX}" in names


def test_a_dummy_run_is_ignored(upstream: SimpleNamespace, root: Path) -> None:
    _run(make_worker(upstream), _request(upstream, root / "d", request_id="dummy_req_id"))
    _run(make_worker(upstream), _request(upstream, root / "d", request_id="dummy_req_id/0"))
    assert _files(root) == set()


def _escape(kind: str, root: Path, outside: Path) -> str:
    if kind == "dotdot":
        return f"{root}/../outside"
    if kind == "absolute":
        return str(outside)
    if kind == "relative":
        return "dumps/x"
    link = root / "link"
    link.symlink_to(outside, target_is_directory=True)
    return str(link / "x")


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink", "relative"])
def test_a_dump_dir_outside_the_root_is_refused(
    upstream: SimpleNamespace, root: Path, tmp_path: Path, kind: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dump = _escape(kind, root, outside)
    worker = make_worker(upstream)
    with pytest.raises(DiagnosticsRefused) as refused:
        _run(worker, _request(upstream, dump))
    assert dump in str(refused.value)
    if kind != "relative":
        assert str(root) in str(refused.value)
    assert worker.model_runner.pipeline.transformer._calls == 0
    assert _files(outside) == set()
    assert _files(root) <= {"link"}


def test_no_root_set_refuses_every_dump(
    upstream: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DIAGNOSTICS_ROOT_ENV, raising=False)
    with pytest.raises(DiagnosticsRefused, match=f"{DIAGNOSTICS_ROOT_ENV} was not set"):
        _run(make_worker(upstream), _request(upstream, tmp_path / "d"))
    assert not (tmp_path / "d").exists()


def test_a_dump_dir_inside_the_root_through_a_symlink_is_accepted(
    upstream: SimpleNamespace, root: Path
) -> None:
    (root / "real").mkdir()
    (root / "alias").symlink_to(root / "real", target_is_directory=True)
    _run(make_worker(upstream), _request(upstream, root / "alias" / "d", ["cond.audio"]))
    assert _files(root / "real" / "d") == {f"cond.audio{DUMP_SUFFIX}", ENABLED_PATH_FILE}


@pytest.mark.parametrize("points", [["dit.step000"], ["dit.step006.video"], ["latent"], []])
def test_an_unknown_point_is_refused_with_the_valid_names(
    upstream: SimpleNamespace, root: Path, points: list[str]
) -> None:
    with pytest.raises(DiagnosticsRefused, match=r"valid names: cond\.text.*dit\.stepNNN\.video"):
        _run(make_worker(upstream), _request(upstream, root / "u", points))
    assert _files(root / "u") == set()


def test_data_parallel_and_batched_requests_with_the_field_are_refused(
    upstream: SimpleNamespace, root: Path
) -> None:
    worker = make_worker(upstream)
    envelope = SimpleNamespace(req=_request(upstream, root / "dp"))
    with pytest.raises(DiagnosticsRefused, match="data-parallel"):
        worker.execute_model([envelope], worker.od_config)
    with pytest.raises(DiagnosticsRefused, match="request-batch"):
        worker.execute_model_batch(SimpleNamespace(scheduled_new_reqs=[envelope]),
                                   worker.od_config)
    plain = SimpleNamespace(req=_request(upstream, None))
    assert len(worker.execute_model_batch(SimpleNamespace(scheduled_new_reqs=[plain]),
                                          worker.od_config)) == 1


def _report(folder: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((folder / ENABLED_PATH_FILE).read_text())
    return loaded


def test_enabled_path_shows_the_cache_and_its_cached_steps_when_it_ran(
    upstream: SimpleNamespace, root: Path
) -> None:
    worker = make_worker(upstream, cache_backend="cache_dit")
    _run(worker, _request(upstream, root / "cached", quality=None))
    report = _report(root / "cached")
    assert report["cache"]["backend"] == "cache_dit"
    assert report["cache"]["cache_dit"]["enabled"] is True
    assert report["cache"]["cache_dit"]["installation_key"] == "minimax_h3.generic"
    # two warmup steps, then every other one; under the contract's keys, which the judge reads
    assert report[CACHE_KEY][REUSED_STEPS_KEY] == [3, 5]
    assert report["cache"]["cache_dit"]["targets"][0]["blocks"][0]["cached_steps"] == [3, 5]
    assert CACHE_DIT_PATH in report[APPROXIMATE_KEY]
    assert report[DTYPE_KEY] == "float32"
    assert report[REFERENCE_KV_KEY][REUSED_STEPS_KEY] == []
    assert sorted(report[POINTS_WRITTEN_KEY]) == sorted(_all_points())
    assert report["attention"] == "TORCH_SDPA"
    # every attention layer of the DiT, by module path (0.30.0's names: see the fake's pipeline)
    assert report["attention_layers"] == {
        f"transformer.{block}.attn.attention": "TORCH_SDPA"
        for block in ("token_refiner.blocks.0", "blocks.0", "blocks.1", "blocks.2")}
    assert report["request_id"] == "video_sync-1"


def test_enabled_path_shows_no_cache_when_the_request_ran_without_it(
    upstream: SimpleNamespace, root: Path
) -> None:
    # the same server, but this request asks quality=lossless: H3 installs no cache for it
    worker = make_worker(upstream, cache_backend="cache_dit")
    _run(worker, _request(upstream, root / "plain", quality="lossless"))
    report = _report(root / "plain")
    assert report["cache"]["backend"] == "none"
    assert report["cache"]["cache_dit"] == {"enabled": False, "installation_key": None,
                                            "targets": [], "reused_steps": []}
    assert report["cache"]["reused_steps"] == []
    assert report["approximate"] == []
    assert report["quality"] == "lossless"


def test_the_judges_audit_reads_the_report_as_written(
    upstream: SimpleNamespace, root: Path
) -> None:
    _run(make_worker(upstream), _request(upstream, root / "b0"))
    _run(make_worker(upstream, cache_backend="cache_dit"),
         _request(upstream, root / "c", quality=None))
    _run(make_worker(upstream, cache_backend="cache_dit"), _request(upstream, root / "l"))
    baseline = _report(root / "b0")
    assert enabled_path_problems(_report(root / "l"), baseline) == []
    problems = enabled_path_problems(_report(root / "c"), baseline)
    assert problems and "cache_dit" in problems[0]


def test_the_judges_comparator_finds_same_seed_equal_and_a_perturbed_run_different(
    upstream: SimpleNamespace, root: Path
) -> None:
    _run(make_worker(upstream), _request(upstream, root / "a"))
    _run(make_worker(upstream), _request(upstream, root / "b"))
    same = compare_dumps(root / "a", root / "b")
    assert same.equal and len(same.points) == len(_all_points())

    perturbed = make_worker(upstream)
    perturbed.model_runner.pipeline.transformer.perturb_from_step = 2
    _run(perturbed, _request(upstream, root / "p"))
    different = compare_dumps(root / "a", root / "p")
    assert not different.equal
    assert different.first_divergence is not None
    assert different.first_divergence.startswith("dit.step002.")
    equal = {p.name for p in different.points if p.equal}
    assert {"cond.text", "dit.step001.video", "dit.step001.audio"} <= equal


def test_hooks_list_names_the_extension_uses() -> None:
    from engine.vllm_omni.hooks import UPSTREAM_NAMES

    names = {name for _, _, name in UPSTREAM_NAMES}
    for method in watch.PIPELINE_METHODS:
        assert f"MiniMaxH3Pipeline.{method}" in names
    for key in watch.CONDITIONING_KEYS.values():
        assert f"_prepare_encoder_conditioning_inputs.{key}" in names
    assert all(path.startswith("vllm_omni/") and path.endswith(".py")
               for path, _, _ in UPSTREAM_NAMES)
