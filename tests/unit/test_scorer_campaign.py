"""A campaign's scorer weights from writing to verdict: `scorers standins --campaign` writes the
stand-ins a campaign marks and checks their pins, freezing records what is on disk, a track runs
only the models of the dimensions it gates, and a network's non-finite output never becomes a
score."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from ref2va_accept.campaign import freeze, load_campaign
from ref2va_accept.cli import main
from ref2va_accept.core import FreezeError
from ref2va_accept.planning import plan_track
from ref2va_accept.quality import score_frames
from ref2va_accept.quality._standins import make_standins
from ref2va_accept.quality._weight_names import VBENCH_LAYOUT
from tests.unit.standin_store import lay_out_standins
from tests.unit.suite_runner import ROOT, campaign_variant

# Large scorer models: the selftest runs these after the timed self-tests (./ref2va).
pytestmark = pytest.mark.heavy

pytest.importorskip("torch")

# What the reference campaign pins for its stand-in CLIP ViT-B/32 (fixtures/campaigns).
PINNED = yaml.safe_load((ROOT / "fixtures/campaigns/reference.yaml").read_text())[
    "scorer_weights"]["clip_vitb32"]["sha256"]


@pytest.fixture(scope="module")
def clip_standins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the CLIP ViT-B/32 stand-in, made once for the tests that only read it
    (seconds of CPU each time; the tests of `scorers standins` make their own)."""
    folder = tmp_path_factory.mktemp("clip-standins")
    lay_out_standins(tmp_path_factory, folder, ["clip_vitb32"])
    return folder


def _campaign(folder: Path, weights_dir: Path, **scorer_weights: dict[str, object]) -> Path:
    path = campaign_variant(folder, models=True)
    data = yaml.safe_load(path.read_text())
    data["scorer_weights_dir"] = str(weights_dir)
    if scorer_weights:
        data["scorer_weights"] = scorer_weights
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_standins_for_a_campaign_are_written_where_it_reads_them_and_match_its_pin(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    weights = tmp_path / "cache"
    campaign = _campaign(tmp_path / "c", weights)
    assert main(["scorers", "standins", "--campaign", str(campaign)]) == 0
    assert "clip_vitb32: ViT-B-32.pt matches its pin" in capsys.readouterr().out
    assert (weights / VBENCH_LAYOUT["clip_vitb32"]).is_file()
    # A second time it keeps the file and checks it again.
    assert main(["scorers", "standins", "--campaign", str(campaign)]) == 0


def test_a_stand_in_that_is_not_its_pin_is_named_and_exits_1(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
        capsys: pytest.CaptureFixture[str]) -> None:
    # The stand-in is on disk already (the session's, linked): kept, and checked against the pin
    # as a freshly written one is (the test above writes one; a second build here was 12 s of
    # CPU for the same check).
    lay_out_standins(tmp_path_factory, tmp_path / "cache", ["clip_vitb32"])
    campaign = _campaign(tmp_path / "c", tmp_path / "cache",
                         clip_vitb32={"sha256": "ab" * 32, "stand_in": True})
    assert main(["scorers", "standins", "--campaign", str(campaign)]) == 1
    out = capsys.readouterr().out
    assert f"clip_vitb32: ViT-B-32.pt has sha256 {PINNED}, the campaign pins {'ab' * 32}" in out


def test_standins_take_a_folder_or_a_campaign(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    campaign = _campaign(tmp_path / "c", tmp_path / "cache")
    assert main(["scorers", "standins", str(tmp_path), "--campaign", str(campaign)]) == 2
    assert main(["scorers", "standins"]) == 2
    err = capsys.readouterr().err
    assert "give a FOLDER or --campaign" in err
    data = yaml.safe_load(campaign.read_text())
    data["scorer_weights"] = {"clip_vitb32": {"sha256": PINNED}}  # a real file, not a stand-in
    campaign.write_text(yaml.safe_dump(data))
    assert main(["scorers", "standins", "--campaign", str(campaign)]) == 0
    assert "no scorer weights marked stand_in: true" in capsys.readouterr().out


def test_freezing_records_the_weights_found_and_refuses_one_that_is_not_its_pin(
        tmp_path: Path, clip_standins: Path) -> None:
    campaign = _campaign(tmp_path / "c", clip_standins)
    lock = json.loads(freeze(campaign).read_text())
    assert lock["scorer_weights"] == {"clip_vitb32": {"name": "ViT-B-32.pt", "sha256": PINNED,
                                                      "stand_in": True}}
    data = yaml.safe_load(campaign.read_text())
    data["scorer_weights"]["clip_vitb32"]["sha256"] = "cd" * 32
    campaign.write_text(yaml.safe_dump(data))
    with pytest.raises(FreezeError, match=r"scorer_weights.clip_vitb32: ViT-B-32.pt has sha256"):
        freeze(campaign)


def test_weights_not_on_this_disk_are_not_recorded(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path / "c", tmp_path / "empty")
    assert json.loads(freeze(campaign).read_text())["scorer_weights"] == {}


def test_a_track_runs_the_models_of_the_dimensions_it_gates_only(tmp_path: Path) -> None:
    campaign = load_campaign(_campaign(tmp_path / "c", tmp_path / "cache"))
    five = plan_track(campaign, "5s-lossy").lossy
    fifteen = plan_track(campaign, "15s-lossy").lossy
    assert five is not None and fifteen is not None
    assert set(five.weights) == {"clip_vitb32"} and five.stand_ins == {"clip_vitb32"}
    assert "vbench.background_consistency" in five.gate.gated
    assert dict(fifteen.weights) == {}  # gates no model-based dimension: runs no model


def test_a_stand_in_the_campaign_does_not_declare_is_labelled_in_every_score(
        tmp_path: Path, clip_standins: Path) -> None:
    from ref2va_accept.quality._known_standins import WRITTEN_LIST

    shutil.copytree(clip_standins, tmp_path / "cache")
    made = tmp_path / "cache" / VBENCH_LAYOUT["clip_vitb32"]
    (tmp_path / "cache" / WRITTEN_LIST).unlink()  # by its bytes alone (a shipped hash)
    frames = [np.full((64, 112, 3), i, np.uint8) for i in range(3)]
    for declared, expected in ((frozenset(), False), (frozenset({"clip_vitb32"}), True)):
        score = {s.scorer: s for s in score_frames(
            frames, fps=24, weights={"clip_vitb32": made}, stand_ins=declared)}[
            "vbench.background_consistency"]
        assert score.status == "ok", score.detail
        (identity,) = score.weights
        assert identity.sha256 == PINNED and identity.stand_in
        assert identity.declared is expected
        assert identity.json_dict()["declared"] is expected


def test_a_missing_stand_in_says_how_to_make_it(tmp_path: Path) -> None:
    frames = [np.full((64, 112, 3), i, np.uint8) for i in range(3)]
    scores = {s.scorer: s for s in score_frames(
        frames, fps=24, weights={"clip_vitb32": tmp_path / "ViT-B-32.pt"},
        stand_ins=frozenset({"clip_vitb32"}))}
    score = scores["vbench.background_consistency"]
    assert score.status == "open"
    assert "clip_vitb32 (not found: ViT-B-32.pt)" in score.detail
    assert "`ref2va-accept scorers standins FOLDER` writes the pinned file" in score.detail


def test_non_finite_network_output_is_an_error_never_a_score(tmp_path: Path) -> None:
    """AMT-S's four-level correlation pyramid reaches one pixel on 64-pixel-high frames and
    gives NaN there, whatever the weights: once cast to uint8 that was a number (0.499)."""
    make_standins(tmp_path, ["amt_s"])
    yy, xx = np.mgrid[0:64, 0:112]
    base = np.stack([(xx * 2) % 255, (yy * 3) % 255, (xx + yy) % 255], -1).astype(np.uint8)
    frames = [np.roll(base, 2 * i, axis=1) for i in range(3)]
    scores = {s.scorer: s for s in score_frames(
        frames, fps=24, weights={"amt_s": tmp_path / VBENCH_LAYOUT["amt_s"]})}
    score = scores["vbench.motion_smoothness"]
    assert score.status == "error" and score.value is None
    assert "amt_s (amt-s.pth) gave" in score.detail and "non-finite value(s)" in score.detail


def test_a_clip_stand_in_names_no_path_of_this_machine(clip_standins: Path) -> None:
    """TorchScript's debug records name the absolute path of each class's Python file, so a
    clone elsewhere wrote other bytes and failed the pin; the stand-in keeps none of them."""
    import zipfile

    from ref2va_accept.quality._libraries import submodule

    path = clip_standins / VBENCH_LAYOUT["clip_vitb32"]
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    assert names and not [n for n in names if n.endswith(".debug_pkl")]
    clip_model = submodule("clip", "model", distribution="clip-anytorch")
    assert str(Path(clip_model.__file__).parent).encode() not in path.read_bytes()
    assert str(ROOT).encode() not in path.read_bytes()
