"""The run's evidence size, estimated before any engine starts, against the free disk: the
formulas (disk.py), and a session refused (status stopped, nothing started) or let through."""

from __future__ import annotations

import math
import shutil
from collections import namedtuple
from pathlib import Path

import pytest

from ref2va_accept.campaign import load_campaign
from ref2va_accept.planning import ScenarioItem, plan_campaign, plan_run
from ref2va_accept.planning import _disk as disk
from tests.unit.evidence_schema import read_bundle
from tests.unit.plugin_sessions import MARKS, run_plugin
from tests.unit.suite_runner import ROOT

pytest_plugins = ["pytester"]

REFERENCE = ROOT / "fixtures/campaigns/reference.yaml"
HOST = ROOT / "fixtures/campaigns/910c.yaml"
Usage = namedtuple("Usage", "total used free")


def _items(track: str, candidates: tuple[str, ...] = ()) -> list[ScenarioItem]:
    items = [ScenarioItem(f"b[{track}]", "test_lossless.py", "test_baseline_reproduces_itself",
                          track, None)]
    items += [ScenarioItem(f"c[{track}-{c}]", "test_lossless.py", "test_candidate_is_bit_exact",
                           track, c) for c in candidates]
    return items


@pytest.mark.fast
def test_an_unfilled_15s_host_dump_is_bounded_from_the_track_shape() -> None:
    plan = plan_campaign(load_campaign(HOST))["15s-lossless"]
    per_dump, bounded = disk.dump_bytes(plan)
    decoded = 362 * 768 * 1344 * 3 * 4  # frames x H x W x RGB x float32
    assert decoded == 4_483_842_048  # the README's "about 4.5 GB per 15 s request"
    assert "decoded.video" in bounded and "mp4.video" not in bounded
    # decoded.video, four latent/DiT video points at a sixteenth of it, audio and cond points.
    assert per_dump >= decoded + 4 * decoded // disk.LATENT_FRACTION
    assert per_dump < 2 * decoded
    # Every MP4 of the track: 0.5 bytes per pixel, 320 kb/s of audio, the container.
    assert disk.mp4_bytes(plan) == math.ceil(362 * 1344 * 768 * 0.5 + 15 * 40_000 + 65_536)


@pytest.mark.fast
def test_filled_shapes_are_summed_exactly() -> None:
    campaign = load_campaign(REFERENCE)
    plan = plan_campaign(campaign)["5s-lossless"]
    per_dump, bounded = disk.dump_bytes(plan)
    assert bounded == ()
    expected = sum(math.prod(p.shape) * disk.DTYPE_BYTES[p.dtype]  # type: ignore[arg-type]
                   for p in plan.lossless.points if p.source == "diagnostics")
    assert per_dump == expected
    # The reference engine's MP4 measured 0.275 bytes per pixel (334 kB at 5 s, 112x64): the
    # formula stays above what it writes.
    assert disk.mp4_bytes(plan) > 334_162
    assert disk.dump_bytes(plan_campaign(campaign)["5s-lossy"]) == (0, ())


@pytest.mark.fast
def test_the_estimate_follows_the_run_plan() -> None:
    plans = plan_campaign(load_campaign(HOST))
    one = disk.estimate(plan_run(_items("15s-lossless"), plans), plans)
    two = disk.estimate(plan_run(_items("15s-lossless", ("cache-dit-lossless-guard",)), plans),
                        plans)
    (need,) = one.tracks
    assert (need.requests, need.dump_requests) == (3, 2)  # B0: 3 requests, 2 of them dumping
    assert (two.tracks[0].requests, two.tracks[0].dump_requests) == (5, 3)
    per_dump, _ = disk.dump_bytes(plans["15s-lossless"])
    # ... and the candidate's localization pass, should it not be bit-exact: four requests, each
    # an MP4 and the contract's largest point.
    track = plans["15s-lossless"]
    passes = disk.pass_bytes(track)
    assert one.tracks[0].localize_bytes == 0 and two.tracks[0].localize_bytes == passes
    assert two.estimate_bytes - one.estimate_bytes == (
        per_dump + 2 * disk.mp4_bytes(track) + 2 * disk.RECORD_PER_REQUEST + passes)
    assert one.need_bytes == math.ceil(one.estimate_bytes * disk.MARGIN)


# -- in a session ---------------------------------------------------------------------------------
SCENARIO = '''
import pytest

pytestmark = pytest.mark.quality


def test_baseline_reproduces_itself(track_id, evidence):
    evidence.note("baseline ran")
'''


@pytest.fixture
def session(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(MARKS)
    pytester.makepyfile(test_lossless=SCENARIO)
    return pytester


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, free: int,
         *args: str) -> tuple[pytest.RunResult, Path]:
    real = shutil.disk_usage
    seen: list[str] = []

    def usage(path: str | Path) -> Usage:
        seen.append(str(path))
        total = real(path).total
        return Usage(total, total - free, free)

    monkeypatch.setattr(disk.shutil, "disk_usage", usage)
    evidence = pytester.path / "evidence"
    result = run_plugin(pytester, "--campaign", str(REFERENCE), "-m", "5s and lossless",
                        "--evidence-dir", str(evidence), *args)
    assert seen == [str(evidence)]  # the evidence folder, before any engine
    return result, (evidence / "latest").resolve()


def test_too_little_disk_stops_the_run_before_any_engine_naming_path_need_and_free(
        session: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result, run = _run(session, monkeypatch, 1_000_000)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.assert_outcomes()  # the scenario never ran
    lines = [line for line in result.errlines if "disk check" in line]
    assert len(lines) == 1, result.errlines
    line = lines[0]
    assert line.startswith(f"ERROR: ref2va: disk check: {session.path / 'evidence'} needs about ")
    assert "but its filesystem has 1 MB free" in line and "--ref2va-skip-disk-check" in line
    bundle = read_bundle(run)
    assert bundle["status"] == "stopped" and bundle["instances"] == []
    assert bundle["notes"] and "disk check" in bundle["notes"][0]
    assert str(session.path) not in bundle["notes"][0]  # sanitized in the evidence
    section = bundle["disk"]
    assert (section["fits"], section["skipped"], section["free_bytes"]) == (False, False, 1_000_000)
    (track,) = section["tracks"]
    assert (track["track"], track["requests"], track["dump_requests"]) == ("5s-lossless", 3, 2)
    assert disk.fmt_bytes(section["need_bytes"]) in line
    assert {v["track"] for v in bundle["verdicts"]} == {"5s-lossless"}
    assert all(v["verdict"] == "inconclusive" for v in bundle["verdicts"])
    assert "disk check" in (run / "report.html").read_text()


def test_enough_disk_lets_the_run_go_on_and_records_the_estimate(
        session: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result, run = _run(session, monkeypatch, 10**12)
    result.assert_outcomes(passed=1)
    bundle = read_bundle(run)
    assert bundle["status"] == "complete" and bundle["notes"] == ["baseline ran"]
    assert bundle["disk"]["fits"] and not bundle["disk"]["skipped"]


def test_the_override_runs_anyway_and_says_so_in_the_evidence(
        session: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result, run = _run(session, monkeypatch, 1_000_000, "--ref2va-skip-disk-check")
    result.assert_outcomes(passed=1)
    assert any(line.startswith("ref2va: disk check skipped") for line in result.outlines)
    bundle = read_bundle(run)
    assert bundle["status"] == "complete"
    assert bundle["disk"]["skipped"] and not bundle["disk"]["fits"]
    assert bundle["notes"][0].startswith("ref2va: disk check skipped (--ref2va-skip-disk-check)")
    assert bundle["notes"][1:] == ["baseline ran"]


@pytest.mark.fast
def test_free_space_is_read_where_the_evidence_will_go(tmp_path: Path) -> None:
    probed, free = disk.free_bytes(tmp_path / "not" / "yet")
    assert probed == tmp_path and free == shutil.disk_usage(tmp_path).free
