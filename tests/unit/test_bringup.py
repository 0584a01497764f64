"""`ref2va-accept bringup`: every host guess and upstream risk answered by a row, on the stand-in
host (tests/unit/standin_host.py) that CI can run, with cases that must confirm and cases that
must not (the rows themselves, in-process: test_bringup_readings.py); its schedule and price; how
it ends when it does not finish; the patch's text edits."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ref2va_accept.bringup import QUESTION_IDS, BringupResult, price, step_schedule
from ref2va_accept.bringup._patch import PatchError, set_scalar
from ref2va_accept.bringup._records import BringupData
from ref2va_accept.bringup._rows import complete, confirmed, contradicted
from ref2va_accept.bringup._step_schedule import CacheSteps
from ref2va_accept.campaign import load_campaign
from ref2va_accept.cli import main
from tests.unit.evidence_schema import schema_errors
from tests.unit.standin_host import STANDIN_GATED, bringup_campaign, host
from tests.unit.suite_runner import ROOT, pytest_command, sigterm_when, tagged

CAMPAIGN_910C = ROOT / "fixtures/campaigns/910c.yaml"


# --- the patch's text edits -----------------------------------------------------------------------

TEXT = """protocol:
  # a comment line
  expected_start_s: {5s: 600, "15s": 600}
  expected_request_s:
    "5s": 292.148     # the preflight median
    "15s": 1702.939
devices:
  memory_release:
    timeout_s: 120                   # upstream's e2e tests
"""


@pytest.mark.fast
def test_set_scalar_edits_block_and_flow_mappings_and_keeps_comments() -> None:
    text = set_scalar(TEXT, ("protocol", "expected_start_s", "15s"), 712)
    text = set_scalar(text, ("protocol", "expected_request_s", "5s"), 301.5)
    text = set_scalar(text, ("devices", "memory_release", "timeout_s"), 240)
    data = yaml.safe_load(text)
    assert data["protocol"]["expected_start_s"] == {"5s": 600, "15s": 712}
    assert data["protocol"]["expected_request_s"] == {"5s": 301.5, "15s": 1702.939}
    assert data["devices"]["memory_release"]["timeout_s"] == 240
    assert "# the preflight median" in text and "# upstream's e2e tests" in text
    assert "# a comment line" in text


@pytest.mark.fast
@pytest.mark.parametrize("keys", [("protocol", "nope"), ("devices", "memory_release", "poll_s"),
                                  ("nothing",)])
def test_set_scalar_refuses_a_key_it_cannot_find(keys: tuple[str, ...]) -> None:
    with pytest.raises(PatchError, match="not found"):
        set_scalar(TEXT, keys, 1)


# --- schedule and price ---------------------------------------------------------------------------

@pytest.mark.fast
def test_the_910c_bringup_is_scheduled_and_priced_before_it_runs() -> None:
    campaign = load_campaign(CAMPAIGN_910C)
    plan = step_schedule(campaign)
    assert [p.name for p in plan.profiles] == ["b0.yaml", "b0-legacy-dlo.yaml"]
    assert plan.cache_dit == "cache-dit"  # not the lossless guard: that one asks for no cache
    assert (plan.track_5s, plan.track_15s) == ("5s-lossless", "15s-lossless")
    # 3 servers and 2 x 2 pairs for the warm-up demonstration (5 s and 15 s)
    assert (plan.starts, plan.requests_5s, plan.requests_15s, plan.capture_requests) == (
        11, 5, 1, 2)
    assert [(d.track, d.pairs, d.warmup_steps) for d in plan.warmup_demonstration] == [
        ("5s-lossless", 2, 4), ("15s-lossless", 2, 4)]
    assert [(s.track, s.output_of, len(s.dimensions), s.same_shape) for s in plan.scoring] == [
        ("5s-lossy", "5s-lossless", 9, True), ("15s-lossy", "15s-lossless", 9, True)]
    cost = price(campaign, plan)
    five, fifteen, stop = 292.148, 1702.939, 60 + 120  # a stop at its bound: grace + memory
    # 3 starts at 600 s and their stops; 5 x 5 s + 1 x 15 s requests and 2 capture requests at
    # a plain request's price (the overhead unpriced); per duration class 4 starts and stops,
    # and per pair up to 3 full warm-ups and a measured request, 3 at 4 of 50 steps and one.
    demo = sum(4 * (600 + stop) + 2 * ((3 + 1) + (3 * 4 / 50 + 1)) * r for r in (five, fifteen))
    scoring = 2277.8 + 6657.4
    assert cost.warmup_demonstration_s == pytest.approx(demo)
    assert cost.scoring_s == pytest.approx(scoring, abs=0.5)
    assert cost.wall_s is not None  # every start and request is priced
    assert cost.wall_s == pytest.approx(3 * (600 + stop) + 7 * five + fifteen + demo + scoring,
                                        abs=0.5)
    # Scoring on the CPU holds no device; the rest holds all four.
    assert cost.logical_device_h == pytest.approx((cost.wall_s - cost.scoring_s) * 4 / 3600)
    assert cost.unpriced == () and cost.at_least
    line = cost.line(plan)
    assert "worst case" not in line and ": at least " in line
    assert "(the capture overhead unpriced: its requests at a plain request's price)" in line
    # Without the demonstration it costs what the demonstration did less.
    short = step_schedule(campaign, demonstrate=False)
    assert short.warmup_demonstration == () and short.starts == 3
    assert price(campaign, short).wall_s == pytest.approx(cost.wall_s - demo)


@pytest.mark.fast
def test_plan_and_a_dry_run_print_the_bringup_cost(capsys: pytest.CaptureFixture[str]) -> None:
    main(["plan", str(CAMPAIGN_910C)])
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("bring-up (once per host"))
    assert "11 starts, 5 x 5 s + 1 x 15 s requests, 2 capture requests, the warm-up " \
        "demonstration (5s, 15s), scoring B0's 5s, 15s outputs: at least" in line
    assert main(["bringup", str(CAMPAIGN_910C), "--dry-run", "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["starts"] == 11 and said["cost"]["at_least"] is True
    assert [d["track"] for d in said["warmup_demonstration"]] == ["5s-lossless", "15s-lossless"]
    assert [s["track"] for s in said["scoring"]] == ["5s-lossy", "15s-lossy"]
    # As text: every step in order, the scoring step and the warm-up demonstration among them.
    assert main(["bringup", str(CAMPAIGN_910C), "--dry-run"]) == 0
    steps = capsys.readouterr().out.splitlines()
    assert steps[0].endswith("the bring-up starts and sends, in order:")
    assert ("  the warm-up demonstration on 5s-lossless: 2 pairs of fresh B0 instances, one "
            "warmed up in full and one with 4-step warm-ups (2-3 each), then one measured "
            "request each") in steps
    assert ("  scoring: B0's 5s output on the 9 gated dimension(s) of 5s-lossy, on cpu, once "
            "per model") in steps
    assert steps[-1].startswith("bring-up (once per host")
    assert main(["bringup", str(CAMPAIGN_910C), "--dry-run", "--no-warmup-demonstration"]) == 0
    assert "warm-up demonstration" not in capsys.readouterr().out


@pytest.mark.fast
def test_every_question_gets_a_row_and_an_unanswered_one_stays_open() -> None:
    rows = complete({"flags": confirmed("flags", "all there")}, "an earlier step failed")
    assert [r.id for r in rows] == list(QUESTION_IDS) and len(rows) == 26
    assert {r.status for r in rows if r.id != "flags"} == {"not_checked"}
    with pytest.raises(ValueError, match="unknown"):
        complete({"made_up": confirmed("flags", "x")}, "why")


@pytest.mark.fast
def test_the_cache_dit_requests_get_enough_steps_to_cache_and_say_so(tmp_path: Path) -> None:
    assert step_schedule(load_campaign(CAMPAIGN_910C)).cache_dit_steps == CacheSteps.of(4, 50)
    campaign = load_campaign(bringup_campaign(tmp_path, steps=4))
    plan = step_schedule(campaign)
    assert plan.cache_dit_steps == CacheSteps.of(warmup_steps=4, track_steps=4)
    assert plan.json_dict()["cache_dit_steps"] == {
        "warmup_steps": 4, "track_steps": 4, "requested_steps": 8, "raised": True}
    assert price(campaign, plan).line(plan).endswith(
        "; the Cache-DiT requests run 8 steps, raised from the track's 4, past the cache's "
        "4-step warm-up")


@pytest.mark.fast
def test_the_exit_code_says_how_the_bringup_ended() -> None:
    clean = complete({"flags": confirmed("flags", "all there")}, "why")
    bad = complete({"flags": contradicted("flags", "--x missing")}, "why")
    assert BringupResult(Path("b"), clean, BringupData()).exit_code == 0
    assert BringupResult(Path("b"), bad, BringupData()).exit_code == 1
    early = BringupResult(Path("b"), bad, BringupData(),
                          failure="stopped early during the Cache-DiT server")
    assert early.exit_code == 3 and not early.finished
    signalled = BringupResult(Path("b"), clean, BringupData(),
                              failure="interrupted by SIGTERM during x",
                              signalled=int(signal.SIGTERM))
    assert signalled.exit_code == 143


def test_a_bringup_that_stops_early_exits_3_and_its_page_says_where(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("npu-smi printed nothing")

    monkeypatch.setattr("ref2va_accept.bringup._steps.preflight", broken)
    campaign = bringup_campaign(tmp_path)
    code = main(["bringup", str(campaign), "--evidence-dir", str(tmp_path / "ev"), "--run-id",
                 "bringup-early"])
    where = ("stopped early during the identity preflight: RuntimeError: npu-smi printed "
             "nothing")
    assert code == 3
    assert f"did not finish: {where} (exit 3; bringup-early/bringup.html says where)" in \
        capsys.readouterr().err
    folder = tmp_path / "ev" / "bringup-early"
    found = json.loads((folder / "bringup.json").read_text())
    assert (found["finished"], found["exit_code"], found["failure"]) == (False, 3, where)
    # What it did not reach (the preflight and every step after it) is left out of the file.
    assert sorted(found) == ["campaign", "cost", "counts", "elapsed_s", "exit_code", "failure",
                             "finished", "patch", "plan", "policies", "questions", "rows",
                             "run_id", "schedule"]
    rows = _rows(found)
    assert {r["status"] for r in rows.values()} == {"not_checked"}
    assert rows["flags"]["seen"] == f"not reached: the bring-up did not finish ({where})"
    assert f"The bring-up did not finish:</b> {where}" in (folder / "bringup.html").read_text()
    evidence = json.loads((folder / "evidence.json").read_text())
    assert evidence["status"] == "stopped" and evidence["bringup"]["failure"] == where


# --- on the stand-in host -------------------------------------------------------------------------

def _judge_env(env: dict[str, str]) -> dict[str, str]:
    """The stand-in host's environment with the checkout importable, as a host's shell has it.
    (Its pytest sessions run in processes of their own: the stand-in host is PATH and
    PYTHONPATH, which an interpreter reads as it starts.)"""
    return env | {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}:{env['PYTHONPATH']}"}


def _command(campaign: Path, evidence: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "ref2va_accept.cli", "bringup", str(campaign),
            "--evidence-dir", str(evidence), "--run-id", "bringup-test", *more]


def _bringup(tmp_path: Path, campaign: Path, env: dict[str, str], *more: str
             ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], Path]:
    evidence = tmp_path / "evidence"
    done = subprocess.run(
        _command(campaign, evidence, *more),
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=_judge_env(env), check=False)
    folder = evidence / "bringup-test"
    assert (folder / "bringup.json").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    return done, json.loads((folder / "bringup.json").read_text()), folder


def _rows(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in found["rows"]}


FreshHost = tuple[subprocess.CompletedProcess[str], Path, Path, dict[str, str]]


@pytest.fixture(scope="module")
def fresh_host(tmp_path_factory: pytest.TempPathFactory) -> FreshHost:
    """The bring-up of a fresh stand-in host, run once for this module as an operator runs it
    first: `pytest -m bringup` (the same run_bringup as `ref2va-accept bringup`, whose exit codes
    and lines the other hosts' tests below check): the session, the campaign and the run's
    folder, and the host's environment. The stand-in host and its campaign live in the folder
    the fixture made."""
    folder = tmp_path_factory.mktemp("fresh-host")
    env = host(folder)
    campaign = bringup_campaign(folder)
    done = subprocess.run(
        pytest_command("tests/bringup", "-m", "bringup", "-p", "no:randomly", "-q", "-rfs",
                       "--campaign", str(campaign), "--evidence-dir", str(folder / "ev")),
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False, env=_judge_env(env))
    runs = sorted((folder / "ev").glob("bringup-*"))
    assert len(runs) == 1 and (runs[0] / "bringup.json").is_file(), done.stdout[-3000:]
    return done, campaign, runs[0], env


def test_a_fresh_host_confirms_the_guesses_and_the_patch_fills_what_it_measured(
        fresh_host: FreshHost, tmp_path: Path) -> None:
    _, shipped, folder, _ = fresh_host
    run_id = folder.name
    found = json.loads((folder / "bringup.json").read_text())
    # The patch is applied to a copy of the campaign's folder (the fixture's stays as it ran).
    shutil.copytree(shipped.parent, tmp_path / "campaign")
    campaign = tmp_path / "campaign" / shipped.name
    rows = _rows(found)
    assert list(rows) == list(QUESTION_IDS)
    by_status = {s: sorted(i for i, r in rows.items() if r["status"] == s)
                 for s in ("confirmed", "measured", "contradicted", "not_checked")}
    # The campaign's start estimate (600 s) is a guess the stand-in contradicts; the shapes were
    # placeholders and a fresh host prices no stop, capture or scoring (measured); a terminal
    # needs a person.
    assert by_status["contradicted"] == ["start_time"], by_status
    assert "600 s" in rows["start_time"]["seen"]
    assert by_status["measured"] == ["capture_overhead", "point_shapes", "scoring_price",
                                     "stop_time"]
    assert by_status["not_checked"] == ["live_line"]
    # Every stop is priced, per server; the capture requests at both levels; B0's 5 s output
    # scored on the lossy track's two gated dimensions; 4-step warm-ups in both classes.
    assert rows["stop_time"]["seen"].startswith("slowest stop ")
    for server in ("B0 engine/profiles/vllm-omni/b0.yaml", "Cache-DiT (cache-dit)",
                   "warm-up demonstration 5s", "warm-up demonstration 15s"):
        assert f"{server}: " in rows["stop_time"]["seen"]
    assert re.fullmatch(r"level1: [\d.]+x a plain request; level2: [\d.]+x a plain request",
                        rows["capture_overhead"]["seen"])
    assert re.fullmatch(r"5s \(5s-lossy, cpu\): [\d.]+ s per output over 2 dimension\(s\)",
                        rows["scoring_price"]["seen"])
    assert rows["warmup_steps"]["seen"].startswith("5s: the request after 4-step warm-ups took ")
    assert rows["warmup_steps"]["seen"].endswith("(median of 2 each; within 0.9: yes) (in the "
                                                 "patch)")
    # Each confirmation names the event it saw (the reference engine's Cache-DiT profile warms
    # up one step and caches every one after it).
    assert rows["identity_lines"]["seen"] == "13 field(s) read on the host"
    assert rows["cache_dit_avg"]["seen"] == (
        "the request succeeded with 7 cached step(s) [1, 2, 3, 4, 5, 6, 7]; the Cache-DiT "
        "requests run the track's 8 steps past the cache's 4-step warm-up")
    assert rows["cache_dit_reset"]["seen"] == ("the same 7 cached step(s) [1, 2, 3, 4, 5, 6, 7] "
                                               "and the same bytes in both requests")
    assert rows["lossless_no_cache"]["seen"] == (
        "enabled_path.json: cache backend none, no cached step (the plain request: cache_dit, "
        "7 cached)")
    assert rows["bad_audio_400"]["seen"] == ("HTTP 400: reference audio 0 duration must be in "
                                             "[2, 15] seconds, got 1.000")
    assert rows["ffprobe_duration"]["seen"] == ("ffprobe on the server's PATH reads "
                                                "reference.wav: 3.000 s (the stream's)")
    assert rows["dump_owner"]["seen"] == "one dump folder, rank 0"
    bound = ("the 3720 s server bound (VLLM_OMNI_DLO_DP_WAVE_TIMEOUT=3720, from the server's "
             "environment)")
    assert rows["dump_time"]["seen"].startswith("the 15 s request with its points ")
    assert f"inside it) against {bound}; 5 s points: " in rows["dump_time"]["seen"]
    assert rows["wave_timeout"]["seen"].endswith(f"s, inside the client timeout 3660 s and "
                                                 f"{bound}")
    assert f"% of {bound} (clear up to 80%)" in rows["first_15s_bound"]["seen"]
    assert rows["tp_and_memory_policy"]["seen"].count("served, text-encoder tp 4") == 2
    policies = found["policies"]
    assert [p["profile"] for p in policies] == ["engine/profiles/vllm-omni/b0.yaml",
                                                "engine/profiles/vllm-omni/b0-legacy-dlo.yaml"]
    assert all(p["release"]["released"] and p["stop"]["clean"] for p in policies)
    # The page and the patch; the patch applies and the patched campaign loads with the values.
    page = (folder / "bringup.html").read_text()
    assert "start_time" in page and "contradicted" in page and "bringup.patch" in page
    for text in (page, (folder / "bringup.json").read_text(), (folder / "bringup.patch")
                 .read_text()):
        assert str(shipped.parent) not in text and str(ROOT) not in text
    subprocess.run(["patch", "-p1", "-s", "-i", str(folder / "bringup.patch")],
                   cwd=campaign.parent, check=True)
    patched = load_campaign(campaign).model
    start = patched.protocol.expected_start_s or {}
    assert start["5s"] < 600 and start["15s"] == start["5s"]
    points = {p.name: p for p in patched.tracks["5s-lossless"].comparison_points}
    assert points["decoded.video"].shape == [124, 64, 112, 3]
    assert points["mp4.audio"].shape[0] == 2
    long_points = {p.name: p for p in patched.tracks["15s-lossless"].comparison_points}
    assert long_points["decoded.video"].shape == [362, 64, 112, 3]
    # Every price `plan` uses is measured and recorded so: `plan` prints no estimate.
    protocol = patched.protocol
    assert set(protocol.expected_stop_s or {}) == {"5s", "15s"}
    assert set(protocol.capture_overhead or {}) == {"level1", "level2"}
    assert protocol.warmup_steps == 4 and protocol.warmup_demonstration is not None
    assert set((patched.scoring.seconds_per_output or {})["5s"]) == set(STANDIN_GATED)
    assert set(patched.measured or {}) == {
        f"protocol.{f}.{d}" for f in ("expected_start_s", "expected_request_s",
                                      "expected_stop_s") for d in ("5s", "15s")} | {
        "protocol.capture_overhead.level1", "protocol.capture_overhead.level2",
        "protocol.warmup_demonstration", "scoring.seconds_per_output.5s"}
    assert set((patched.measured or {}).values()) == {run_id}
    planned = subprocess.run(
        [sys.executable, "-m", "ref2va_accept.cli", "plan", str(campaign), "--file",
         str(tmp_path / "ledger.jsonl")], capture_output=True, text=True, timeout=120, cwd=ROOT,
        check=False)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    shown = planned.stdout
    assert shown.count(f"measured by {run_id}") == 5, shown
    for word in ("estimate", "unpriced", "bound", "at least", "not priced", "not estimated"):
        assert word not in shown, (word, shown)
    assert "bring-up (once per host" in shown and "logical-device-h worst case" in shown
    assert tagged(run_id) == []
    evidence = json.loads((folder / "evidence.json").read_text())
    assert schema_errors(evidence) == [] and evidence["status"] == "complete"
    assert [r["id"] for r in evidence["bringup"]["rows"]] == list(QUESTION_IDS)


def test_a_host_that_differs_is_named_row_by_row(tmp_path: Path) -> None:
    env = host(tmp_path, broken=("mindiesd",)) | {
        "FAKE_NPU_HOLD": "1", "FAKE_VLLM_DROP_FLAG": "--cache-config", "FAKE_AVG_REFUSED": "1",
        "FAKE_B0_NONDETERMINISTIC": "1", "FAKE_PYTHONPATH_REPLACED": "1",
        "FAKE_FFPROBE_SCALE": "0.5"}
    done, found, folder = _bringup(tmp_path, bringup_campaign(tmp_path, wrong_shape=True,
                                                       wrong_dtype=True), env,
                                   "--no-warmup-demonstration")
    rows = _rows(found)
    # Left out when asked: open, naming the one command that measures it.
    assert rows["warmup_steps"]["status"] == "not_checked"
    assert rows["warmup_steps"]["detail"] == ("pytest -m warmup_demonstration --warmup-steps 4 "
                                              "--campaign 910c.yaml")
    # The stops held memory to the timeout: their price is what they took (3 s each at least).
    assert float(rows["stop_time"]["seen"].split()[2]) >= 3
    contradicted = {i for i, r in rows.items() if r["status"] == "contradicted"}
    assert {"mindiesd", "backend_imports", "flags", "cache_dit_avg", "point_shapes",
            "point_dtypes", "memory_release", "stop_order", "hccl_determinism",
            "pythonpath_kept", "ffprobe_duration"} <= contradicted, rows
    assert "cond.text: campaign BF16, host F32" in rows["point_dtypes"]["seen"]
    assert "lost 1 of the inherited entries" in rows["pythonpath_kept"]["seen"]
    assert "ffprobe reads 1.500 s (the stream's), outside 2-15 s" in \
        rows["ffprobe_duration"]["seen"]
    assert "B0 and the Cache-DiT server's quality=lossless request" in \
        rows["hccl_determinism"]["seen"]
    assert "libascend_hal.so" in rows["mindiesd"]["seen"]
    assert "--cache-config (cache-dit-lossless-guard.yaml, cache-dit.yaml)" in rows["flags"]["seen"]
    assert "ReduceOp.AVG" in rows["cache_dit_avg"]["seen"]
    assert "latent.video: campaign [1, 2, 3], host [37, 4, 7, 16]" in rows["point_shapes"]["seen"]
    assert "'3': 30000" in rows["memory_release"]["seen"] or "30000" in \
        rows["memory_release"]["seen"]
    # Under the held device the memory policy is contradicted, and the TP size was still read.
    policy = rows["tp_and_memory_policy"]
    assert policy["status"] == "contradicted"
    assert policy["seen"].count("served, text-encoder tp 4") == 2, policy
    assert policy["seen"].count("memory held after its stop: 3: 30000 MB") == 2, policy
    # What depends on the refused server stays open instead of passing.
    assert rows["cache_dit_reset"]["status"] == "not_checked"
    # The command exits 1 on a contradicted row and names each, and its page, in its output.
    assert done.returncode == 1
    assert "CONTRADICTED mindiesd" in done.stdout and "bringup.html" in done.stdout
    patch = (folder / "bringup.patch").read_text()
    assert "diffusion-attention-backend: TORCH_SDPA" in patch and "b0.yaml" in patch


def test_the_bringup_mark_reports_each_row_as_a_test(
        fresh_host: FreshHost) -> None:
    done, campaign, _, env = fresh_host
    out = done.stdout
    assert done.returncode == 1, out[-3000:]
    # start_time is contradicted on the stand-in (600 s estimated), live_line open, the rest pass
    # and so does test_bringup_finished.
    assert "1 failed, 25 passed, 1 skipped" in out, out[-3000:]
    assert "FAILED tests/bringup/test_bringup_rows.py::test_row[start_time]" in out
    assert "not checked: needs a person at the host's terminal" in out
    unasked = subprocess.run(pytest_command("tests/bringup", "-q", "--campaign", str(campaign)),
                             capture_output=True, text=True,
                             timeout=120, cwd=ROOT, check=False, env=_judge_env(env))
    assert "27 deselected" in unasked.stdout  # never run unless -m names it


def test_a_host_that_leaves_rows_open_never_confirms_them(tmp_path: Path) -> None:
    """A Cache-DiT server that caches no step, a 15 s request the client gives up on and a
    server that reports another text-encoder TP size: those rows stay open or are contradicted,
    each naming what it saw."""
    env = host(tmp_path) | {"FAKE_CACHE_WARMUP": "100", "FAKE_TEXT_ENCODER_TP": "2"}
    campaign = bringup_campaign(tmp_path, steps=4, timeout_15s=0.05)
    done, found, folder = _bringup(tmp_path, campaign, env, "--policy",
                                   str(ROOT / "engine/profiles/vllm-omni/b0.yaml"),
                                   "--no-warmup-demonstration")
    rows = _rows(found)
    status = {i: r["status"] for i, r in rows.items()}
    # The track's 4 steps do not pass the profile's 4-step warm-up: the bring-up asked for 8.
    assert found["schedule"]["cache_dit_steps"]["requested_steps"] == 8
    evidence = json.loads((folder / "evidence.json").read_text())
    steps = {s["kind"]: s["request"]["fields"]["num_inference_steps"]
             for s in evidence["samples"] if s["kind"].startswith("bringup-")}
    assert (steps["bringup-first"], steps["bringup-second"], steps["bringup-lossless"]) == (
        "8", "8", "4")
    asked = ("the Cache-DiT requests run 8 steps, raised from the track's 4, past the cache's "
             "4-step warm-up")
    assert status["cache_dit_avg"] == "not_checked"
    assert rows["cache_dit_avg"]["seen"].startswith(f"no step was cached ({asked})")
    assert status["cache_dit_reset"] == "not_checked"
    assert rows["cache_dit_reset"]["seen"] == (f"neither request cached a step ({asked}): there "
                                               "was nothing to reset")
    assert status["lossless_no_cache"] == "confirmed"  # the plain request did run Cache-DiT
    assert status["dump_time"] == "not_checked"
    assert rows["dump_time"]["seen"].startswith("the 15 s request did not complete (request "
                                                "failed (timeout): no complete response within "
                                                "0.05 s")
    assert "1702" not in rows["dump_time"]["seen"]  # no estimate in its place
    assert status["wave_timeout"] == "contradicted"
    assert rows["wave_timeout"]["seen"].startswith(
        "no answer within the client timeout 0.05 s (the 3720 s server bound")
    assert status["first_15s_bound"] == "not_checked"
    assert rows["first_15s_bound"]["seen"].startswith("the client gave up at 0.05 s, 0% of the "
                                                      "3720 s server bound")
    assert status["tp_and_memory_policy"] == "contradicted"
    assert "served, text-encoder tp 2, HBM over idle " in rows["tp_and_memory_policy"]["seen"]
    assert rows["tp_and_memory_policy"]["seen"].endswith("; the profile's text-encoder tp is 4")
    # Scoring needs no complete 15 s output here: B0's 5 s one is scored, and only it.
    assert status["scoring_price"] == "measured"
    assert rows["scoring_price"]["seen"].startswith("5s (5s-lossy, cpu): ")
    assert done.returncode == 1 and found["finished"] is True


def test_sigterm_mid_bringup_stops_its_engine_writes_the_page_and_exits_143(
        tmp_path: Path) -> None:
    """On a host without ffprobe (a hard requirement where the server runs): its rows are
    answered first, then SIGTERM arrives while B0 serves a request."""
    env = host(tmp_path, tools=("npu-smi", "ffmpeg"))
    campaign = bringup_campaign(tmp_path)
    launches, logs = tmp_path / "vllm.log", tmp_path / "evidence" / "bringup-test" / "logs"

    def serving() -> list[dict[str, Any]]:
        lines = launches.read_text().splitlines() if launches.exists() else []
        return [json.loads(line) for line in lines if '"--omni", "--help=all"' not in line]

    def generating() -> bool:  # a request in flight on a B0 server
        return any("generation video_sync-" in log.read_text(errors="replace")
                   for log in (logs.glob("*.b0.*.log") if logs.is_dir() else ()))

    process = subprocess.Popen(_command(campaign, tmp_path / "evidence"), cwd=ROOT,
                               env=_judge_env(env), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    code = sigterm_when(process, generating, wait_s=120)
    assert process.stderr is not None
    err = process.stderr.read()
    process.stderr.close()
    assert serving(), f"no engine was launched: {err[-3000:]}"
    assert code == 143, err[-3000:]
    folder = tmp_path / "evidence" / "bringup-test"
    found = json.loads((folder / "bringup.json").read_text())
    where = found["failure"]
    assert where.startswith("interrupted by SIGTERM during B0 with engine/profiles/vllm-omni/"), \
        where
    assert f"did not finish: {where} (exit 143;" in err
    assert (found["finished"], found["exit_code"]) == (False, 143)
    rows = _rows(found)
    assert rows["ffprobe_duration"]["status"] == "contradicted"
    assert rows["ffprobe_duration"]["seen"].startswith(
        "reference.wav: ffprobe not found on the server's PATH (H3 runs it with check=True")
    assert rows["identity_lines"]["status"] == "contradicted"
    assert rows["tp_and_memory_policy"] == rows["tp_and_memory_policy"] | {
        "status": "not_checked", "seen": f"not reached: the bring-up did not finish ({where})"}
    assert f"The bring-up did not finish:</b> {where}" in (folder / "bringup.html").read_text()
    # The engine was stopped in upstream's order, and nothing of it is left.
    evidence = json.loads((folder / "evidence.json").read_text())
    assert evidence["status"] == "interrupted"
    audits = [i["cleanup"] for i in evidence["instances"] if i.get("cleanup")]
    assert audits and all(a["steps"][0]["action"] == "SIGTERM main" for a in audits), audits
    for launch in serving():
        with pytest.raises(ProcessLookupError):
            os.killpg(launch["pgid"], 0)
    assert tagged("bringup-test") == []


def test_the_bringup_mark_fails_when_the_bringup_did_not_finish(tmp_path: Path) -> None:
    env = host(tmp_path)
    done = subprocess.run(
        pytest_command("tests/bringup", "-m", "bringup", "-p", "no:randomly", "-p",
                       "tests.unit.bringup_stops_early", "-q", "-rf", "--campaign",
                       str(bringup_campaign(tmp_path)), "--evidence-dir", str(tmp_path / "ev")),
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False, env=_judge_env(env))
    out = done.stdout
    assert done.returncode == 1, out[-3000:]
    # Every row it did not reach fails instead of being skipped, and so does the bring-up.
    assert "27 failed" in out and "skipped" not in out, out[-3000:]
    assert "FAILED tests/bringup/test_bringup_rows.py::test_bringup_finished" in out
    assert ("AssertionError: the bring-up did not finish: stopped early during the identity "
            "preflight: RuntimeError: the stand-in preflight raised (exit 3;") in out, out[-3000:]
    assert ("Failed: not checked, and the bring-up did not finish: not reached: the bring-up did "
            "not finish (stopped early during the identity preflight") in out
