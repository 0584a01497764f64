"""A torch_npu folder not analysed yet is analysed in a child process where torch_npu imports
(``torch_npu.profiler.profiler.analyse``), then read; an analysis that fails leaves the rank
open with torch_npu's last line. A stand-in torch_npu plays the host's (it writes what the
analysis writes, from the fixtures script)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ref2va_accept.profiles import read_profiles
from tests.npu_fixtures import SCRIPTS, text

STANDIN = '''
import os, shutil, sys, tempfile
from pathlib import Path
sys.path.insert(0, {scripts!r})
import npu_profile_fixtures as text

def analyse(profiler_path, max_process_number=1):
    folder = Path(profiler_path)
    if os.environ.get("STANDIN_ANALYSE_FAILS"):
        raise RuntimeError("msprof: the PROF_ data is incomplete")
    rank = int(next(folder.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1])
    with tempfile.TemporaryDirectory() as scratch:
        written = text.write_rank(Path(scratch), rank, text.Variant())
        shutil.copytree(written / "ASCEND_PROFILER_OUTPUT", folder / "ASCEND_PROFILER_OUTPUT")
'''


@pytest.fixture
def standin_torch_npu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "site" / "torch_npu" / "profiler"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "profiler.py").write_text(STANDIN.format(scripts=str(SCRIPTS)))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    return tmp_path / "site"


def test_a_raw_folder_is_analysed_then_read(tmp_path: Path, standin_torch_npu: Path) -> None:
    variant = dataclasses.replace(text.Variant(ranks=(0, 1)), raw_ranks=(1,))
    folder = text.write_arm(tmp_path / "arm", variant)
    read = read_profiles(folder, tmp_path, [0, 1])
    assert [(c.rank, c.status) for c in read.coverage] == [(0, "profiled"), (1, "profiled")]
    assert read.complete and read.ranks[1].top_operators[0].name == "FlashAttentionScore"
    # The analysis's wall time is recorded for the rank it ran on (a price to plan by).
    assert read.coverage[0].analysis_s is None
    assert read.coverage[1].analysis_s is not None and read.coverage[1].analysis_s > 0


def test_an_operator_can_leave_the_analysis_out(tmp_path: Path, standin_torch_npu: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REF2VA_NO_PROFILE_ANALYSIS", "1")
    variant = dataclasses.replace(text.Variant(ranks=(0,)), raw_ranks=(0,))
    (coverage,) = read_profiles(text.write_arm(tmp_path / "arm", variant), tmp_path,
                                [0]).coverage
    assert (coverage.status, coverage.note) == (
        "not_analysed", "not analysed (REF2VA_NO_PROFILE_ANALYSIS is set)")


def test_an_analysis_that_fails_leaves_the_rank_open(tmp_path: Path, standin_torch_npu: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STANDIN_ANALYSE_FAILS", "1")
    variant = dataclasses.replace(text.Variant(ranks=(0,)), raw_ranks=(0,))
    folder = text.write_arm(tmp_path / "arm", variant)
    (coverage,) = read_profiles(folder, tmp_path, [0]).coverage
    assert coverage.status == "not_analysed"
    assert str(coverage.note).startswith("torch_npu's analysis of worker_0_")
    assert "failed (exit 1): RuntimeError: msprof: the PROF_ data is incomplete" in str(
        coverage.note)
