"""VBench dimensions: exact flicker, the formulas by hand, open checks, fake networks.

The fakes stand in for the networks quality/_loaders.py builds from VBench's checkpoint files (those
loaders are tested on stand-in checkpoints in test_scorer_checkpoints.py), so that each formula can
be checked by hand."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ref2va_accept.evidence import ScoreRecord
from ref2va_accept.quality import score_frames
from ref2va_accept.quality._models import load_model
from ref2va_accept.quality._vbench import (
    clamped_cosine,
    consistency_score,
    dynamic_interval,
    dynamic_verdict,
    flicker_score,
    i2v_score,
    top5_flow_magnitude,
)

pytestmark = pytest.mark.fast


def _const(value: int, h: int = 32, w: int = 48) -> np.ndarray:
    return np.full((h, w, 3), value, np.uint8)


def _by_id(scores: list[ScoreRecord]) -> dict[str, ScoreRecord]:
    return {s.scorer: s for s in scores}


def test_static_clip_has_flicker_exactly_one() -> None:
    rng = np.random.default_rng(1)
    frame = rng.integers(0, 256, (32, 48, 3), dtype=np.uint8)
    score = _by_id(score_frames([frame] * 6, fps=24))["vbench.temporal_flickering"]
    assert score.status == "ok" and score.value == 1.0


def test_alternating_brightness_step_gives_255_minus_d_over_255() -> None:
    frames = [_const(100 + 7 * (i % 2)) for i in range(9)]
    score = _by_id(score_frames(frames, fps=24))["vbench.temporal_flickering"]
    assert score.value == pytest.approx((255 - 7) / 255, abs=1e-15)


def test_flicker_averages_pairs_over_all_frames() -> None:
    frames = [_const(10), _const(10), _const(40)]  # pair MAEs 0 and 30
    score = _by_id(score_frames(frames, fps=24))["vbench.temporal_flickering"]
    assert score.value == pytest.approx((255 - 15) / 255, abs=1e-15)
    assert flicker_score([0.0, 30.0]) == score.value


def test_single_frame_flicker_is_an_error_not_a_value() -> None:
    score = _by_id(score_frames([_const(5)], fps=24))["vbench.temporal_flickering"]
    assert score.status == "error" and score.value is None


@pytest.mark.parametrize(("fps", "interval"), [(24, 3), (25, 3), (12, 2), (8, 1), (4, 1), (1, 1)])
def test_dynamic_degree_samples_every_max_1_round_fps_over_8(fps: float, interval: int) -> None:
    # VBench dynamic_degree.py: max(1, round(fps / 8)); Python rounds 1.5 to 2 and 0.5 to 0.
    assert dynamic_interval(fps) == interval


def test_model_dimensions_without_weights_are_open_naming_what_is_missing() -> None:
    scores = _by_id(score_frames([_const(1), _const(2)], fps=24))
    for dim in ("subject_consistency", "background_consistency", "motion_smoothness",
                "dynamic_degree", "aesthetic_quality", "imaging_quality", "i2v_subject",
                "i2v_background"):
        s = scores[f"vbench.{dim}"]
        assert s.status == "open" and s.value is None and "weights missing" in s.detail


def test_missing_weights_file_is_open(tmp_path: Path) -> None:
    scores = _by_id(score_frames([_const(1), _const(2)], fps=24,
                                 weights={"dino_vitb16": tmp_path / "nope.pt"}))
    assert scores["vbench.subject_consistency"].status == "open"
    assert "nope.pt" in scores["vbench.subject_consistency"].detail


def test_consistency_formula_by_hand() -> None:
    assert consistency_score([1.0, 0.5], [0.8, 0.2]) == pytest.approx((0.9 + 0.35) / 2)
    assert clamped_cosine(np.array([1.0, 0.0]), np.array([-1.0, 0.0])) == 0.0


def test_i2v_formula_by_hand() -> None:
    expected = 0.4 * 0.9 + 0.3 * 0.8 + 0.3 * 0.6
    assert i2v_score([0.2, 0.9, 0.5], [0.6, 1.0]) == pytest.approx(expected)


def test_top5_flow_magnitude_means_the_largest_5_percent() -> None:
    flow = np.zeros((2, 10, 10))
    flow[0].flat[:5] = [3.0, 4.0, 5.0, 6.0, 7.0]  # 5 of 100 pixels: exactly the top 5%
    assert top5_flow_magnitude(flow) == pytest.approx(5.0)


def test_dynamic_verdict_follows_vbench_counting() -> None:
    # 16 sampled frames -> need round(4) = 4 pairs above 6 * 256 / 256 = 6.
    assert dynamic_verdict([7.0] * 4 + [0.0] * 11, 16, 256) is True
    assert dynamic_verdict([7.0] * 3 + [0.0] * 12, 16, 256) is False
    assert dynamic_verdict([6.0] * 15, 16, 256) is False  # strictly above the threshold


torch = pytest.importorskip("torch")


class _MeanColour(torch.nn.Module):  # type: ignore[misc]
    """A fake feature extractor: per-channel spatial mean, plus a constant 1."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        means = x.mean(dim=(2, 3))
        return torch.cat([means, torch.ones_like(means[:, :1])], dim=1)


class _Midpoint(torch.nn.Module):  # type: ignore[misc]
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a + b) / 2


_FAKES: dict[Path, torch.nn.Module] = {}


def _script(module: torch.nn.Module, path: Path) -> Path:
    """A weights file whose network is ``module`` (the file's bytes are only hashed)."""
    path.write_bytes(f"fake {type(module).__name__} {len(_FAKES)}".encode())
    _FAKES[path] = module
    return path


@pytest.fixture(autouse=True)
def _fake_networks(monkeypatch: pytest.MonkeyPatch) -> None:
    from ref2va_accept.quality import _loaders as loaders

    real = loaders.build_network

    def build(name: str, path: Path) -> loaders.Network:
        module = _FAKES.get(Path(path))
        return real(name, path) if module is None else loaders.Network(module, "fake", module)

    monkeypatch.setattr(loaders, "build_network", build)


def _features(frame: np.ndarray) -> np.ndarray:
    # What _MeanColour gives after VBench's DINO normalisation of a constant frame.
    mean = np.array([0.485, 0.456, 0.406])
    std = np.array([0.229, 0.224, 0.225])
    v = (frame[0, 0].astype(np.float32) / 255.0 - mean.astype(np.float32)) / std.astype(np.float32)
    return np.append(v, 1.0)


def test_subject_consistency_with_fake_extractor_matches_hand_formula(tmp_path: Path) -> None:
    model = _script(_MeanColour(), tmp_path / "dino.pt")
    frames = [np.full((32, 48, 3), c, np.uint8) for c in ([10, 200, 30], [200, 10, 30],
                                                          [10, 200, 30])]
    score = _by_id(score_frames(frames, fps=24, weights={"dino_vitb16": model}))[
        "vbench.subject_consistency"]
    f = [_features(fr) for fr in frames]
    expected = ((clamped_cosine(f[0], f[1]) + clamped_cosine(f[0], f[1])) / 2
                + (clamped_cosine(f[1], f[2]) + clamped_cosine(f[0], f[2])) / 2) / 2
    assert score.status == "ok"
    assert score.value == pytest.approx(expected, abs=1e-6)
    assert score.weights[0].name == "dino.pt" and len(score.weights[0].sha256) == 64


def test_i2v_subject_with_fake_extractor(tmp_path: Path) -> None:
    model = _script(_MeanColour(), tmp_path / "dino.pt")
    ref = np.full((16, 24, 3), [10, 200, 30], np.uint8)
    frames = [np.full((32, 48, 3), c, np.uint8) for c in ([10, 200, 30], [200, 10, 30])]
    score = _by_id(score_frames(frames, fps=24, reference_image=ref,
                                weights={"dino_vitb16": model}))["vbench.i2v_subject"]
    f = [_features(fr) for fr in frames]
    consec = clamped_cosine(f[0], f[1])
    expected = 0.4 * 1.0 + 0.3 * consec + 0.3 * consec
    assert score.value == pytest.approx(expected, abs=1e-6)


def test_resized_frames_stay_float_as_in_vbench() -> None:
    # VBench resizes torch.Tensor(frames), a float tensor: bicubic overshoot past 0..255 is kept
    # and nothing is rounded (scripts/check_vbench_transforms.py compares with torchvision).
    from ref2va_accept.quality import _models as models

    frame = np.zeros((32, 48, 3), np.uint8)
    frame[:, 24:] = 255  # a hard edge
    x = models.clip_input(frame)
    mean = torch.tensor((0.48145466, 0.4578275, 0.40821073)).view(1, 3, 1, 1)
    std = torch.tensor((0.26862954, 0.26130258, 0.27577711)).view(1, 3, 1, 1)
    pixels = (x * std + mean) * 255.0
    assert float(pixels.max()) > 255.5 and float(pixels.min()) < -0.5
    fractional = (pixels - pixels.round()).abs()
    assert float(fractional.max()) > 0.1


def test_i2v_transforms_crop_to_224_and_take_the_reference_at_its_own_size() -> None:
    from ref2va_accept.quality import _models as models

    assert tuple(models.dino_i2v_input(np.zeros((64, 112, 3), np.uint8)).shape) == (1, 3, 224, 224)
    assert tuple(models.dreamsim_input(np.zeros((64, 112, 3), np.uint8)).shape) == (1, 3, 224, 224)
    assert tuple(models.dino_i2v_image(np.zeros((300, 200, 3), np.uint8)).shape) == (1, 3, 224, 224)
    assert tuple(models.dreamsim_image(np.zeros((300, 200, 3), np.uint8)).shape) == (1, 3, 224, 224)


def test_i2v_subject_sees_only_the_reference_centre_crop(tmp_path: Path) -> None:
    # Resize(256) + CenterCrop(224) of a 256x512 reference keeps columns 144..368: what lies
    # outside cannot move the score (squashing the reference to the frame size would).
    model = _script(_MeanColour(), tmp_path / "dino.pt")
    frames = [np.full((32, 48, 3), c, np.uint8) for c in ([10, 200, 30], [200, 10, 30])]
    ref = np.full((256, 512, 3), [10, 200, 30], np.uint8)
    edited = ref.copy()
    edited[:, :100] = [250, 250, 250]
    edited[:, 412:] = [0, 0, 0]
    scores = [_by_id(score_frames(frames, fps=24, reference_image=r,
                                  weights={"dino_vitb16": model}))["vbench.i2v_subject"].value
              for r in (ref, edited)]
    assert scores[0] == scores[1]
    edited[:, 200:300] = [250, 250, 250]  # inside the crop: it must move
    moved = _by_id(score_frames(frames, fps=24, reference_image=edited,
                                weights={"dino_vitb16": model}))["vbench.i2v_subject"].value
    assert moved != scores[0]


def test_motion_smoothness_with_fake_interpolator(tmp_path: Path) -> None:
    model = _script(_Midpoint(), tmp_path / "amt.pt")
    # Even frames 0 and 20; the odd frame is 14, the midpoint predicts 10: MAE 4.
    frames = [_const(0), _const(14), _const(20)]
    score = _by_id(score_frames(frames, fps=24, weights={"amt_s": model}))[
        "vbench.motion_smoothness"]
    assert score.value == pytest.approx((255 - 4) / 255, abs=1e-9)


def test_weights_that_differ_from_the_campaign_pin_are_refused(tmp_path: Path) -> None:
    import hashlib

    model = _script(_MeanColour(), tmp_path / "dino.pt")
    actual = hashlib.sha256(model.read_bytes()).hexdigest()
    frames = [_const(10), _const(20)]
    good = _by_id(score_frames(frames, fps=24, weights={"dino_vitb16": model},
                               weight_pins={"dino_vitb16": actual}))
    assert good["vbench.subject_consistency"].status == "ok"
    assert good["vbench.subject_consistency"].weights[0].sha256 == actual
    bad = _by_id(score_frames(frames, fps=24, weights={"dino_vitb16": model},
                              weight_pins={"dino_vitb16": "0" * 64}))
    score = bad["vbench.subject_consistency"]
    assert score.status == "error" and score.value is None
    assert f"sha256 {actual[:12]}" in score.detail and "pins 000000000000" in score.detail


def test_unloadable_weights_file_is_an_error_not_a_crash(tmp_path: Path) -> None:
    bad = tmp_path / "raft.pt"
    bad.write_bytes(b"not a checkpoint")
    score = _by_id(score_frames([_const(1), _const(2)], fps=24, weights={"raft": bad}))[
        "vbench.dynamic_degree"]
    assert score.status == "error" and "raft.pt" in score.detail
    assert math.isnan(float("nan"))  # the run itself went on


def test_model_scores_say_what_they_were_made_with(tmp_path: Path) -> None:
    model = _script(_MeanColour(), tmp_path / "dino.pt")
    ref = np.full((16, 24, 3), [10, 200, 30], np.uint8)
    frames = [np.full((32, 48, 3), c, np.uint8) for c in ([10, 200, 30], [200, 10, 30])]
    scores = _by_id(score_frames(frames, fps=24, reference_image=ref,
                                 weights={"dino_vitb16": model}))
    subject = scores["vbench.subject_consistency"].extra["made_with"]
    # The fake has no parameters; its inputs are float32 on the CPU, as every model's are.
    assert subject == {"models": {"dino_vitb16": {"parameters": None, "inputs": "float32",
                                                  "device": "cpu", "network": "fake"}},
                       "frame_resize_antialias": False}
    i2v = scores["vbench.i2v_subject"].extra["made_with"]
    assert i2v["frame_resize_antialias"] is True and "no EXIF" in i2v["reference_resize"]
    # A model with weights records their dtype.
    linear = _script(torch.nn.Linear(4, 4).to(torch.float64), tmp_path / "lin.pt")
    assert load_model("raft", linear).made_with()["parameters"] == "float64"
    # Flicker needs no model: nothing to record.
    assert "made_with" not in scores["vbench.temporal_flickering"].extra


class _Counting(torch.nn.Module):  # type: ignore[misc]
    """A small random convolutional feature extractor that counts its runs."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 5, stride=4)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.conv(x).mean(dim=(2, 3))


def test_a_held_frame_runs_the_network_once(tmp_path: Path) -> None:
    # A still video (frame-hold): every frame after the first is the first's bytes, so the
    # network runs once, and the score is a perfect 1.0 as if it ran on every frame.
    fake = _Counting()
    model = _script(fake, tmp_path / "clip.pt")
    still = [np.full((32, 48, 3), [10, 200, 30], np.uint8)] * 6
    score = _by_id(score_frames(still, fps=24, weights={"clip_vitb32": model}))[
        "vbench.background_consistency"]
    assert score.status == "ok" and score.value == pytest.approx(1.0, abs=1e-12)
    assert fake.calls == 1


def test_a_repeated_input_gives_what_running_the_network_gives(tmp_path: Path) -> None:
    # Two alternating frames: each runs once (the model remembers its latest calls, not only the
    # last), and what a repeat gets is bit for bit what running the network again gives.
    from ref2va_accept.quality._models import RECENT_CALLS, clip_input

    fake = _Counting()
    model = load_model("clip_vitb32", _script(fake, tmp_path / "clip.pt"))
    rng = np.random.default_rng(5)
    a, b = (rng.integers(0, 256, (32, 48, 3), dtype=np.uint8) for _ in range(2))
    outputs = [model(clip_input(frame)) for frame in (a, b, a, b, a)]
    assert fake.calls == 2
    assert np.array_equal(outputs[0], outputs[2]) and np.array_equal(outputs[1], outputs[3])
    rerun = model._run((clip_input(a),))
    assert fake.calls == 3 and np.array_equal(rerun, outputs[4])
    # A returned output is the caller's own: changing it changes nothing remembered.
    outputs[4][:] = 0.0
    assert np.array_equal(model(clip_input(a)), rerun)
    # Inputs that differ in one value, or in shape, run the network; the memory stays bounded.
    x = clip_input(a)
    x[0, 0, 112, 112] += 1.0
    model(x)
    model(x[:, :, :200])
    assert fake.calls == 5 and len(model.recent) <= RECENT_CALLS


class _Rows(torch.nn.Module):  # type: ignore[misc]
    """A fake CLIP that records each call's batch size and gives NaN for an all-black frame."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 5, stride=4)
        self.batches: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.batches.append(int(x.shape[0]))
        out = self.conv(x).mean(dim=(2, 3))
        black = (x.amax(dim=(1, 2, 3)) < -1.4).unsqueeze(1)  # CLIP-normalised 0 is below -1.4
        return torch.where(black, torch.full_like(out, float("nan")), out)


def _clip_score(frames: list[np.ndarray], path: Path) -> ScoreRecord:
    return _by_id(score_frames(frames, fps=24, weights={"clip_vitb32": path}))[
        "vbench.background_consistency"]


def test_frames_run_in_batches_and_score_as_they_do_one_by_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ref2va_accept.quality import _vbench as vbench

    rng = np.random.default_rng(7)
    frames = [rng.integers(0, 256, (32, 48, 3), dtype=np.uint8) for _ in range(19)]
    frames[3] = frames[2]  # a frame repeated within its batch runs once
    batched = _Rows()
    score = _clip_score(frames, _script(batched, tmp_path / "clip.pt"))
    assert vbench.BATCH_FRAMES == 8 and batched.batches == [7, 8, 3]
    monkeypatch.setattr(vbench, "BATCH_FRAMES", 1)
    alone = _Rows()
    one_by_one = _clip_score(frames, _script(alone, tmp_path / "clip1.pt"))
    assert alone.batches == [1] * 18  # the repeat is the last call again: not run
    # The same score but for float rounding (a batch's GEMMs are not batch 1's).
    assert score.status == one_by_one.status == "ok"
    assert score.value == pytest.approx(one_by_one.value, rel=1e-9)


@pytest.mark.parametrize(("black", "named"), [(10, "frames 8-15"), (17, "frames 16-18")])
def test_a_network_failing_on_a_batch_closes_its_dimension_naming_the_frames(
        tmp_path: Path, black: int, named: str) -> None:
    # Frame 10 fails with a full batch (run while the frames stream), frame 17 with the last,
    # short one (run when the video ends): either way the dimension is in error, naming the
    # batch's frames, and the others are scored.
    rng = np.random.default_rng(8)
    frames = [rng.integers(1, 256, (32, 48, 3), dtype=np.uint8) for _ in range(19)]
    frames[black] = np.zeros_like(frames[black])
    scores = _by_id(score_frames(frames, fps=24,
                                 weights={"clip_vitb32": _script(_Rows(), tmp_path / "c.pt")}))
    failed = scores["vbench.background_consistency"]
    assert failed.status == "error" and failed.value is None
    assert failed.detail.startswith(f"{named}: ValueError: clip_vitb32 (c.pt) gave ")
    assert "non-finite value(s)" in failed.detail
    assert scores["vbench.temporal_flickering"].status == "ok"


def test_a_network_is_built_once_per_file_on_the_cpu(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # A lossy track scores every video with the same weights: the network is built from the
    # file once, and built again only when the file's bytes change.
    from ref2va_accept.quality import _loaders as loaders

    built: list[Path] = []
    build = loaders.build_network

    def counted(name: str, path: Path) -> loaders.Network:
        built.append(Path(path))
        return build(name, path)

    monkeypatch.setattr(loaders, "build_network", counted)
    path = _script(_Rows(), tmp_path / "clip.pt")
    first, again = (load_model("clip_vitb32", path) for _ in range(2))
    assert len(built) == 1 and again.module is first.module
    assert again.recent == [] and again is not first  # each video remembers its own calls
    path.write_bytes(b"other bytes")
    _FAKES[path] = _Rows()
    changed = load_model("clip_vitb32", path)
    assert len(built) == 2 and changed.module is not first.module
    assert changed.identity.sha256 != first.identity.sha256
