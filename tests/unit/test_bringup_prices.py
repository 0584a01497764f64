"""The bring-up's prices judged in-process from recorded state (the stand-in host run of
tests/unit/test_bringup.py shows them end to end): stops, the capture overhead, the warm-up
demonstration and scoring, each confirmed, measured, contradicted or left open naming the command
that measures it; and the patch's edits, which record every price they set under `measured`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from ref2va_accept.arms import Outcome
from ref2va_accept.bringup import step_schedule
from ref2va_accept.bringup._judge import Judging
from ref2va_accept.bringup._patch import PatchError, ScalarEdit, build, set_value
from ref2va_accept.bringup._records import StopRecord
from ref2va_accept.bringup._scoring import STANDINS_FOLDER, measure, resolve
from ref2va_accept.bringup._state import PolicyRun
from ref2va_accept.campaign import LoadedCampaign, load_campaign
from ref2va_accept.core import Check, CheckStatus, Reason
from ref2va_accept.evidence import AnyCheck
from ref2va_accept.quality._weight_names import VBENCH_LAYOUT
from tests.unit.check_records import make_check
from tests.unit.standin_host import bringup_campaign
from tests.unit.suite_runner import ROOT
from tests.unit.timed_samples import timed_sample

pytestmark = pytest.mark.fast

CAMPAIGN_910C = ROOT / "fixtures/campaigns/910c.yaml"


def _judging(path: Path = CAMPAIGN_910C, **schedule_args: Any) -> Judging:
    campaign = load_campaign(path)
    return Judging(campaign, SimpleNamespace(run_id="bringup-t"),
                   step_schedule(campaign, **schedule_args))


def _outcome(latency: float | None = 10.0, ok: bool = True) -> Outcome:
    sample = timed_sample("s1", "b0", "5s-lossless", "bringup", 0, 42, ok=ok,
                          failure=None if ok else "timeout", detail=None if ok else "no answer",
                          status=200 if ok else None, latency_s=latency)
    return Outcome(sample, {"video": {}} if ok else None, ())


def _stop(what: str, stop_s: float, waited_s: float | None) -> StopRecord:
    audit = {"arm": "b0", "instance": what, "pid": 1, "exit_code": 0, "processes_seen": 1,
             "needed_sigkill": [], "survivors": [], "port_free": True, "stop_s": stop_s,
             "lifetime_s": 60.0, "clean": True, "problems": [],
             "steps": [{"action": "SIGTERM main", "at_s": 0.0, "waited_s": stop_s,
                        "alive_after": 0}]}
    release = None if waited_s is None else {"released": True, "waited_s": waited_s,
                                             "held_mb": {}, "problem": None, "polls": []}
    return StopRecord.model_validate({"audit": audit, "release": release, "what": what})


def _edits(judging: Judging) -> dict[str, ScalarEdit]:
    return {e.dotted: e for e in judging.price_edits()}


# --- stops ----------------------------------------------------------------------------------------

def test_the_slowest_stop_is_the_price_of_a_stop_and_an_estimate_is_held_to_it(
        tmp_path: Path) -> None:
    judging = _judging()
    judging.stops = [_stop("B0 b0.yaml", 4.0, 20.0), _stop("Cache-DiT", 3.0, 35.5)]
    row = judging._stop_row()
    # The campaign prices no stop: measured, SIGTERM to gone plus the memory wait.
    assert (row.status, row.seen) == ("measured", "slowest stop 38.5 s (SIGTERM to gone and "
                                      "device memory back to idle): B0 b0.yaml: 24.0 s; "
                                      "Cache-DiT: 38.5 s")
    edits = _edits(judging)
    assert edits["protocol.expected_stop_s.5s"].value == 39
    assert edits["protocol.expected_stop_s.15s"].measured_as == "protocol.expected_stop_s.15s"
    frozen = _judging(_with(tmp_path / "a", expected_stop_s={"5s": 40, "15s": 40}))
    frozen.stops = judging.stops
    assert frozen._stop_row().status == "confirmed"
    far = _judging(_with(tmp_path / "b", expected_stop_s={"5s": 5, "15s": 5}))
    far.stops = judging.stops
    assert far._stop_row().seen.startswith("slowest stop 38.5 s against the estimate 5 s (670% "
                                           "off)")
    assert far._stop_row().status == "contradicted"
    none = _judging()
    assert none._stop_row().status == "not_checked" and "protocol.expected_stop_s" not in {
        e.dotted.rsplit(".", 1)[0] for e in none.price_edits()}


def _with(folder: Path, **protocol: Any) -> Path:
    """The stand-in host's campaign (tests/unit/standin_host.py) with these protocol fields."""
    folder.mkdir()
    path = bringup_campaign(folder)
    data = yaml.safe_load(path.read_text())
    data["protocol"].update(protocol)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# --- the capture overhead -------------------------------------------------------------------------

def _captured(judging: Judging, level1: Outcome | None, level2: Outcome | None) -> None:
    judging.capture_server = PolicyRun("b0.yaml", started=True, request=_outcome(12.0),
                                       enabled_path={"dump_seconds": 2.0})
    for level, outcome in (("level1", level1), ("level2", level2)):
        if outcome is not None:
            judging.capture_runs[level] = outcome


def test_each_capture_level_is_priced_against_the_servers_plain_request() -> None:
    judging = _judging()
    _captured(judging, _outcome(11.0), _outcome(25.0))
    # The plain request: 12 s less its 2 s dump.
    assert judging.capture_factors() == pytest.approx({"level1": 1.1, "level2": 2.5})
    row = judging._capture_row()
    assert (row.status, row.seen) == ("measured", "level1: 1.100x a plain request; level2: "
                                      "2.500x a plain request")
    edits = _edits(judging)
    assert (edits["protocol.capture_overhead.level1"].value,
            edits["protocol.capture_overhead.level2"].value) == (1.1, 2.5)
    # A capture no slower than the plain request is priced at 1, and says so.
    faster = _judging()
    _captured(faster, _outcome(9.0), _outcome(10.0))
    edit = _edits(faster)["protocol.capture_overhead.level1"]
    assert edit.value == 1 and "0.900x a plain one (no slower: 1)" in edit.why


def test_a_capture_level_not_measured_leaves_the_row_open_and_out_of_the_patch() -> None:
    judging = _judging()
    _captured(judging, _outcome(11.0), None)
    judging.capture_problems["level2"] = ("level 1 captured no call of a DiT block: no block to "
                                          "look inside")
    row = judging._capture_row()
    assert row.status == "not_checked"
    assert row.seen == ("level1: 1.100x a plain request; level2: level 1 captured no call of a "
                        "DiT block: no block to look inside")
    assert row.detail.startswith("`ref2va-accept bringup` measures it")
    assert "protocol.capture_overhead.level2" not in _edits(judging)
    failed = _judging()
    _captured(failed, _outcome(ok=False), None)
    assert failed._capture_row().seen.startswith(
        "level1: the request did not complete: request failed (timeout): no answer")
    assert _judging()._capture_row().seen.endswith("level2: no B0 server served its 5 s request")


# --- the warm-up demonstration ------------------------------------------------------------------

def _demo(track: str, cheap: list[float], full: list[float], *, steady: bool = True,
          failed: bool = False) -> AnyCheck:
    if failed:
        return make_check(track, "b0", Check.WARMUP_DEMONSTRATION, CheckStatus.FAIL,
                          Reason.BASELINE_REQUEST_FAILED, "pair 1: a B0 request failed; "
                          "nothing shown")
    ratio = sorted(cheap)[len(cheap) // 2] / sorted(full)[len(full) // 2]
    detail = (f"the request after 4-step warm-ups took {ratio:.3f} of one after full warm-ups "
              f"(median of 2 each; within 0.05: {'yes' if steady else 'no'}); per_duration "
              "entry: ...")
    return make_check(track, "b0", Check.WARMUP_DEMONSTRATION,
                      CheckStatus.PASS if steady else CheckStatus.FAIL,
                      None if steady else Reason.WARMUP_NOT_STEADY, detail,
                      {"warmup_steps": 4, "full_s": full, "cheap_s": cheap, "ratio": ratio,
                       "limit": 0.05, "measured_at": "2026-12-06T00:00:00",
                       "per_duration_yaml": "..."})


def test_a_demonstration_that_holds_everywhere_is_patched_with_its_figures() -> None:
    judging = _judging()
    judging.demos = {"5s": _demo("5s-lossless", [300.0, 301.0], [299.0, 302.0]),
                     "15s": _demo("15s-lossless", [1700.0, 1702.0], [1703.0, 1701.0])}
    row = judging._warmup_row()
    assert row.status == "confirmed"
    assert row.seen.startswith("5s: the request after 4-step warm-ups took ")
    assert row.seen.endswith("(in the patch)")
    edits = _edits(judging)
    assert edits["protocol.warmup_steps"].value == 4
    block = edits["protocol.warmup_demonstration"]
    assert block.measured_as == "protocol.warmup_demonstration"
    assert block.value == {"warmup_steps": 4, "run_id": "bringup-t",
                           "measured_at": "2026-12-06T00:00:00",
                           "per_duration": {"5s": {"full_s": [299.0, 302.0],
                                                   "cheap_s": [300.0, 301.0]},
                                            "15s": {"full_s": [1703.0, 1701.0],
                                                    "cheap_s": [1700.0, 1702.0]}}}


def test_a_demonstration_that_does_not_hold_or_did_not_run_patches_nothing() -> None:
    judging = _judging()
    judging.demos = {"5s": _demo("5s-lossless", [330.0, 331.0], [299.0, 302.0], steady=False),
                     "15s": _demo("15s-lossless", [1700.0], [1703.0])}
    row = judging._warmup_row()
    assert row.status == "contradicted" and "(median of 2 each; within 0.05: no)" in row.seen
    assert "protocol.warmup_steps" not in _edits(judging)
    open_ = _judging()
    open_.demos = {"5s": _demo("5s-lossless", [300.0], [300.0]),
                   "15s": _demo("15s-lossless", [], [], failed=True)}
    row = open_._warmup_row()
    assert row.status == "not_checked"
    assert row.seen.startswith("15s: pair 1: a B0 request failed; nothing shown; 5s: ")
    assert row.detail == ("pytest -m warmup_demonstration --warmup-steps 4 --campaign "
                          "910c.yaml")
    assert "protocol.warmup_steps" not in _edits(open_)
    left_out = _judging(demonstrate=False)
    row = left_out._warmup_row()
    assert (row.status, row.seen) == ("not_checked", "the bring-up was asked to leave the "
                                      "warm-up demonstration out (--no-warmup-demonstration)")
    assert row.detail.startswith("pytest -m warmup_demonstration --warmup-steps 4")


# --- scoring --------------------------------------------------------------------------------------

class _Scores:
    """A scorer that records its calls and reports each gated dimension scored."""

    def __init__(self, took: dict[str, float], fail: str | None = None) -> None:
        self.took, self.fail, self.calls = took, fail, []  # type: ignore[var-annotated]
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def __call__(self, video: Path, **kw: Any) -> list[Any]:
        key = ",".join(sorted(kw.get("weights") or {})) or "base"
        self.calls.append((key, kw))
        self.now += self.took[key]
        ids = ["vbench.temporal_flickering", "proxy.subject_consistency.ssim",
               "vbench.subject_consistency", "vbench.i2v_subject",
               "vbench.background_consistency"]
        return [SimpleNamespace(scorer=i,
                                status="error" if i == self.fail else "ok", detail="boom")
                for i in ids]


def _standins(tmp_path: Path, names: list[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """The 910C campaign whose checkout (engine workdir) is `tmp_path`, with shipped stand-ins
    for `names`."""
    campaign = load_campaign(CAMPAIGN_910C)
    for name in names:
        path = tmp_path / STANDINS_FOLDER / VBENCH_LAYOUT[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"stand-in")
    monkeypatch.setattr(LoadedCampaign, "engine_workdir", lambda self: tmp_path)
    return campaign


def test_scoring_shares_each_pass_out_over_its_dimensions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    campaign = _standins(tmp_path, ["dino_vitb16"], monkeypatch)
    scorer = _Scores({"base": 4.0, "dino_vitb16": 10.0})
    gated = ["vbench.temporal_flickering", "vbench.subject_consistency", "vbench.i2v_subject"]
    found = measure(campaign, "5s", "5s-lossy", gated, tmp_path / "b0.mp4", None, "npu:0",
                    scorer, scorer.clock)
    # The base pass (4 s) to the dimension no model serves; DINO adds 6 s, split between the
    # two it serves: one scoring pass of the gate costs their sum, 10 s.
    assert found.seconds == pytest.approx({"vbench.temporal_flickering": 4.0,
                                           "vbench.subject_consistency": 3.0,
                                           "vbench.i2v_subject": 3.0})
    assert found.missing == {} and found.with_standins and found.models == 1
    (_, base), (_, dino) = scorer.calls
    assert base["weights"] == {} and base["device"] == "npu:0"
    assert dino["stand_ins"] == frozenset({"dino_vitb16"}) and dino["weight_pins"] == {}
    judging = _judging()
    judging.scoring_prices = [found]
    row = judging._scoring_row()
    assert row.status == "contradicted"  # the campaign's two-core CPU figures, far off
    assert row.seen.startswith("5s (5s-lossy, npu:0): 10.0 s per output over 3 dimension(s) "
                               "(with the shipped stand-in weights) against the campaign's "
                               "scoring prices")
    edits = _edits(judging)
    assert edits["scoring.seconds_per_output.5s.vbench.i2v_subject"].value == 3.0
    assert edits["scoring.seconds_per_output.5s.vbench.i2v_subject"].measured_as == \
        "scoring.seconds_per_output.5s"
    assert edits["scoring.measured_with"].value == "standins"


def test_a_dimension_without_weights_or_a_score_is_named_and_not_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    campaign = _standins(tmp_path, [], monkeypatch)  # placeholder pins, no stand-in shipped
    scorer = _Scores({"base": 4.0}, fail="proxy.subject_consistency.ssim")
    found = measure(campaign, "5s", "5s-lossy", ["vbench.temporal_flickering",
                                                  "proxy.subject_consistency.ssim",
                                                  "vbench.background_consistency"],
                    tmp_path / "b0.mp4", None, "cpu", scorer, scorer.clock)
    assert found.seconds == {"vbench.temporal_flickering": 2.0}
    assert found.missing["proxy.subject_consistency.ssim"] == "its score failed: boom"
    assert found.missing["vbench.background_consistency"] == (
        "clip_vitb32: not pinned with a file on this host, and no shipped stand-in "
        "(`ref2va-accept scorers standins fixtures/standins --names clip_vitb32` writes them; "
        "then run the bring-up again)")
    judging = _judging()
    judging.scoring_prices = [found]
    judging.scoring_missing["15s"] = "no complete B0 15s output"
    row = judging._scoring_row()
    assert row.status == "not_checked"
    assert "5s vbench.background_consistency: clip_vitb32: not pinned" in row.seen
    assert row.seen.endswith("15s: no complete B0 15s output")
    edits = _edits(judging)
    # What was measured is patched, but the duration class is not recorded as measured.
    assert edits["scoring.seconds_per_output.5s.vbench.temporal_flickering"].measured_as is None
    assert "scoring.measured_with" not in edits


def test_pinned_weights_are_used_where_the_campaign_has_them(tmp_path: Path) -> None:
    campaign = load_campaign(ROOT / "fixtures/campaigns/reference.yaml")
    weights = resolve(campaign, ["clip_vitb32"])
    if isinstance(weights, str):  # fixtures/standins not made in this checkout
        assert "ref2va-accept scorers standins fixtures/standins --names clip_vitb32" in weights
        return
    # The reference campaign pins its CLIP stand-in and declares it one.
    assert weights.pins == {"clip_vitb32": campaign.scorer_weight_pins()["clip_vitb32"]}
    assert weights.stand_ins == frozenset({"clip_vitb32"})


# --- the patch's text edits -----------------------------------------------------------------------

TEXT = """protocol:
  expected_start_s: {5s: 600, "15s": 600}   # an estimate
  expected_request_s:
    "5s": 292.148
  # the next block's comment
scoring: {device: cpu}  # where
budget: {max_wall_hours: 16}
"""


def test_set_value_inserts_what_is_missing_and_keeps_the_rest() -> None:
    text = set_value(TEXT, ("protocol", "expected_stop_s", "5s"), 30, "measured stop")
    text = set_value(text, ("protocol", "expected_start_s", "25s"), 7)
    text = set_value(text, ("protocol", "expected_request_s", "15s"), 1703.5)
    text = set_value(text, ("scoring", "seconds_per_output", "5s", "vbench.x"), 1.5)
    text = set_value(text, ("measured", "protocol.expected_stop_s.5s"), "bringup-t", "why")
    data = yaml.safe_load(text)
    assert data["protocol"] == {"expected_start_s": {"5s": 600, "15s": 600, "25s": 7},
                                "expected_request_s": {"5s": 292.148, "15s": 1703.5},
                                "expected_stop_s": {"5s": 30}}
    assert data["scoring"] == {"device": "cpu", "seconds_per_output": {"5s": {"vbench.x": 1.5}}}
    assert data["measured"] == {"protocol.expected_stop_s.5s": "bringup-t"}
    assert "# an estimate" in text and "scoring:  # where" in text
    assert "  # measured stop\n  expected_stop_s:\n    \"5s\": 30\n" in text
    assert text.index("expected_stop_s") < text.index("# the next block's comment")
    with pytest.raises(PatchError, match="holds a value"):
        set_value(TEXT, ("budget", "max_wall_hours", "x"), 1)


def test_the_patch_records_only_the_prices_it_could_set(tmp_path: Path) -> None:
    path = bringup_campaign(tmp_path)
    patch = build(path, dumps=[], run_id="bringup-t", edits=[
        ScalarEdit(("protocol", "expected_stop_s", "5s"), 31, "x", "protocol.expected_stop_s.5s"),
        ScalarEdit(("protocol", "expected_stop_s", "15s"), 31, "x",
                   "protocol.expected_stop_s.15s"),
        ScalarEdit(("budget", "max_wall_hours", "no"), 1, "x", "protocol.expected_start_s.5s")])
    new = patch.files[path][1]
    data = yaml.safe_load(new)
    assert data["protocol"]["expected_stop_s"] == {"5s": 31, "15s": 31}
    assert data["measured"] == {"protocol.expected_stop_s.5s": "bringup-t",
                                "protocol.expected_stop_s.15s": "bringup-t"}
    assert patch.skipped == ["budget.max_wall_hours.no: budget.max_wall_hours: holds a value, "
                             "not a mapping"]
    assert "# What the host's bring-up measured" in new
