"""The bring-up's rows judged in-process from recorded state: for every row a case that confirms
and cases that do not, each asserted by its status and by the value it names (the stand-in host
runs of tests/unit/test_bringup.py show the same end to end)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ref2va_accept.arms import Outcome
from ref2va_accept.bringup import QUESTIONS, step_schedule
from ref2va_accept.bringup._judge import Judging, policy_row
from ref2va_accept.bringup._probes import ffprobe_duration, h3_duration
from ref2va_accept.bringup._readings import (
    bad_audio_row,
    cache_rows,
    dump_owner_row,
    dump_time_row,
    long_rows,
    mindiesd_row,
)
from ref2va_accept.bringup._records import Bound, ServerBounds, StopRecord
from ref2va_accept.bringup._state import PolicyRun
from ref2va_accept.bringup._step_schedule import CacheSteps
from ref2va_accept.campaign import load_campaign
from ref2va_accept.engines import Release
from ref2va_accept.evidence import BringupRow
from tests.unit.suite_runner import ROOT
from tests.unit.timed_samples import timed_sample

pytestmark = pytest.mark.fast

CAMPAIGN_910C = ROOT / "fixtures/campaigns/910c.yaml"
UPSTREAM_400 = ('{"error": {"message": "reference audio 0 duration must be in [2, 15] seconds, '
                'got 1.000", "type": "BadRequestError", "code": 400}}')
BOUND = ServerBounds(wave=Bound.read("3720", "the server's environment"),
                     sync=Bound.read("3720", "the server's environment"))
STEPS = CacheSteps.of(warmup_steps=4, track_steps=8)


def _outcome(*, ok: bool = True, latency: float | None = 12.0, sha: str = "aa",
             failure: str | None = None, detail: str | None = None) -> Outcome:
    sample = timed_sample("s1", "b0", "5s", "bringup", 0, 42, ok=ok, failure=failure,
                          detail=detail, status=200 if ok else None, latency_s=latency,
                          sha256=sha if ok else None)
    return Outcome(sample, {"video": {}} if ok else None, ())


def _path(backend: str = "cache_dit", reused: list[int] | None = None, **more: Any
          ) -> dict[str, Any]:
    return {"cache": {"backend": backend, "reused_steps": reused or []}, **more}


def _by_id(rows: list[BringupRow]) -> dict[str, BringupRow]:
    return {r.id: r for r in rows}


# --- Cache-DiT: AVG, reset, lossless --------------------------------------------------------------

def test_cached_steps_confirm_avg_and_reset_and_the_lossless_request_none() -> None:
    runs = {"first": _outcome(), "second": _outcome(), "lossless": _outcome(sha="bb")}
    paths = {"first": _path(reused=[5, 7]), "second": _path(reused=[5, 7]),
             "lossless": _path("none")}
    rows = _by_id(cache_rows(runs, paths, "", STEPS))
    assert rows["cache_dit_avg"].status == "confirmed"
    assert rows["cache_dit_avg"].seen == (
        "the request succeeded with 2 cached step(s) [5, 7]; the Cache-DiT requests run the "
        "track's 8 steps past the cache's 4-step warm-up")
    assert rows["cache_dit_reset"].status == "confirmed"
    assert rows["cache_dit_reset"].seen == ("the same 2 cached step(s) [5, 7] and the same bytes "
                                            "in both requests")
    assert rows["lossless_no_cache"].status == "confirmed"
    assert rows["lossless_no_cache"].seen == ("enabled_path.json: cache backend none, no cached "
                                              "step (the plain request: cache_dit, 2 cached)")


def test_a_request_that_cached_no_step_leaves_avg_and_reset_open() -> None:
    runs = {"first": _outcome(), "second": _outcome(), "lossless": _outcome()}
    paths = {"first": _path(), "second": _path(), "lossless": _path("none")}
    raised = CacheSteps.of(warmup_steps=4, track_steps=4)
    rows = _by_id(cache_rows(runs, paths, "", raised))
    assert rows["cache_dit_avg"].status == "not_checked"
    assert rows["cache_dit_avg"].seen.startswith(
        "no step was cached (the Cache-DiT requests run 8 steps, raised from the track's 4, past "
        "the cache's 4-step warm-up)")
    assert rows["cache_dit_reset"].status == "not_checked"
    assert rows["cache_dit_reset"].seen.startswith("neither request cached a step")


@pytest.mark.parametrize(("detail", "log", "named"), [
    ("HTTP 500: HCCL all_reduce: ReduceOp.AVG is not supported", "", "ReduceOp.AVG"),
    ("HTTP 500: EI0005: HcclAllReduce failed, RedOpType=AVG unsupported", "", "RedOpType=AVG"),
    ("HTTP 500: Video generation failed", "E hccl.cc:12 reduce(op=AVG) not implemented\n",
     "reduce(op=AVG) not implemented"),
])
def test_an_avg_refusal_is_named_however_the_backend_words_it(detail: str, log: str,
                                                              named: str) -> None:
    first = _outcome(ok=False, failure="http_status", detail=detail)
    rows = _by_id(cache_rows({"first": first}, {}, log, STEPS))
    assert rows["cache_dit_avg"].status == "contradicted"
    assert rows["cache_dit_avg"].seen.startswith("refused: ") and named in \
        rows["cache_dit_avg"].seen


def test_a_failure_naming_no_avg_leaves_the_avg_row_open() -> None:
    first = _outcome(ok=False, failure="http_status", detail="HTTP 500: AVERAGE pool failed")
    rows = _by_id(cache_rows({"first": first}, {}, "INFO AVGPOOL ready\n", STEPS))
    assert rows["cache_dit_avg"].status == "not_checked"
    assert rows["cache_dit_avg"].seen == (
        "the first Cache-DiT request failed, naming no AVG reduce op (the averaging all_reduce "
        "was not seen): request failed (http_status): HTTP 500: AVERAGE pool failed")
    assert rows["cache_dit_reset"].status == "not_checked"


def test_different_cached_steps_and_a_cache_under_lossless_contradict() -> None:
    runs = {"first": _outcome(), "second": _outcome(sha="cc"), "lossless": _outcome()}
    paths = {"first": _path(reused=[5]), "second": _path(reused=[5, 7]),
             "lossless": _path("cache_dit", [5])}
    rows = _by_id(cache_rows(runs, paths, "", STEPS))
    assert rows["cache_dit_reset"].status == "contradicted"
    assert rows["cache_dit_reset"].seen == "cached steps [5] then [5, 7]; bytes differ"
    assert rows["lossless_no_cache"].status == "contradicted"
    assert rows["lossless_no_cache"].seen == "cache backend cache_dit, cached steps [5]"
    # a server that ran no cache for the plain request either never showed the switch
    paths = {"first": _path("none"), "second": _path("none"), "lossless": _path("none")}
    rows = _by_id(cache_rows(runs, paths, "", STEPS))
    assert rows["cache_dit_avg"].status == "contradicted"
    assert rows["lossless_no_cache"].status == "not_checked"
    assert "the plain request did not run Cache-DiT either (backend none)" in \
        rows["lossless_no_cache"].seen


# --- the too-short reference audio ---------------------------------------------------------------

@pytest.mark.parametrize(("status", "detail", "failure", "expected", "seen"), [
    (400, UPSTREAM_400, "http_status", "confirmed",
     "HTTP 400: reference audio 0 duration must be in [2, 15] seconds, got 1.000"),
    (400, '{"error": {"message": "audio too short: 1 s"}}', "http_status", "contradicted",
     "HTTP 400, but not in H3's words (\"reference audio 0 duration must be in [2, 15] seconds, "
     "got ...\"): audio too short: 1 s"),
    (400, '{"detail": "reference audio 0 duration must be in [2, 15] seconds, got 3.000"}',
     "http_status", "contradicted", "HTTP 400: reference audio 0 duration must be in [2, 15] "
     "seconds, got 3.000: the server read 3.000 s of a 1.000 s audio"),
    (500, '{"error": {"message": "[Errno 2] No such file or directory: \'ffprobe\'"}}',
     "http_status", "contradicted", "HTTP 500: [Errno 2] No such file or directory: 'ffprobe' "
     "(ffprobe is missing or fails where the server runs: H3 runs it with check=True on every "
     "reference audio)"),
    (200, "", None, "contradicted", "HTTP 200: the server accepted a 1.000 s reference audio"),
    (None, "no complete response within 900 s", "timeout", "not_checked",
     "no answer to the 1 s reference audio (timeout): no complete response within 900 s"),
])
def test_the_bad_audio_row_holds_status_and_wording_to_h3s(
        status: int | None, detail: str, failure: str | None, expected: str, seen: str) -> None:
    row = bad_audio_row(status, detail, failure)
    assert (row.status, row.seen) == (expected, seen)


# --- the dumps ------------------------------------------------------------------------------------

def _run(enabled_path: dict[str, Any] | None, folders: int = 1, *, tp: int | None = 4,
         released: bool = True, served: bool = True) -> PolicyRun:
    path = None if enabled_path is None else {"text_encoder_tp_size": tp, **enabled_path}
    release = Release(released, 2.0, {} if released else {3: 30000.0}, (), None)
    return PolicyRun("b0.yaml", started=True, start_s=60.0,
                     request=_outcome() if served else _outcome(ok=False, failure="http_status",
                                                                detail="HTTP 500: boom"),
                     enabled_path=path, dump_folders=folders, release=release, tp_expected=4)


@pytest.mark.parametrize(("path", "folders", "status", "seen"), [
    ({"rank": 0}, 1, "confirmed", "one dump folder, rank 0"),
    ({}, 1, "not_checked", "one dump folder, but its enabled_path.json names no rank: the writer "
     "was not seen"),
    ({"rank": 1}, 1, "contradicted", "one dump folder, written by rank 1"),
    ({"rank": 0}, 2, "contradicted", "2 dump folder(s), rank 0"),
    (None, 1, "contradicted", "no enabled_path.json in the request's dump folder"),
])
def test_the_dump_owner_is_confirmed_only_by_one_folder_from_rank_0(
        path: dict[str, Any] | None, folders: int, status: str, seen: str) -> None:
    row = dump_owner_row(_run(path, folders))
    assert (row.status, row.seen) == (status, seen)


def test_dump_time_reads_only_a_completed_15s_request() -> None:
    run = _run({"rank": 0, "dump_seconds": 2.5})
    long = _outcome(latency=1820.0)
    row = dump_time_row(run, long, {"dump_seconds": 40.0}, BOUND, True, 2.9)
    assert row.status == "confirmed"
    assert row.seen == ("the 15 s request with its points 1820.0 s (its own dump 40.0 s inside "
                        "it) against the 3720 s server bound (VLLM_OMNI_DLO_DP_WAVE_TIMEOUT=3720, "
                        "from the server's environment); 5 s points: 2.5 s")
    # no dump of its own: the 5 s one scaled by frames goes on top of its latency
    row = dump_time_row(run, _outcome(latency=3700.0), {}, BOUND, True, 10.0)
    assert row.status == "contradicted"
    assert row.seen.startswith("the 15 s request with its points 3725.0 s (3700.0 s plus 25.0 s "
                               "of points scaled by frames")
    # the 15 s request timed out: nothing is estimated in its place
    timed_out = _outcome(ok=False, latency=None, failure="timeout",
                         detail="no complete response within 3660 s (response phase)")
    row = dump_time_row(run, timed_out, None, BOUND, True, 2.9)
    assert row.status == "not_checked"
    assert row.seen.startswith("the 15 s request did not complete (request failed (timeout)")
    assert "1702" not in row.seen and "1820" not in row.seen and "against" not in row.seen
    assert dump_time_row(_run({"rank": 0}), long, {}, BOUND, True, 2.9).seen == \
        "enabled_path.json has no dump_seconds"


# --- the 15 s request against the client timeout and the server bound ----------------------------

def test_wave_timeout_and_first_15s_bound_compare_the_latency_with_both_bounds() -> None:
    rows = _by_id(long_rows(_outcome(latency=1702.9), 3660.0, BOUND, True))
    assert rows["wave_timeout"].status == "confirmed"
    assert rows["wave_timeout"].seen == (
        "1702.9 s, inside the client timeout 3660 s and the 3720 s server bound "
        "(VLLM_OMNI_DLO_DP_WAVE_TIMEOUT=3720, from the server's environment)")
    assert rows["first_15s_bound"].status == "confirmed"
    assert rows["first_15s_bound"].seen.startswith("1702.9 s is 46% of the 3720 s server bound")
    rows = _by_id(long_rows(_outcome(latency=3100.0), 3660.0, BOUND, True))
    assert (rows["wave_timeout"].status, rows["first_15s_bound"].status) == (
        "confirmed", "contradicted")
    assert rows["first_15s_bound"].seen.startswith("3100.0 s is 83% of the 3720 s server bound")


def test_a_15s_request_that_timed_out_or_failed_is_not_a_confirmation() -> None:
    timed_out = _outcome(ok=False, latency=None, failure="timeout",
                         detail="no complete response within 1 s (response phase)")
    rows = _by_id(long_rows(timed_out, 1.0, BOUND, True))
    assert rows["wave_timeout"].status == "contradicted"
    assert rows["wave_timeout"].seen.startswith("no answer within the client timeout 1 s (the "
                                                "3720 s server bound")
    assert rows["first_15s_bound"].status == "not_checked"
    assert rows["first_15s_bound"].seen.startswith("the client gave up at 1 s, 0% of the 3720 s")
    cut = _outcome(ok=False, latency=3719.0, failure="http_status", detail="HTTP 504: timeout")
    rows = _by_id(long_rows(cut, 3660.0, BOUND, True))
    assert {r.status for r in rows.values()} == {"contradicted"}
    assert rows["wave_timeout"].seen.startswith("failed after 3719.0 s, at the 3720 s server bound")
    early = _outcome(ok=False, latency=30.0, failure="http_status", detail="HTTP 500: boom")
    rows = _by_id(long_rows(early, 3660.0, BOUND, True))
    assert {r.status for r in rows.values()} == {"not_checked"}
    assert rows["wave_timeout"].seen.startswith("the 15 s request failed after 30.0 s, before the "
                                                "client timeout 3660 s")


def _judging() -> Judging:
    campaign = load_campaign(CAMPAIGN_910C)
    return Judging(campaign, None, step_schedule(campaign))  # type: ignore[arg-type]


def test_the_server_bound_is_read_where_the_server_sees_it(tmp_path: Path) -> None:
    judging = _judging()
    # the campaign's environment: 3720 s
    assert judging.server_bounds(None).line() == (
        "the 3720 s server bound (VLLM_OMNI_DLO_DP_WAVE_TIMEOUT=3720, from the campaign's "
        "environment)")
    # the profile's env wins over the campaign's, as the launch composes them
    profile = tmp_path / "b0-short.yaml"
    data = yaml.safe_load((ROOT / "engine/profiles/vllm-omni/b0.yaml").read_text())
    data["env"]["VLLM_OMNI_VIDEO_SYNC_TIMEOUT"] = "1500"
    profile.write_text(yaml.safe_dump(data))
    run = PolicyRun("b0-short.yaml", profile)
    assert judging.server_bounds(run).line() == (
        "the 1500 s server bound (VLLM_OMNI_VIDEO_SYNC_TIMEOUT=1500, from the profile's env)")
    # the server's own environment, once read, is what it saw; unset there: upstream's 600 s
    run.server_env = {"VLLM_OMNI_DLO_DP_WAVE_TIMEOUT": "3720"}
    assert judging.server_bounds(run).line() == (
        "the 600 s server bound (VLLM_OMNI_VIDEO_SYNC_TIMEOUT unset: upstream's default)")
    # a value the server cannot read: neither row is confirmed
    run.server_env = {"VLLM_OMNI_DLO_DP_WAVE_TIMEOUT": "1h"}
    bounds = judging.server_bounds(run)
    rows = _by_id(long_rows(_outcome(latency=10.0), 3660.0, bounds, True))
    assert {r.status for r in rows.values()} == {"not_checked"}
    assert rows["first_15s_bound"].seen == (
        "no server bound read: VLLM_OMNI_DLO_DP_WAVE_TIMEOUT=1h, from the server's environment "
        "is not a number of seconds")
    assert dump_time_row(_run({"rank": 0, "dump_seconds": 1.0}), _outcome(), {}, bounds, True,
                         1.0).status == "not_checked"


def test_no_question_writes_a_campaign_value_into_its_text() -> None:
    first = next(q for q in QUESTIONS if q.id == "first_15s_bound")
    assert "3,720" not in first.question and "3720" not in first.question
    assert "80%" in first.question


# --- the memory policy and the text encoder's TP size ---------------------------------------------

def test_the_memory_policy_row_needs_the_profiles_tp_size_from_the_server() -> None:
    served = _run({"rank": 0})
    row = policy_row([served], served)
    assert row.status == "confirmed"
    assert row.seen == "b0.yaml: started in 60.0 s, served, text-encoder tp 4"
    other = _run({"rank": 0}, tp=2)
    row = policy_row([other], other)
    assert row.status == "contradicted"
    assert row.seen == ("b0.yaml: started in 60.0 s, served, text-encoder tp 2; the profile's "
                        "text-encoder tp is 4")
    unread = _run({"rank": 0}, tp=None)
    row = policy_row([unread], unread)
    assert row.status == "not_checked"
    assert row.seen.endswith("the server reported no text-encoder tp size (enabled_path.json has "
                             "no text_encoder_tp_size), the profile's is 4")


def test_a_held_device_contradicts_the_memory_policy_and_names_the_tp_size() -> None:
    held = _run({"rank": 0}, released=False)
    refused = PolicyRun("b0-legacy-dlo.yaml", start_error="exited 1")
    row = policy_row([held, refused], None)
    assert row.status == "contradicted"
    assert row.seen == ("b0.yaml: started in 60.0 s, served, text-encoder tp 4, memory held "
                        "after its stop: 3: 30000 MB; b0-legacy-dlo.yaml: did not start "
                        "(exited 1)")


# --- MindIE-SD and ffprobe, as upstream behaves ---------------------------------------------------

def test_the_mindiesd_row_says_when_flash_attn_would_fail() -> None:
    assert mindiesd_row("importable").status == "confirmed"
    absent = mindiesd_row("import mindiesd failed: ModuleNotFoundError: No module named "
                          "'mindiesd'")
    assert absent.status == "contradicted"
    assert absent.seen.startswith("MindIE-SD is not installed where the server runs: a server "
                                  "pinned to FLASH_ATTN starts and fails at the first attention "
                                  "call")
    broken = mindiesd_row("import mindiesd failed: ImportError: libascend_hal.so")
    assert broken.status == "contradicted"
    assert broken.seen.startswith("MindIE-SD is installed but does not import: a server pinned "
                                  "to FLASH_ATTN stops at start-up, during backend selection")


def test_the_audio_duration_is_read_as_h3_reads_it() -> None:
    stream = h3_duration('{"streams": [{"codec_type": "audio", "duration": "3.000000"}], '
                         '"format": {"duration": "3.021000"}}')
    assert (stream.seconds, stream.read_from) == (3.0, "stream")
    fallback = h3_duration('{"streams": [{"codec_type": "audio", "duration": "N/A"}], '
                           '"format": {"duration": "3.021000"}}')
    assert (fallback.seconds, fallback.read_from) == (3.021, "format")
    none = h3_duration('{"streams": [{"codec_type": "video"}], "format": {}}')
    assert none.seconds is None and "no audio stream" in none.problem


def test_no_ffprobe_on_the_servers_path_is_named(tmp_path: Path) -> None:
    read = ffprobe_duration(ROOT / "fixtures/inputs/reference.wav", {"PATH": str(tmp_path)})
    assert read.seconds is None
    assert read.problem.startswith("ffprobe not found on the server's PATH (H3 runs it with "
                                   "check=True")


def test_the_imports_stay_open_when_the_preflight_did_not_read_them() -> None:
    judging = _judging()
    judging.preflight_error = "a tool the pin needs is missing: ffprobe"
    judging.judge_imports(None, [])
    row = judging.rows["backend_imports"]
    assert (row.status, row.seen) == ("not_checked", "the identity preflight did not read the "
                                      "imports: a tool the pin needs is missing: ffprobe")


# --- the judgements and the page, from what the steps recorded -----------------------------------

def _stop(instance: str, *, sigkill: bool = False, alive_after: int = 0,
          held_mb: float = 0.0) -> StopRecord:
    """One stop as Steps.stop records it: the audit's and the release's own records."""
    from ref2va_accept.engines import Release
    from ref2va_accept.evidence import Cleanup, Poll, ProcessRecord, StopStep

    killed = [ProcessRecord(pid=7, name="vllm", status="zombie")] if sigkill else []
    problems = ["needed SIGKILL for 1 process"] if sigkill else []
    audit = Cleanup(arm="b0", instance=instance, pid=42, exit_code=0, processes_seen=3,
                    needed_sigkill=killed, survivors=[], port_free=True, stop_s=4.0,
                    lifetime_s=90.0, clean=not problems, problems=problems,
                    steps=[StopStep(action="SIGTERM main", at_s=0.0, waited_s=2.04,
                                    alive_after=alive_after)])
    release = Release(not held_mb, 120.0 if held_mb else 3.5, {3: held_mb} if held_mb else {},
                      (Poll(at_s=1.0, readable=True, used_mb={"3": 100.0 + held_mb},
                            problem=None),),
                      "still held" if held_mb else None)
    return StopRecord.model_validate({"audit": audit.json_dict(),
                                      "release": release.record().json_dict()})


def _stopped(stops: list[StopRecord]) -> Judging:
    judging = Judging(load_campaign(CAMPAIGN_910C), None, None)  # type: ignore[arg-type]
    judging.stops = stops
    judging.judge_stops([])
    return judging


@pytest.mark.fast
def test_clean_stops_and_releases_confirm_the_stop_order_and_the_memory_release() -> None:
    judging = _stopped([_stop("a"), _stop("b")])
    assert judging.rows["stop_order"].status == "confirmed"
    assert judging.rows["stop_order"].seen == ("2 stop(s) clean; the main process exited 2.0 s "
                                               "after SIGTERM at worst")
    assert judging.rows["memory_release"].status == "confirmed"
    assert judging.rows["memory_release"].seen.startswith("back to idle within 3.5 s at worst")
    assert judging.patch_inputs.release_worst_s == 3.5


@pytest.mark.fast
def test_a_stop_that_needed_sigkill_or_left_memory_held_contradicts_its_rows() -> None:
    judging = _stopped([_stop("a", sigkill=True, held_mb=30000.0), _stop("b", alive_after=2)])
    seen = judging.rows["stop_order"].seen
    assert judging.rows["stop_order"].status == "contradicted"
    assert seen == ("a: needed SIGKILL for 1 process; b: 2 process(es) alive after SIGTERM to "
                    "the main process; HBM held after a stop: {'3': 30000.0}")
    assert judging.rows["memory_release"].status == "contradicted"
    assert judging.rows["memory_release"].seen == ("after 120 s still {'3': 30000.0} MB over "
                                                   "idle (still held)")
    assert judging.patch_inputs.release_worst_s == 120.0
    assert _stopped([]).rows["stop_order"].status == "not_checked"


@pytest.mark.fast
def test_the_page_shows_each_memory_policy_as_recorded() -> None:
    from ref2va_accept.arms import Outcome
    from ref2va_accept.bringup._page import _policies_table
    from ref2va_accept.bringup._state import PolicyRun

    stop = _stop("a")
    served = PolicyRun("b0.yaml", started=True, start_s=61.25, hbm_loaded_mb={"3": 2048.0},
                       request=Outcome(timed_sample("s1", "b0", "5s", "bringup", 0, 42, ok=True,
                                                    latency_s=12.34), {"video": {}}, ()),
                       stop=stop.audit)
    refused = PolicyRun("legacy.yaml", start_error="exited 1", hbm_problem="probe unreadable")
    table = _policies_table([served.record(), refused.record()])
    assert ("<tr><td>b0.yaml</td><td>61.2 s</td><td>{&#x27;3&#x27;: 2048.0}</td>"
            "<td>12.3 s, complete</td><td>SIGTERM main +2.0 s (0 alive)</td><td>-</td></tr>"
            ) in table
    assert ("<tr><td>legacy.yaml</td><td>did not start: exited 1</td><td>probe unreadable</td>"
            "<td>not sent</td><td>-</td><td>-</td></tr>") in table
    assert _policies_table([]) == "<p>No B0 memory-policy profile was started.</p>"


def test_the_server_reports_its_text_encoder_tp_size() -> None:
    """What tp_and_memory_policy reads: the vLLM-Omni extension's enabled_path.json takes it from
    the diffusion config's parallel config; the reference engine reports what it was launched
    with (the stand-in `vllm` passes the launch's --text-encoder-tp-size on)."""
    from types import SimpleNamespace

    from engine.reference.__main__ import _with_text_encoder_tp
    from engine.reference.profile import load_profile
    from engine.vllm_omni.enabled_path import text_encoder_tp_size

    config = SimpleNamespace(parallel_config=SimpleNamespace(text_encoder_tp_size=4))
    assert text_encoder_tp_size(config) == 4
    assert text_encoder_tp_size(SimpleNamespace()) is None
    profile = load_profile(ROOT / "engine/profiles/reference/b0.yaml")
    assert profile.args.text_encoder_tp_size is None
    assert _with_text_encoder_tp(profile, 4).args.text_encoder_tp_size == 4
    with pytest.raises(ValueError, match="at least 1, got 0"):
        _with_text_encoder_tp(profile, 0)


def test_the_start_time_is_held_to_the_campaigns_estimate() -> None:
    from ref2va_accept.bringup._judge import start_row

    near = start_row([560.0, 640.0, 610.0], 600.0)
    assert (near.status, near.seen) == ("confirmed", "median start 610.0 s against the "
                                        "estimate 600 s (2% off)")
    far = start_row([61.0, 59.0], 600.0)
    assert (far.status, far.seen) == ("contradicted", "median start 60.0 s against the "
                                      "estimate 600 s (90% off)")
    assert start_row([61.0], None).status == "measured"
    assert start_row([], 600.0).seen == "no engine started"


def test_points_as_frozen_confirm_their_shapes_and_dtypes(tmp_path: Path) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    from tests.unit.standin_host import bringup_campaign

    path = bringup_campaign(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["tracks"]["5s-lossless"]["comparison_points"] = [
        {"name": "latent.video", "source": "diagnostics", "dtype": "F32", "shape": "<A>"},
        {"name": "cond.text", "source": "diagnostics", "dtype": "F32", "shape": "<B>"}]
    # one line per point, as the campaign writes them (fill-points reads such lines)
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=200)
    path.write_text(text.replace("<A>", "[2, 3]").replace("<B>", "[1, 4]"))
    dump = tmp_path / "dump"
    dump.mkdir()
    save_file({"latent.video": np.zeros((2, 3), np.float32)}, dump / "latent.video.safetensors")
    save_file({"cond.text": np.zeros((1, 4), np.float32)}, dump / "cond.text.safetensors")
    campaign = load_campaign(path)
    judging = Judging(campaign, None, step_schedule(campaign))  # type: ignore[arg-type]
    run = PolicyRun("b0.yaml", request=Outcome(_outcome().sample, {"video": {}}, (), None, dump))
    judging.judge_points("5s-lossless", run)
    shapes, dtypes = judging.rows["point_shapes"], judging.rows["point_dtypes"]
    assert (shapes.status, shapes.seen) == ("confirmed", "2 point(s) as frozen")
    assert (dtypes.status, dtypes.seen) == ("confirmed", "2 point(s) as the campaign says")
    save_file({"cond.text": np.zeros((1, 5), np.float32)}, dump / "cond.text.safetensors")
    judging.judge_points("5s-lossless", run)
    shapes = judging.rows["point_shapes"]
    assert (shapes.status, shapes.seen) == ("contradicted", "5s-lossless cond.text: campaign "
                                            "[1, 4], host [1, 5]")
