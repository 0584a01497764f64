"""A capture with ``stop`` in the vLLM-Omni worker extension, on the fake upstream: every rank
stops at the same step once the capture is whole, the way upstream stops a cancelled request
(its DiffusionRequestAbortedError, caught by the runner), after the owner wrote the capture, the
points and enabled_path.json; every rank answers the contract's stopped status; the pipeline is
left as it was, so the next request runs whole. A stop that is not the capture's (a client's
abort before the capture was whole), a point it cannot write, and a write that failed never read
as a stopped request."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from engine.vllm_omni import watch  # noqa: E402
from engine.vllm_omni.request_block import DiagnosticsRefused  # noqa: E402
from ref2va_contract.diagnostics import (  # noqa: E402
    CAPTURE_REPORT_KEY,
    CAPTURE_STOPPED_KEY,
    CAPTURE_STOPPED_MARKER,
    CAPTURE_STOPPED_STATUS,
    DUMP_SUFFIX,
    ENABLED_PATH_FILE,
)
from tests.engine.fake_upstream import (  # noqa: E402
    STEPS,
    capture_request,
    fail_writes_of,
    hook_count,
    log_lines,
    make_worker,
)

pytestmark = pytest.mark.engine


def _points(*steps: int) -> list[str]:
    return [f"dit.step{s:03d}.{k}" for s in steps for k in ("video", "audio")]


def _dit(step: int, first: int | None = None, **more: Any) -> dict[str, Any]:
    return {"stage": "dit", "step": step, "first_step": first, "within": None,
            "tensors": False, **more}


def _pristine(pipeline: Any) -> bool:
    """No wrapper left on the instance, no hook on the DiT."""
    return (not any(name in vars(pipeline) for name in watch.PIPELINE_METHODS)
            and not pipeline.transformer._forward_hooks
            and not pipeline.transformer._forward_pre_hooks)


def _decodes(monkeypatch: pytest.MonkeyPatch, pipeline: Any) -> list[int]:
    """Count the pipeline's decodes."""
    seen: list[int] = []
    real = type(pipeline).decode

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(pipeline), "decode", counting)
    return seen


def _report(folder: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((folder / ENABLED_PATH_FILE).read_text())
    return loaded


def _stopped(output: Any) -> bool:
    return (output.output is None and output.error_status_code == CAPTURE_STOPPED_STATUS
            and str(output.error).startswith(f"{CAPTURE_STOPPED_MARKER}: "))


@pytest.mark.parametrize("runner_catches", [True, False])
def test_every_rank_stops_after_the_captured_step_once_its_evidence_is_written(
        upstream: SimpleNamespace, root: Path, monkeypatch: pytest.MonkeyPatch,
        runner_catches: bool) -> None:
    from vllm_omni.diffusion.forward_context import set_forward_context
    from vllm_omni.diffusion.worker.diffusion_model_runner import DiffusionModelRunner
    from vllm_omni.platforms import current_omni_platform

    def lets_it_out(self: Any, req: Any, **kwargs: Any) -> Any:
        with set_forward_context(omni_diffusion_config=self.od_config):
            return self.pipeline.forward(req)

    if not runner_catches:  # a runner that lets the abort out: the extension catches its own
        monkeypatch.setattr(DiffusionModelRunner, "execute_model", lets_it_out)
    owner, peer = make_worker(upstream, 0), make_worker(upstream, 1)
    decodes = _decodes(monkeypatch, owner.model_runner.pipeline)
    synced = current_omni_platform.synchronized
    req = capture_request(upstream, root / "s", _dit(2, 1, stop=True), _points(1, 2))
    answers = [w.execute_model(req, w.od_config, None) for w in (owner, peer)]
    assert all(_stopped(a) for a in answers), answers
    assert "the DiT at step 2" in answers[0].error
    # both ranks ran steps 0..2 and no more, the owner decoded nothing, each drained its device
    assert [w.model_runner.pipeline.transformer._calls for w in (owner, peer)] == [3, 3]
    assert decodes == [] and current_omni_platform.synchronized == synced + 2
    # the owner's evidence is whole: the capture at steps 1..2, their points, the report
    lines = log_lines(root / "s")
    assert sorted({line["step"] for line in lines}) == [1, 2]
    assert {p.name for p in (root / "s").glob(f"*{DUMP_SUFFIX}")} == {
        f"{p}{DUMP_SUFFIX}" for p in _points(1, 2)}
    report = _report(root / "s")[CAPTURE_REPORT_KEY]
    assert report[CAPTURE_STOPPED_KEY] == {"stage": "dit", "step": 2}
    assert report["calls"] == len(lines) and report["errors"] == []
    for worker in (owner, peer):
        assert _pristine(worker.model_runner.pipeline)


def test_the_next_request_on_the_same_worker_runs_whole_and_equal(
        upstream: SimpleNamespace, root: Path) -> None:
    worker = make_worker(upstream)
    pipeline = worker.model_runner.pipeline
    hooks = hook_count(pipeline)
    forwards: list[int] = []
    counting = pipeline.transformer.register_forward_hook(lambda *a: forwards.append(1))
    hooks += 1
    worker.execute_model(capture_request(upstream, root / "a", _dit(1, stop=True), _points(1)),
                         worker.od_config, None)
    after = worker.execute_model(capture_request(upstream, root / "b", _dit(1), _points(1)),
                                 worker.od_config, None)
    fresh = make_worker(upstream)
    alone = fresh.execute_model(capture_request(upstream, root / "c", _dit(1), _points(1)),
                                fresh.od_config, None)
    assert after.error is None and torch.equal(after.output[0], alone.output[0])
    assert _report(root / "b")[CAPTURE_REPORT_KEY][CAPTURE_STOPPED_KEY] is None
    assert len(forwards) == 2 + STEPS and hook_count(pipeline) == hooks
    counting.remove()


def test_a_capture_of_the_last_step_stops_before_the_decode(
        upstream: SimpleNamespace, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    worker = make_worker(upstream)
    decodes = _decodes(monkeypatch, worker.model_runner.pipeline)
    last = STEPS - 1
    answer = worker.execute_model(
        capture_request(upstream, root / "l", _dit(last, stop=True), _points(last)),
        worker.od_config, None)
    assert _stopped(answer) and decodes == []
    assert worker.model_runner.pipeline.transformer._calls == STEPS
    assert _report(root / "l")[CAPTURE_REPORT_KEY][CAPTURE_STOPPED_KEY] == {
        "stage": "dit", "step": last}


def test_an_encoders_capture_stops_before_the_denoise(
        upstream: SimpleNamespace, root: Path) -> None:
    owner, peer = make_worker(upstream, 0), make_worker(upstream, 1)
    req = capture_request(upstream, root / "e",
                          {"stage": "encoders", "step": None, "stop": True},
                          ["cond.text", "cond.image", "cond.audio"])
    answers = [w.execute_model(req, w.od_config, None) for w in (owner, peer)]
    assert all(_stopped(a) for a in answers) and "conditioning encoders" in answers[0].error
    assert [w.model_runner.pipeline.transformer._calls for w in (owner, peer)] == [0, 0]
    assert {p.name for p in (root / "e").glob(f"*{DUMP_SUFFIX}")} == {
        f"cond.{k}{DUMP_SUFFIX}" for k in ("text", "image", "audio")}
    report = _report(root / "e")[CAPTURE_REPORT_KEY]
    assert report[CAPTURE_STOPPED_KEY] == {"stage": "encoders", "step": None}
    assert report["calls"] > 0 and _pristine(owner.model_runner.pipeline)


def test_without_stop_the_same_capture_runs_through(
        upstream: SimpleNamespace, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    worker = make_worker(upstream)
    decodes = _decodes(monkeypatch, worker.model_runner.pipeline)
    answer = worker.execute_model(capture_request(upstream, root / "t", _dit(2), _points(2)),
                                  worker.od_config, None)
    assert not _stopped(answer) and answer.error is None and answer.output is not None
    assert worker.model_runner.pipeline.transformer._calls == STEPS and decodes == [1]
    assert _report(root / "t")[CAPTURE_REPORT_KEY][CAPTURE_STOPPED_KEY] is None


@pytest.mark.parametrize(("points", "named"), [
    (_points(2, 3), "dit.step003.audio, dit.step003.video"),
    (["latent.video"], "latent.video"),
    ("all", "all"),
])
def test_a_point_made_after_the_stop_is_refused_on_every_rank_before_anything_runs(
        upstream: SimpleNamespace, root: Path, points: Any, named: str) -> None:
    for rank in (0, 1):
        worker = make_worker(upstream, rank)
        req = capture_request(upstream, root / f"r{rank}", _dit(2, stop=True), ())
        req.sampling_params.extra_args["acceptance"]["points"] = points
        with pytest.raises(DiagnosticsRefused, match="stops once its capture is whole") as refused:
            worker.execute_model(req, worker.od_config, None)
        assert named in str(refused.value)
        assert worker.model_runner.pipeline.transformer._calls == 0


def test_a_clients_abort_before_the_capture_is_whole_is_not_a_stop(
        upstream: SimpleNamespace, root: Path) -> None:
    from vllm_omni.diffusion.data import DiffusionRequestAbortedError

    worker = make_worker(upstream)
    pipeline = worker.model_runner.pipeline

    def abort_at_step_1(module: Any, args: Any, output: Any) -> None:
        if pipeline.transformer._calls == 2:  # step 1's forward ran
            raise DiffusionRequestAbortedError("Request cancelled at a model execution boundary")

    handle = pipeline.transformer.register_forward_hook(abort_at_step_1)
    try:
        answer = worker.execute_model(
            capture_request(upstream, root / "x", _dit(3, 1, stop=True), _points(1, 2, 3)),
            worker.od_config, None)
    finally:
        handle.remove()
    # upstream's abort, as a client's DELETE ends: not the stopped answer, and the report says
    # the request was not stopped by its capture
    assert answer.aborted and not _stopped(answer)
    assert _report(root / "x")[CAPTURE_REPORT_KEY][CAPTURE_STOPPED_KEY] is None
    assert _pristine(pipeline)


def test_a_point_that_could_not_be_written_fails_the_stopped_request(
        upstream: SimpleNamespace, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fail_writes_of(monkeypatch, "dit.step002.video")
    worker = make_worker(upstream)
    with pytest.raises(RuntimeError, match=r"dit\.step002\.video: could not write"):
        worker.execute_model(capture_request(upstream, root / "w", _dit(2, stop=True),
                                             _points(2)), worker.od_config, None)
    # it stopped where asked all the same (no rank left behind), and says so
    assert worker.model_runner.pipeline.transformer._calls == 3
    assert _report(root / "w")[CAPTURE_REPORT_KEY][CAPTURE_STOPPED_KEY] == {
        "stage": "dit", "step": 2}
