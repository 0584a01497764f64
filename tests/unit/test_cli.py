"""`ref2va-accept` as a user runs it: one clear line and a non-zero exit for bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import av
import pytest

from ref2va_accept.cli import main
from tests.media_samples import write_mp4

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ref2va_accept.cli", *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)


def _one_clear_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_probe_good_file_prints_json(tmp_path: Path) -> None:
    result = _cli("probe", str(write_mp4(tmp_path / "good.mp4")), "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["video"]["frames_decoded"] == 124 and payload["video"]["fps"] == 24
    assert (payload["video"]["width"], payload["video"]["height"]) == (64, 48)
    assert payload["audio"]["sample_rate"] == 32000 and payload["audio"]["channels"] == 2
    assert payload["audio"]["duration_s"] > 5 and payload["complete"] is True
    assert str(tmp_path) not in result.stdout


def test_probe_with_expectation_names_the_wrong_frame_count(tmp_path: Path) -> None:
    path = write_mp4(tmp_path / "short.mp4", frames=120)
    line = _one_clear_line(_cli("probe", str(path), "--frames", "124", "--width", "64",
                                "--height", "48"))
    assert "frame_count" in line and "124" in line and "120" in line


def _cut_after(whole: Path, frames: int, cut: Path) -> Path:
    """``whole`` (moov first) cut at its video packet number ``frames``: that many decode."""
    with av.open(str(whole)) as container:
        starts = [p.pos for p in container.demux(container.streams.video[0]) if p.size]
    cut.write_bytes(whole.read_bytes()[: starts[frames]])
    return cut


def test_probe_truncated_file(tmp_path: Path) -> None:
    # Exit 1, as the README says: a problem found in the file, whether it opens or not.
    good = write_mp4(tmp_path / "good.mp4").read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(good[: len(good) // 2])
    result = _cli("probe", str(cut))
    assert "cut.mp4" in _one_clear_line(result) and result.returncode == 1
    short = _cut_after(write_mp4(tmp_path / "fast.mp4", faststart=True), 81, tmp_path / "short.mp4")
    result = _cli("probe", str(short))
    assert "header declares 124 frames, decoded 81" in _one_clear_line(result)
    assert result.returncode == 1


def test_probe_file_without_audio(tmp_path: Path) -> None:
    result = _cli("probe", str(write_mp4(tmp_path / "mute.mp4", audio=False)))
    assert "no_audio_stream" in _one_clear_line(result) and result.returncode == 1


@pytest.mark.parametrize("text", ["this is not a video\n", "a video file, honestly\n" * 40])
def test_probe_file_that_is_not_an_mp4(tmp_path: Path, text: str) -> None:
    path = tmp_path / "notes.mp4"
    path.write_text(text)
    result = _cli("probe", str(path))
    line = _one_clear_line(result)
    assert result.returncode == 1, line  # README: a file that is not an MP4 gives exit 1
    assert line.startswith("ref2va-accept probe: notes.mp4: not an MP4 (no ISO BMFF box "
                           "structure")
    assert "truncated" not in line and str(tmp_path) not in line


def test_probe_missing_file(tmp_path: Path) -> None:
    # README: exit 2 for a file that cannot be opened at all.
    result = _cli("probe", str(tmp_path / "nothing.mp4"))
    assert "nothing.mp4: no such file" in _one_clear_line(result) and result.returncode == 2
    result = _cli("probe", str(tmp_path))
    assert "not a regular file" in _one_clear_line(result) and result.returncode == 2


@pytest.fixture(scope="module")
def short_mp4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 124-frame MP4 cut short: 81 frames decode, the container still declares 124."""
    root = tmp_path_factory.mktemp("short")
    return _cut_after(write_mp4(root / "whole.mp4", faststart=True), 81, root / "cut.mp4")


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The command in this process (score imports OpenCV once, not per call): code, out, err."""
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.mark.fast
def test_score_refuses_a_truncated_mp4_naming_found_and_declared(
        short_mp4: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(capsys, "score", str(short_mp4))
    assert code == 1 and out == ""
    assert err == ("ref2va-accept score: cut.mp4: 81 frames decoded, the container declares "
                   "124: not scored (--allow-partial scores them anyway)\n")


@pytest.mark.fast
def test_score_allow_partial_scores_the_prefix_and_says_so(
        short_mp4: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _main(capsys, "score", str(short_mp4), "--allow-partial")
    assert "partial: 81 of 124 frames" in out.splitlines()
    assert "vbench.temporal_flickering" in out
    _, out, _ = _main(capsys, "score", str(short_mp4), "--allow-partial", "--json")
    payload = json.loads(out)
    assert payload["partial"] == "partial: 81 of 124 frames"
    assert (payload["frames_decoded"], payload["frames_declared"]) == (81, 124)


@pytest.mark.fast
def test_score_checks_the_expected_count_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whole = write_mp4(tmp_path / "whole.mp4", frames=24, audio=False)
    code, out, err = _main(capsys, "score", str(whole), "--frames", "24", "--json")
    assert code == 0, err
    assert json.loads(out)["frames_expected"] == 24 and "partial" not in json.loads(out)
    # Whole as the container says, but not what the run asked for: no prefix of anything, so
    # refused even with the flag.
    code, out, err = _main(capsys, "score", str(whole), "--frames", "20", "--allow-partial")
    assert (code, out) == (1, "")
    assert err == "ref2va-accept score: whole.mp4: 24 frames decoded, 20 expected: not scored\n"
    campaign = ROOT / "fixtures/campaigns/reference.yaml"  # 124 frames on its 5 s tracks
    code, _, err = _main(capsys, "score", str(whole), "--campaign", str(campaign),
                         "--track", "5s-lossy", "--allow-partial")
    assert code == 1 and err.endswith("whole.mp4: 24 frames decoded, 124 expected: not scored\n")
    code, _, err = _main(capsys, "score", str(whole), "--track", "5s-lossy")
    assert code == 2 and "--campaign and --track go together" in err


def _verbatim_campaign(root: Path) -> Path:
    """The reference campaign and the files it pins, copied byte for byte under root and laid out
    as in the repository (freeze and verify hash them; tests/unit/suite_runner.py's
    campaign_variant rewrites a campaign instead)."""
    for rel in ("fixtures/campaigns/reference.yaml", "fixtures/inputs/prompt.txt",
                "fixtures/inputs/reference.png", "fixtures/inputs/reference.wav"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, root / rel)
    shutil.copytree(ROOT / "engine/profiles/reference", root / "engine/profiles/reference")
    return root / "fixtures/campaigns/reference.yaml"


@pytest.fixture(scope="module")
def frozen_once(tmp_path_factory: pytest.TempPathFactory
                ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The verbatim campaign frozen by `ref2va-accept freeze`, once for the module (each test
    that needs it froze the same bytes itself before): its folder and what freeze returned. The
    lock names its files relative to the campaign, so a copy of the folder is as frozen."""
    root = tmp_path_factory.mktemp("verbatim")
    return root, _cli("freeze", str(_verbatim_campaign(root)))


@pytest.fixture
def frozen_campaign(frozen_once: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
                    ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A copy of the frozen verbatim campaign of this test's own (a test may change its files),
    and what freeze returned when it froze it."""
    root, froze = frozen_once
    shutil.copytree(root, tmp_path / "verbatim")
    return tmp_path / "verbatim/fixtures/campaigns/reference.yaml", froze


def test_freeze_then_verify_is_clean(
        frozen_campaign: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    verbatim_campaign, froze = frozen_campaign
    assert froze.returncode == 0
    result = _cli("verify", str(verbatim_campaign))
    assert result.returncode == 0 and result.stdout.splitlines()[0].endswith(": frozen")
    # Then what the frozen protocol costs, per track and candidate.
    assert "protocol: instance design: 3 fresh instances per arm" in result.stdout
    # 3 + 3 latency instances and B0's two gate instances (the candidate's gate runs on its
    # first latency instance).
    assert any(line.split()[:3] == ["5s-lossless", "lossless-text-kv", "8"]
               for line in result.stdout.splitlines())


def test_one_changed_byte_of_the_reference_image_fails_verify_naming_it(
    frozen_campaign: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    verbatim_campaign, froze = frozen_campaign
    assert froze.returncode == 0
    image = verbatim_campaign.parents[2] / "fixtures/inputs/reference.png"
    data = bytearray(image.read_bytes())
    data[100] ^= 0x01
    image.write_bytes(bytes(data))
    result = _cli("verify", str(verbatim_campaign))
    assert result.returncode == 1
    assert "reference.png" in result.stdout and "drifted" in result.stdout


def test_verify_json_reports_unfilled_placeholders_of_the_910c_campaign() -> None:
    result = _cli("verify", "fixtures/campaigns/910c.yaml", "--json")
    assert result.returncode == 1
    payload = json.loads(result.stdout)
    assert "engine.model" in payload["unfilled"]
    assert "engine.source_pin.npu_firmware" in payload["unfilled"]
    assert payload["verdict_cap"] is not None
    cost = {(c["track"], c["candidate"]): c for c in payload["cost"]}
    fifteen = cost["15s-lossless", "cache-dit-lossless-guard"]
    assert fifteen["instance_starts"] == 6 and fifteen["b0_requests"] == [9, 12]
    assert fifteen["host_s_at_target"] < fifteen["host_s_upper"]


def test_malformed_campaign_is_one_line_naming_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 1\nname: x\nsurprise: 1\n")
    result = _cli("verify", str(bad))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    # One line per problem, each naming the file and the field.
    assert all("bad.yaml" in line for line in lines)
    assert any("surprise: unknown key" in line for line in lines)


@pytest.mark.fast
def test_score_json_spells_out_an_infinite_relative_error() -> None:
    # An error against a zero baseline is infinite; `score --json` must stay JSON that any reader
    # takes (json.dumps would write the bare token Infinity), so it is spelled "inf", as before.
    from ref2va_accept.cli._score import _spelled
    from ref2va_accept.evidence import RelativeError

    error = RelativeError(scorer="vbench.x", dimension="x", kind="vbench", candidate=0.5,
                          baseline=0.0, error=float("inf"), status="ok", detail="")
    text = json.dumps(_spelled(error.json_dict()), allow_nan=False)
    assert json.loads(text)["error"] == "inf" and json.loads(text)["candidate"] == 0.5
    finite = RelativeError(scorer="vbench.x", dimension="x", kind="vbench", candidate=0.5,
                           baseline=0.25, error=1.0, status="ok", detail="")
    assert _spelled(finite.json_dict()) == finite.json_dict()


@pytest.mark.fast
def test_scorers_check_json_writes_each_weights_file_and_refuses_a_misspelt_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Nothing in the folder: every file missing, no model loaded.
    from pydantic import ValidationError

    from ref2va_accept.cli._scorers_check import FileCheck

    code, out, _ = _main(capsys, "scorers", "check", "--dir", str(tmp_path), "--json")
    assert code == 1
    raft = json.loads(out)["weights"]["raft"]
    assert raft == {"name": "raft", "file": "raft-things.pth", "found": False, "sha256": None,
                    "pin": None, "pin_matches": None, "stand_in": False,
                    "stand_in_declared": False, "network": None, "forward": None,
                    "ready": False, "problem": raft["problem"]}
    assert raft["problem"].startswith("missing: ") and str(tmp_path) in raft["problem"]
    # What it writes is the whole record, this host's path aside; a misspelt key is refused.
    read = FileCheck.model_validate(raft | {"path": None})
    assert read.json_dict() == raft
    with pytest.raises(ValidationError, match="declared"):
        FileCheck.model_validate(raft | {"path": None, "declared": True})
