"""Candidates judged for real: the lossless one is bit-exact and cheaper, each approximate one
differs from its first affected comparison point on, and quality=lossless turns them off."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from engine.reference.constants import DIT_BLOCKS
from engine.reference.errors import ApiError, ProfileError
from engine.reference.pipeline.cache import hold_latent_frames
from engine.reference.pipeline.costs import COST_MODEL_ENV
from engine.reference.pipeline.model import ReferenceModel
from engine.reference.pipeline.weights import WEIGHTS_SEED, ModelShape, initialise
from engine.reference.profile import load_profile
from tests.engine.asgi_engine import AsgiEngine
from tests.engine.conftest import REPO_ROOT, probe, write_profile
from tests.engine.pipeline_harness import SPEC, STEPS, Run, first_difference, generator, run

pytestmark = pytest.mark.engine

PROFILES = sorted(
    path
    for path in (REPO_ROOT / "engine" / "profiles" / "reference").glob("*.yaml")
    if not path.name.startswith("fault-")
)
COSTS = {"block_ms": 1.0, "text_kv_ms": 2.0, "ref_kv_ms": 0.25}
# A threshold no residual change reaches, so the cache reuses every step it is allowed to.
EAGER_CACHE = {
    "Fn_compute_blocks": 1,
    "Bn_compute_blocks": 1,
    "max_warmup_steps": 2,
    "residual_diff_threshold": 10.0,
    "max_continuous_cached_steps": 2,
}


@pytest.fixture(scope="module")
def b0(tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = tmp_path_factory.mktemp("b0")
    with pytest.MonkeyPatch.context() as monkeypatch:
        return run(generator(monkeypatch, root, **{"cost-model": COSTS}), root / "b0")


def _candidate(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, quality: str | None = None, **args: object
) -> Run:
    return run(generator(monkeypatch, tmp_path, **args), tmp_path / "candidate", quality=quality)


def test_text_kv_precompute_is_bit_exact_and_cheaper(
    b0: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lossless = _candidate(
        monkeypatch, tmp_path, **{"text-kv-precompute": True, "cost-model": COSTS}
    )
    assert lossless.points() == b0.points()
    assert first_difference(b0, lossless) is None
    assert lossless.frames and all(
        (a == b).all() for a, b in zip(b0.frames, lossless.frames, strict=True)
    )
    assert lossless.enabled_path["text_kv"] == "precomputed"
    assert b0.enabled_path["text_kv"] == "per_step"
    assert lossless.enabled_path["approximate"] == []
    # The speed-up is real work skipped, counted: B0 embeds the context at every step and every
    # block projects its K/V from it; the candidate does both once per request.
    blocks = DIT_BLOCKS
    assert b0.enabled_path["work"] == {
        "blocks": blocks * STEPS, "context": STEPS, "text_kv": blocks * STEPS,
        "reference_kv": blocks * STEPS,
    }
    assert lossless.enabled_path["work"] == {
        "blocks": blocks * STEPS, "context": 1, "text_kv": blocks, "reference_kv": blocks * STEPS,
    }
    ratio = lossless.enabled_path["device_time_s"] / b0.enabled_path["device_time_s"]
    # An explicit declared device model still prices what was computed: (block + ref_kv) /
    # (block + text_kv + ref_kv) = 0.385 per step, plus the one-off K/V of step 0
    assert ratio == pytest.approx((1.25 * STEPS + 2.0) / (3.25 * STEPS), rel=1e-6)


GUIDED = replace(SPEC, guidance_scale=4.0, negative_prompt="blurry")


@pytest.fixture(scope="module")
def guided_b0(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """B0's run of the guided request, which both guided candidates are compared with (each test
    ran the same B0 run again)."""
    root = tmp_path_factory.mktemp("guided-b0")
    with pytest.MonkeyPatch.context() as monkeypatch:
        return run(generator(monkeypatch, root), root / "b0", GUIDED)


@pytest.mark.parametrize("precompute", [False, True], ids=["per_step", "precomputed"])
def test_text_kv_precompute_keeps_each_guidance_branch_own_context(
    guided_b0: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, precompute: bool
) -> None:
    # With classifier-free guidance the prompt and the negative prompt each have their context:
    # kept per branch, never one branch's for the other (the same bits as the plain path).
    b0 = guided_b0
    engine = generator(monkeypatch, tmp_path, **{"text-kv-precompute": precompute})
    candidate = run(engine, tmp_path / "candidate", GUIDED)
    assert b0.enabled_path["guidance"] == "cfg"
    assert first_difference(b0, candidate) is None
    blocks = DIT_BLOCKS
    context, text_kv = (2, 2 * blocks) if precompute else (2 * STEPS, 2 * blocks * STEPS)
    assert candidate.enabled_path["work"]["context"] == context
    assert candidate.enabled_path["work"]["text_kv"] == text_kv
    assert b0.enabled_path["work"]["context"] == 2 * STEPS


def test_the_context_embedding_reads_only_the_conditioning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What makes precomputing it exact: the DiT's context embedding reads the conditioning only.
    # Precomputing a step-DEPENDENT input (the reference K/V, modulated by the timestep) is not
    # exact: the same reuse there diverges from B0 (test_reference_kv_reuse).
    engine = generator(monkeypatch, tmp_path)
    dit = engine.model.dit
    condition = torch.randn(7, engine.shape.hidden, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        first = dit.embed_condition(condition)
        dit.time_embedding(0.9)  # nothing step-dependent is read by the embedding
        second = dit.embed_condition(condition.clone())
        other = dit.embed_condition(condition + 1e-3)
    assert torch.equal(first, second)
    assert not torch.equal(first, other)


def test_reduction_order_differs_from_the_dit_on(
    b0: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    split = _candidate(monkeypatch, tmp_path, **{"reduction-order": "split_k"})
    assert first_difference(b0, split) == "dit.step000"
    assert split.enabled_path["reduction_order"] == "split_k"
    assert split.enabled_path["approximate"] == []


def test_cache_dit_reuses_steps_and_differs_from_the_first_reused_one(
    b0: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = _candidate(
        monkeypatch, tmp_path, **{"cache-backend": "cache_dit", "cache-config": EAGER_CACHE}
    )
    cache = cached.enabled_path["cache"]
    assert cache["backend"] == "cache_dit" and cache["reused_steps"] == [2, 3, 5]
    assert cache["reused_blocks"]["2"] == [1, 2, 3, 4]
    assert first_difference(b0, cached) == "dit.step002"
    assert "cache_dit" in cached.enabled_path["approximate"]
    assert len(cached.frames) == SPEC.num_frames and cached.audio is not None


def test_cache_dit_with_quality_lossless_matches_b0(
    b0: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = _candidate(
        monkeypatch,
        tmp_path,
        quality="lossless",
        **{"cache-backend": "cache_dit", "cache-config": EAGER_CACHE},
    )
    assert cached.enabled_path["cache"]["backend"] == "none"
    assert cached.enabled_path["cache"]["reused_steps"] == []
    assert cached.enabled_path["approximate"] == []
    assert first_difference(b0, cached) is None


def test_quality_high_installs_h3_conservative_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    high = _candidate(monkeypatch, tmp_path, quality="high")
    assert high.enabled_path["cache"]["config"]["residual_diff_threshold"] == 0.04
    assert high.enabled_path["approximate"] == ["cache_dit"]


@pytest.mark.parametrize(("interval", "exact"), [(1, True), (2, False), (0, False)])
def test_reference_kv_reuse(
    b0: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interval: int, exact: bool
) -> None:
    config = {"mode": "tier1", "kv_refresh_interval": interval}
    reuse = _candidate(monkeypatch, tmp_path, **{"kv-offload-config": config})
    reference_kv = reuse.enabled_path["reference_kv"]
    if exact:
        assert first_difference(b0, reuse) is None
        assert reference_kv["mode"] == "recompute" and reference_kv["reused_steps"] == []
    else:
        first_reused = reference_kv["reused_steps"][0]
        assert first_difference(b0, reuse) == f"dit.step{first_reused:03d}"
        assert "reference_kv_reuse" in reuse.enabled_path["approximate"]


def test_bf16_differs_and_says_reduced_precision(
    b0: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bf16 = _candidate(monkeypatch, tmp_path, dtype="bfloat16")
    assert first_difference(b0, bf16) == "cond.text"
    assert bf16.enabled_path["dtype"] == "bfloat16"
    assert "reduced_precision" in bf16.enabled_path["approximate"]
    assert len(bf16.frames) == SPEC.num_frames


def test_latent_frame_stride_holds_latent_frames_from_the_decode_on(
    b0: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = _candidate(monkeypatch, tmp_path, **{"latent-frame-stride": 2})
    # The denoised latents are B0's: only the decode reads them held.
    assert first_difference(b0, held) == "decoded.video"
    assert held.enabled_path["latent_frame_stride"] == 2
    assert "latent_frame_hold" in held.enabled_path["approximate"]
    assert len(held.frames) == SPEC.num_frames


def test_a_stride_past_the_clip_holds_the_first_latent_frame_a_still_video(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    still = _candidate(monkeypatch, tmp_path, **{"latent-frame-stride": 64})
    assert all(np.array_equal(frame, still.frames[0]) for frame in still.frames)
    lossless = _candidate(monkeypatch, tmp_path / "lossless", quality="lossless",
                          **{"latent-frame-stride": 64})
    assert lossless.enabled_path["latent_frame_stride"] is None
    assert lossless.enabled_path["approximate"] == []
    assert not all(np.array_equal(frame, lossless.frames[0]) for frame in lossless.frames)


def test_hold_latent_frames_repeats_every_stride_th_frame() -> None:
    latent = torch.arange(5.0).reshape(5, 1, 1, 1)
    assert hold_latent_frames(latent, 2).flatten().tolist() == [0.0, 0.0, 2.0, 2.0, 4.0]
    assert hold_latent_frames(latent, 9).flatten().tolist() == [0.0] * 5


def test_force_refresh_hint_without_cache_is_400(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = generator(monkeypatch, tmp_path)
    spec = SPEC.__class__(**{**SPEC.__dict__, "extra_params": {"force_refresh_step_hint": 2}})
    with pytest.raises(ApiError, match="Cache-DiT"):
        engine.validate(spec)


def test_cache_config_without_cache_backend_is_refused(tmp_path: Path) -> None:
    path = write_profile(tmp_path / "bad.yaml", **{"cache-config": EAGER_CACHE})
    with pytest.raises(ProfileError, match="cache-config"):
        load_profile(path)


@pytest.mark.parametrize("path", PROFILES, ids=[path.stem for path in PROFILES])
def test_every_candidate_profile_starts_and_serves(path: Path) -> None:
    from engine.reference.app import create_app

    profile = load_profile(path)
    assert profile.description
    engine = AsgiEngine(create_app(profile))
    try:
        response = engine.post(
            "/v1/videos/sync",
            data={
                "prompt": "p",
                "width": "32",
                "height": "32",
                "num_frames": "22",
                "num_inference_steps": "4",
                "seed": "1",
            },
        )
        assert response.status_code == 200, response.text
        assert probe(response.content).video_frames == 22
    finally:
        engine.close()


def test_unseeded_noise_step_differs_from_that_step_on(
    b0: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the `nondeterministic` fault asks of the pipeline: points before the noisy step match
    # B0, the step after it is the first to differ, and the media stays complete.
    noisy = run(generator(monkeypatch, tmp_path, **{"cost-model": COSTS}), tmp_path / "noisy",
                unseeded_noise_step=3)
    assert first_difference(b0, noisy) == "dit.step003"
    assert len(noisy.frames) == SPEC.num_frames and noisy.audio is not None


def test_reference_campaign_declares_no_device_time() -> None:
    # Its latency verdicts must rest on compute the engine really does: no declared device time,
    # neither for every arm (the campaign's environment) nor for one (a profile's cost model).
    campaign = yaml.safe_load((REPO_ROOT / "fixtures/campaigns/reference.yaml").read_text())
    assert COST_MODEL_ENV not in (campaign.get("environment") or {})
    for path in PROFILES:
        args = load_profile(path).args
        assert args.cost_model is None and args.step_cost_ms == 0, path.name


def test_the_context_embedder_left_every_other_weight_as_it_was() -> None:
    # Its parameters are drawn after all others, so the rest of the model (and the lossy
    # candidates' calibrated gate outcomes) is what it was before the embedder existed.
    with_embedder, without = ReferenceModel(ModelShape()), ReferenceModel(ModelShape())
    del without.dit.context_embedder
    initialise(with_embedder, WEIGHTS_SEED)
    initialise(without, WEIGHTS_SEED)
    kept = dict(with_embedder.named_parameters())
    assert len(kept) > len(dict(without.named_parameters()))
    for name, parameter in without.named_parameters():
        assert torch.equal(parameter, kept[name]), name
