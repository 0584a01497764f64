"""`ref2va-accept merge`: runs side by side, each against its own B0, never combined; runs of
another campaign or host refused unless the caller says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ref2va_accept.cli import main
from ref2va_accept.evidence import TrackVerdict
from ref2va_accept.history import MergeInputError, MergeRefused, load_run, merge
from tests.unit.run_folders import LOCK, finished_run, latency_check

pytestmark = pytest.mark.fast


def _run(root: Path, run_id: str, *, lock: str = LOCK, torch: str = "2.13.0+cpu",
         ratio: float = 0.305, tracks: tuple[str, ...] = ("5s-lossless",)) -> Path:
    """A finished run of lossless-text-kv on `tracks`, its latency decided at `ratio`."""
    verdict = "supported" if ratio < 0.5 else "failed"
    verdicts = [TrackVerdict(track=track, candidate="lossless-text-kv", verdict=verdict,
                             reasons=(f"latency_{verdict}",), open_checks=(), checks={})
                for track in tracks]
    checks = [latency_check(track, "lossless-text-kv", ratio=ratio, lower=ratio - 0.04,
                            upper=ratio + 0.07, verdict=verdict) for track in tracks]
    return finished_run(root, run_id, verdicts, checks, lock=lock, torch=torch)


def test_two_runs_of_one_frozen_campaign_sit_side_by_side(tmp_path: Path) -> None:
    first = _run(tmp_path, "run-a", ratio=0.305)
    second = _run(tmp_path, "run-b", ratio=0.52, tracks=("5s-lossless", "15s-lossless"))
    report = merge([first, second], tmp_path / "merged")
    page = report.read_text()
    # One column per run, each cell that run's own verdict, ratio and interval.
    assert page.count("<th>run-a<br>") == 2 and page.count("<th>run-b<br>") == 2
    assert "SUPPORTED" in page and "0.305 [0.265, 0.375] vs 0.5" in page
    assert "FAILED" in page and "0.520 [0.480, 0.590] vs 0.5" in page
    assert "not in this run" in page  # 15s-lossless only in run-b
    assert "no ratio is added, multiplied or averaged across runs" in page
    record = json.loads((tmp_path / "merged" / "merge.json").read_text())
    assert record["combined"] is None
    row = next(r for r in record["rows"] if r["track"] == "5s-lossless")
    assert row["runs"]["run-a"]["latency"]["ratio_of_medians"] == 0.305
    assert row["runs"]["run-b"]["latency"]["ratio_of_medians"] == 0.52
    assert str(tmp_path) not in page  # names runs by their folder, never by path


def test_a_run_of_another_campaign_is_refused_in_one_line_unless_allowed(tmp_path: Path) -> None:
    first = _run(tmp_path, "run-a")
    other = _run(tmp_path, "run-b", lock="6e935a34cae8" + "0" * 52)
    with pytest.raises(MergeRefused) as refused:
        merge([first, other], tmp_path / "merged")
    message = str(refused.value)
    assert "different campaign" in message and "lock c197f00a0d73" in message
    assert "lock 6e935a34cae8" in message and "--allow-different-campaigns" in message
    assert not (tmp_path / "merged").exists()
    page = merge([first, other], tmp_path / "merged", allow_campaigns=True).read_text()
    assert "Merged although the campaign differs (--allow-different-campaigns)" in page


def test_another_host_identity_is_refused_unless_allowed(tmp_path: Path) -> None:
    first = _run(tmp_path, "run-a")
    other = _run(tmp_path, "run-b", torch="2.14.1")
    with pytest.raises(MergeRefused, match=r"different host identity.*torch=2\.14\.1"):
        merge([first, other], tmp_path / "merged")
    page = merge([first, other], tmp_path / "m2", allow_hosts=True).read_text()
    assert "Merged although the host identity differs" in page


def test_the_same_run_twice_or_one_run_is_refused(tmp_path: Path) -> None:
    first = _run(tmp_path, "run-a")
    with pytest.raises(MergeRefused, match="given twice"):
        merge([first, first / "evidence.json"], tmp_path / "merged")
    with pytest.raises(MergeRefused, match="at least two runs"):
        merge([first], tmp_path / "merged")


def test_unreadable_runs_are_one_line_naming_them(tmp_path: Path) -> None:
    with pytest.raises(MergeInputError, match=r"nowhere: no evidence.json \(not a run folder\)"):
        load_run(tmp_path / "nowhere")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "evidence.json").write_text("{not json")
    with pytest.raises(MergeInputError, match=r"broken: evidence\.json is not JSON"):
        load_run(broken)
    (broken / "evidence.json").write_text(json.dumps({"schema": "something else"}))
    with pytest.raises(MergeInputError, match="not a ref2va evidence bundle"):
        load_run(broken)
    # A bundle that does not match the evidence records: named with the field, in one line.
    run = json.loads((_run(tmp_path, "run-a") / "evidence.json").read_text())
    del run["verdicts"][0]["verdict"]
    (broken / "evidence.json").write_text(json.dumps(run))
    with pytest.raises(MergeInputError, match=r"^broken: evidence\.json does not match the "
                                              r"evidence records: "
                                              r"verdicts\.0\.verdict: Field required$"):
        load_run(broken)
    assert load_run(tmp_path / "run-a").bundle.verdicts[0].verdict == "supported"


def test_the_command_line_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = _run(tmp_path, "run-a"), _run(tmp_path, "run-b")
    assert main(["merge", str(first), str(second)]) == 0
    assert (tmp_path / "merge-run-a+run-b" / "report.html").is_file()  # beside the first run
    other = _run(tmp_path, "run-c", lock="f" * 64)
    assert main(["merge", str(first), str(other), "--output", str(tmp_path / "x")]) == 1
    assert main(["merge", str(first), str(tmp_path / "gone")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("ref2va-accept merge: different campaign")
    assert err[1] == "ref2va-accept merge: gone: no evidence.json (not a run folder)"


def test_lanes_of_one_run_give_each_track_its_lanes_column_and_link_their_reports(
        tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    one = _run(evidence, "r-lane1", tracks=("5s-lossy", "15s-lossless"))
    two = _run(evidence, "r-lane2", ratio=0.52, tracks=("5s-lossless", "15s-lossy"))
    (one / "report.html").write_text("<html></html>")  # lane 2's report is missing
    page = merge([one, two], evidence / "r", lanes=True).read_text()
    assert "Ref2VA campaign run in 2 lanes" in page
    # A column per track, the lane that judged it; no "not in this run" cells.
    assert page.count("<th>r-lane1<br>") == 2 and page.count("<th>r-lane2<br>") == 2
    assert "not in this run" not in page
    # Tracks in the campaign's order, whichever lane judged them.
    assert [page.index(f"<h3>{t}</h3>") for t in
            ("5s-lossless", "5s-lossy", "15s-lossless", "15s-lossy")] == sorted(
        page.index(f"<h3>{t}</h3>") for t in
        ("5s-lossless", "5s-lossy", "15s-lossless", "15s-lossy"))
    # Each lane's own report, linked relative to the merged folder (no absolute path).
    assert "<a href='../r-lane1/report.html'>report</a>" in page
    assert "<td>r-lane2</td><td>5s-lossless, 15s-lossy</td>" in page and "not found" in page
    assert str(tmp_path) not in page
    record = json.loads((evidence / "r" / "merge.json").read_text())
    assert record["lanes"] is True and record["combined"] is None
    row = next(r for r in record["rows"] if r["track"] == "15s-lossy")
    assert list(row["runs"]) == ["r-lane2"]


def test_lanes_that_judged_the_same_track_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = _run(tmp_path, "r-lane1", tracks=("5s-lossy", "15s-lossless"))
    two = _run(tmp_path, "r-lane2", tracks=("5s-lossless", "15s-lossless"))
    with pytest.raises(MergeRefused, match="r-lane2: track 15s-lossless was also judged by "
                                           "r-lane1"):
        merge([one, two], tmp_path / "m", lanes=True)
    assert not (tmp_path / "m").exists()
    # Read side by side (no --lanes), the same runs merge.
    assert merge([one, two], tmp_path / "m").is_file()
    assert main(["merge", "--lanes", str(one), str(two), "--output",
                 str(tmp_path / "m2")]) == 1
    assert "also judged by r-lane1" in capsys.readouterr().err
