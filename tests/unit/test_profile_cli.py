"""`ref2va-accept profile FOLDER [--baseline FOLDER]`: what an operator who profiled by hand
reads on the command line, the same figures as the report, and one clear line for bad input."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from ref2va_accept.cli import main
from tests.npu_fixtures import COMMITTED, text

pytestmark = pytest.mark.fast


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["profile", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_four_ranks_with_b0_beside(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = _main(capsys, str(COMMITTED / "candidate"), "--baseline",
                           str(COMMITTED / "b0"), "--ranks", "4", "--json",
                           str(tmp_path / "p.json"), "--html", str(tmp_path / "p.html"))
    assert (code, err) == (0, "")
    assert "by hand b0: summarized; ranks expected [0, 1, 2, 3], profiled [0, 1, 2, 3]" in out
    assert "by hand candidate: summarized" in out
    assert ("16.80 ms  41.9%      8x FlashAttentionScore [MIX_AIC] in "
            "1,40,4096,128;1,40,16384,128;1,40,16384,128 DT_BF16;DT_BF16;DT_BF16") in out
    assert "step 1: 45.4 ms = computing 40.1 + communication not overlapped 5.2 + free 0.1" in out
    assert ("communication (measured): 7.20 ms, not overlapped 5.17 ms (11.4% of the step); "
            "slowest link 0-3 HCCS") in out
    assert "H2D: 2 copies, 134217728 bytes, 0.30 ms" in out
    assert "memory allocated_peak on NPU:0 (PTA): 30000.0 MiB" in out
    assert "  allocated_peak: the largest allocated total" in out
    assert "candidate beside b0 (a rank's mean over rank(s) 0, 1, 2, 3" in out
    assert "faster FlashAttentionScore [MIX_AIC]: B0 17.05, candidate 8.53" in out
    assert "new    Sub [AI_VECTOR_CORE]" in out and "gone   Cast [AI_VECTOR_CORE]" in out
    written = json.loads((tmp_path / "p.json").read_text())
    b0, candidate = written["profiles"]
    assert b0["arm"] == "b0" and candidate["comparison"]["baseline"] == "b0"
    assert all(not f["file"].startswith("/") for r in b0["ranks"] for f in r["files"])
    assert b0["ranks"][0]["files"][0]["file"].startswith("b0/worker_0_")
    page = (tmp_path / "p.html").read_text()
    assert page.startswith("<!doctype html>") and "<svg class='ref2va-step-bars'" in page
    assert "<h4>candidate beside b0</h4>" in page


def test_the_ranks_expected_come_from_the_profiles_metadata(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = text.write_arm(tmp_path / "arm", text.Variant(), (0, 1, 3))
    code, out, _ = _main(capsys, str(folder))
    assert code == 1
    assert "ranks expected [0, 1, 2, 3], profiled [0, 1, 3]" in out
    assert "  rank 2: missing (expected, but no profile of this rank was found)" in out
    # With no metadata and no --ranks, what was found is all that can be expected: said so.
    for meta in folder.rglob("profiler_metadata.json"):
        meta.unlink()
    code, out, _ = _main(capsys, str(folder))
    assert code == 0
    assert "note: arm: the ranks expected were taken from what was found ([0, 1, 3])" in out


def test_a_file_cut_short_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    variant = dataclasses.replace(text.Variant(ranks=(0,)), truncate="communication.json")
    folder = text.write_arm(tmp_path / "arm", variant)
    code, out, err = _main(capsys, str(folder), "--ranks", "1")
    assert (code, err) == (1, "")
    assert "  rank 0: unreadable, steps 1 (communication.json: not valid JSON at line 1" in out
    assert "(communication not read)" in out


def test_raw_folders_where_torch_npu_does_not_import(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    variant = dataclasses.replace(text.Variant(ranks=(0, 1)), raw_ranks=(1,))
    folder = text.write_arm(tmp_path / "arm", variant)
    code, out, _ = _main(capsys, str(folder), "--ranks", "2")
    assert code == 1
    assert "rank 1: not_analysed (not analysed: torch_npu does not import here" in out
    assert "from torch_npu.profiler.profiler import analyse; analyse('worker_1_" in out
    code, out, _ = _main(capsys, str(folder), "--ranks", "2", "--no-analyse")
    assert code == 1 and "not analysed (analysis not asked for)" in out


@pytest.mark.parametrize(("make", "said"), [
    (lambda p: p / "nowhere", "nowhere: not a folder"),
    (lambda p: p, "no profile in it"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          make: object, said: str) -> None:
    code, out, err = _main(capsys, str(make(tmp_path)))  # type: ignore[operator]
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("ref2va-accept profile: ") and said in err


def test_bad_ranks_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(capsys, str(COMMITTED / "b0"), "--ranks", "four")
    assert code == 2 and "--ranks 'four': a count or comma-separated ranks" in err


def test_a_chrome_trace_folder_reads_the_same_way(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    trace = tmp_path / "arm" / "stamp_stage_0" / "trace_rank0.json"
    trace.parent.mkdir(parents=True)
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 0,
         "dur": 50, "args": {"Input Dims": [[4], [2, 8]]}}]}))
    code, out, _ = _main(capsys, str(tmp_path / "arm"), "--ranks", "1")
    assert code == 0 and "rank 0 (chrome trace): 1 operator calls over 0.1 ms" in out
    assert "aten::addmm [host operator] in [[4],[2,8]]" in out
    shutil.rmtree(tmp_path / "arm")
