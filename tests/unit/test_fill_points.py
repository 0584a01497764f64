"""`ref2va-accept fill-points`: a lossless contract filled from B0's first dump, text kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ref2va_accept.campaign import fill_points, load_campaign, lock_path
from ref2va_accept.cli import main
from ref2va_accept.core import CampaignError, FreezeError
from ref2va_accept.tensors import write_tensor_file
from tests.media_samples import write_mp4

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
# The small CI campaign: two lossless tracks whose points are one flow mapping per line, as in the
# host campaign. One shape is turned into a host-style placeholder in the copy.
SOURCE = ROOT / "fixtures" / "campaigns" / "reference.yaml"
PLACEHOLDER = '"<FILL: shape the H3 worker extension writes for this point>"'


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    """A copy of the host campaign, laid out so that its relative paths still resolve."""
    (tmp_path / "fixtures" / "campaigns").mkdir(parents=True)
    (tmp_path / "fixtures" / "inputs").symlink_to(ROOT / "fixtures" / "inputs")
    (tmp_path / "engine").symlink_to(ROOT / "engine")
    copy = tmp_path / "fixtures" / "campaigns" / "host.yaml"
    text = SOURCE.read_text()
    line = next(line for line in text.splitlines() if "{name: cond.image," in line)
    start = line.index("shape: ") + len("shape: ")
    copy.write_text(text.replace(line, line[:start] + PLACEHOLDER + "}", 1))
    return copy


def _diagnostics(path: Path, track: str) -> list[str]:
    points = load_campaign(path).model.tracks[track].comparison_points  # type: ignore[index]
    return [p.name for p in points if p.source == "diagnostics"]


def _shape(index: int) -> list[int]:
    return [index + 1, 3, 2]


def _dump(folder: Path, names: list[str], skip: frozenset[str] = frozenset()) -> Path:
    folder.mkdir(exist_ok=True)
    for index, name in enumerate(names):
        if name in skip:
            continue
        # BF16 for the text condition (bit patterns as uint16), F32 for every other point
        if name == "cond.text":
            write_tensor_file(folder / f"{name}.safetensors",
                              {name: np.zeros(_shape(index), np.uint16)}, dtypes={name: "BF16"})
        else:
            write_tensor_file(folder / f"{name}.safetensors",
                              {name: np.zeros(_shape(index), np.float32)})
    return folder


def _points(path: Path, track: str) -> dict[str, tuple[str, list[int] | str]]:
    points = load_campaign(path).model.tracks[track].comparison_points  # type: ignore[index]
    return {p.name: (p.dtype, p.shape) for p in points}


def test_fills_every_diagnostics_point_and_keeps_the_rest_of_the_text(
    campaign: Path, tmp_path: Path
) -> None:
    names = _diagnostics(campaign, "5s-lossless")
    before = campaign.read_text().splitlines()
    result = fill_points(campaign, _dump(tmp_path / "b0", names), tracks=["5s-lossless"])
    assert result.written and not result.unfilled
    filled = _points(campaign, "5s-lossless")
    for index, name in enumerate(names):
        assert filled[name] == ("BF16" if name == "cond.text" else "F32", _shape(index))
    assert "cond.image" in names  # the placeholder's point, now filled like the others
    after = campaign.read_text().splitlines()
    assert len(after) == len(before)
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    # only the point lines of that track changed; every comment stays
    assert all(after[i].lstrip().startswith("- {name: ") for i in changed)
    assert [line for line in after if line.lstrip().startswith("#")] == \
        [line for line in before if line.lstrip().startswith("#")]
    # the other lossless track is untouched
    assert _points(campaign, "15s-lossless") == _points(SOURCE, "15s-lossless")


def test_a_missing_point_is_named_and_the_others_are_filled(
    campaign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = _diagnostics(campaign, "5s-lossless")
    missing = "cond.image"  # the placeholder's point: it must stay a placeholder
    dump = _dump(tmp_path / "b0", names, skip=frozenset({missing}))
    code = main(["fill-points", str(campaign), str(dump), "--track", "5s-lossless"])
    out = capsys.readouterr().out
    assert code == 1
    assert f"5s-lossless: {missing}: NOT FILLED: no {missing}.safetensors" in out
    assert f"not filled: 5s-lossless:{missing}" in out
    filled = _points(campaign, "5s-lossless")
    assert filled[names[0]][1] == _shape(0)
    assert isinstance(filled[missing][1], str)  # still the placeholder


def test_every_lossless_track_by_default_and_mp4_audio_from_the_mp4(
    campaign: Path, tmp_path: Path
) -> None:
    names = sorted(set(_diagnostics(campaign, "5s-lossless"))
                   | set(_diagnostics(campaign, "15s-lossless")))
    mp4 = write_mp4(tmp_path / "b0.mp4", 10)
    result = fill_points(campaign, _dump(tmp_path / "b0", names), mp4=mp4)
    assert not result.unfilled
    assert {f.track for f in result.changed} == {"5s-lossless", "15s-lossless"}
    for track in ("5s-lossless", "15s-lossless"):
        dtype, shape = _points(campaign, track)["mp4.audio"]
        assert dtype == "F32"
        assert isinstance(shape, list) and shape[0] == 2 and shape[1] >= 32000 * 10 // 24


def test_without_an_mp4_a_placeholder_mp4_audio_is_named_unfilled(
    campaign: Path, tmp_path: Path
) -> None:
    text = campaign.read_text()
    line = next(line for line in text.splitlines() if "{name: mp4.audio," in line)
    start = line.index("shape: ") + len("shape: ")
    campaign.write_text(text.replace(line, line[:start] + PLACEHOLDER + "}", 1))
    names = _diagnostics(campaign, "5s-lossless")
    result = fill_points(campaign, _dump(tmp_path / "b0", names), tracks=["5s-lossless"])
    unfilled = {f.name: f.reason for f in result.unfilled}
    assert list(unfilled) == ["mp4.audio"]
    assert "--mp4" in str(unfilled["mp4.audio"])


def test_a_frozen_campaign_is_refused_unless_forced(campaign: Path, tmp_path: Path) -> None:
    names = _diagnostics(campaign, "5s-lossless")
    dump = _dump(tmp_path / "b0", names)
    lock_path(campaign).write_text("{}")
    original = campaign.read_text()
    with pytest.raises(FreezeError, match=r"frozen \(host\.lock\.json exists\).*--force"):
        fill_points(campaign, dump, tracks=["5s-lossless"])
    assert campaign.read_text() == original
    assert fill_points(campaign, dump, tracks=["5s-lossless"], force=True).written


def test_a_dry_run_reports_and_writes_nothing(campaign: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    names = _diagnostics(campaign, "5s-lossless")
    original = campaign.read_text()
    code = main(["fill-points", str(campaign), str(_dump(tmp_path / "b0", names)),
                 "--track", "5s-lossless", "--dry-run",
                 "--mp4", str(write_mp4(tmp_path / "a.mp4", 10))])
    out = capsys.readouterr().out
    assert code == 0
    assert campaign.read_text() == original
    assert f"5s-lossless: {names[0]}: dtype" in out and "-> [1, 3, 2]" in out
    assert "would change" in out and "file not written" in out
    assert not [p for p in campaign.parent.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("track", ["5s-lossy", "9s-lossless"])
def test_a_track_that_is_not_a_lossless_one_is_refused(campaign: Path, tmp_path: Path,
                                                       track: str) -> None:
    with pytest.raises(CampaignError, match=f"--track '{track}': expected a lossless track"):
        fill_points(campaign, _dump(tmp_path / "b0", []), tracks=[track])


def test_a_missing_dump_folder_is_refused_on_the_command_line(
    campaign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["fill-points", str(campaign), str(tmp_path / "nowhere")]) == 2
    assert "nowhere: expected B0's dump folder" in capsys.readouterr().err


def test_an_edit_that_does_not_load_back_leaves_the_file_unchanged(
    campaign: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ref2va_accept.campaign import _fill_points as module

    names = _diagnostics(campaign, "5s-lossless")
    original = campaign.read_text()
    monkeypatch.setattr(module, "_edit_line", lambda line, dtype, shape: line.replace(
        "dtype: F32", "dtype: F33"))
    with pytest.raises(CampaignError, match="F33"):
        fill_points(campaign, _dump(tmp_path / "b0", names), tracks=["5s-lossless"])
    assert campaign.read_text() == original
    assert not [p for p in campaign.parent.iterdir() if p.name.startswith(".")]


def test_the_host_campaign_is_filled_from_a_dump_of_its_own_points(tmp_path: Path) -> None:
    """910c.yaml as shipped: every diagnostics point of both lossless tracks gets B0's shape."""
    (tmp_path / "fixtures" / "campaigns").mkdir(parents=True)
    (tmp_path / "fixtures" / "inputs").symlink_to(ROOT / "fixtures" / "inputs")
    (tmp_path / "engine").symlink_to(ROOT / "engine")
    host = tmp_path / "fixtures" / "campaigns" / "910c.yaml"
    host.write_text((ROOT / "fixtures" / "campaigns" / "910c.yaml").read_text())
    for track in ("5s-lossless", "15s-lossless"):
        names = _diagnostics(host, track)
        assert any(n.startswith("dit.step") and n.endswith(".audio") for n in names)
        fill_points(host, _dump(tmp_path / track, names), tracks=[track])
        points = load_campaign(host).model.tracks[track].comparison_points  # type: ignore[index]
        filled = {p.name: p.shape for p in points if p.source == "diagnostics"}
        assert filled == {name: _shape(i) for i, name in enumerate(names)}
