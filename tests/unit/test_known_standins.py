"""Stand-in scorer weights are recognised by their bytes wherever they are: a campaign pin, a
weights file scored or frozen, a folder `scorers standins` wrote into. A stand-in the campaign
does not declare caps the lossy verdict at inconclusive, and every view of a verdict labels
stand-in scores (the verdict table, the terminal, the ledger, merge)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from ref2va_accept.campaign import load_campaign, scorer_weight_identities
from ref2va_accept.core import Check, Reason, file_sha256
from ref2va_accept.evidence import AnyCheck, EvidenceBundle, TrackVerdict, WeightRecord
from ref2va_accept.evidence.sanitize import Sanitizer
from ref2va_accept.history import merge, table_lines
from ref2va_accept.judging import _lossy as lossy
from ref2va_accept.judging import judge
from ref2va_accept.quality import _known_standins as known_standins
from ref2va_accept.quality._registry import SCORERS, ok_score, weight_identity
from ref2va_accept.quality._weight_names import VBENCH_LAYOUT, WEIGHT_NAMES
from ref2va_accept.report import verdict_table_html
from tests.unit.check_records import make_check
from tests.unit.run_folders import finished_run
from tests.unit.suite_runner import ROOT, campaign_variant

pytestmark = pytest.mark.fast

REFERENCE = ROOT / "fixtures/campaigns/reference.yaml"
CLIP = "vbench.background_consistency"
T = "5s-lossy"


def _reference_pins() -> dict[str, dict[str, Any]]:
    return dict(yaml.safe_load(REFERENCE.read_text())["scorer_weights"])


def test_the_shipped_hashes_are_the_reference_campaigns_stand_in_pins() -> None:
    assert set(known_standins.SHIPPED) <= set(WEIGHT_NAMES)
    for name, pin in _reference_pins().items():
        if pin.get("stand_in"):
            assert known_standins.SHIPPED[name] == pin["sha256"], name
    for name, sha in known_standins.SHIPPED.items():
        assert len(sha) == 64 and int(sha, 16) >= 0, name  # a sha256, nothing left to fill
        assert known_standins.stand_in_name(sha) == name
        assert known_standins.stand_in_name(sha.upper()) == name
    assert len(set(known_standins.SHIPPED.values())) == len(known_standins.SHIPPED)
    assert known_standins.stand_in_name("0" * 64) is None


def test_a_folders_list_recognises_what_was_written_below_it(tmp_path: Path) -> None:
    cache = tmp_path / "vbench"
    deep = cache / VBENCH_LAYOUT["raft"]  # three folders deep
    deep.parent.mkdir(parents=True)
    deep.write_bytes(b"raft built with another torch")
    sha = file_sha256(deep)
    assert known_standins.stand_in_name(sha, deep) is None
    listed = known_standins.record_written(cache, [("raft", sha)])
    assert listed.name == known_standins.WRITTEN_LIST
    assert known_standins.stand_in_name(sha, deep) == "raft"
    assert known_standins.stand_in_name(sha) is None  # not shipped: only the list knows it
    # A second write keeps the first; the list says what it is.
    known_standins.record_written(cache, [("amt_s", "ab" * 32)])
    record = json.loads(listed.read_text())
    assert record["stand_ins"] == {"ab" * 32: "amt_s", sha: "raft"}
    assert "not VBench's" in record["what"]
    # A copy outside that folder is not found through it.
    elsewhere = tmp_path / "other" / "raft-things.pth"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(deep.read_bytes())
    assert known_standins.stand_in_name(sha, elsewhere) is None


def test_an_unreadable_list_recognises_nothing_and_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / known_standins.WRITTEN_LIST).write_text("{not json")
    weights = tmp_path / "w.pth"
    weights.write_bytes(b"x")
    with caplog.at_level(logging.WARNING, logger="ref2va_accept.quality._known_standins"):
        assert known_standins.stand_in_name(file_sha256(weights), weights) is None
    assert "ref2va-standins.json: not a list of stand-ins" in caplog.text
    # Writing into that folder replaces it with a list that names what was written.
    known_standins.record_written(tmp_path, [("amt_s", file_sha256(weights))])
    assert known_standins.stand_in_name(file_sha256(weights), weights) == "amt_s"
    (tmp_path / known_standins.WRITTEN_LIST).write_text('{"stand_ins": []}')
    assert known_standins.stand_in_name(file_sha256(weights), weights) is None


def test_a_weights_files_identity_says_stand_in_by_its_bytes(tmp_path: Path) -> None:
    real = tmp_path / "real.pth"
    real.write_bytes(b"a real checkpoint")
    assert weight_identity(real) == WeightRecord.of("real.pth", file_sha256(real))
    assert weight_identity(real).json_dict() == {"name": "real.pth", "sha256": file_sha256(real)}
    fake = tmp_path / "ViT-B-32.pt"
    fake.write_bytes(b"seeded")
    known_standins.record_written(tmp_path, [("clip_vitb32", file_sha256(fake))])
    identity = weight_identity(fake)
    assert identity.stand_in and not identity.declared
    assert identity.json_dict()["stand_in"] is True and identity.json_dict()["declared"] is False


def _campaign_with(tmp_path: Path, *, stand_in: bool, weights_dir: Path | None = None) -> Path:
    path = campaign_variant(tmp_path / "c", models=True)
    data = yaml.safe_load(path.read_text())
    data["scorer_weights"]["clip_vitb32"]["stand_in"] = stand_in
    if weights_dir is not None:
        data["scorer_weights_dir"] = str(weights_dir)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_campaign_pin_that_is_a_stand_in_is_named_when_not_declared(tmp_path: Path) -> None:
    assert load_campaign(_campaign_with(tmp_path / "a", stand_in=True)
                         ).scorer_undeclared_stand_ins() == {}
    undeclared = load_campaign(_campaign_with(tmp_path / "b", stand_in=False))
    assert undeclared.scorer_undeclared_stand_ins() == {"clip_vitb32": "clip_vitb32"}
    assert undeclared.scorer_stand_ins() == frozenset()


def test_freezing_records_a_recognised_stand_in_as_one(tmp_path: Path) -> None:
    weights = tmp_path / "cache"
    clip = weights / VBENCH_LAYOUT["clip_vitb32"]
    clip.parent.mkdir(parents=True)
    clip.write_bytes(b"a stand-in built with the host's torch")
    sha = file_sha256(clip)
    path = _campaign_with(tmp_path, stand_in=False, weights_dir=weights)
    data = yaml.safe_load(path.read_text())
    data["scorer_weights"]["clip_vitb32"]["sha256"] = sha
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    campaign = load_campaign(path)
    found, problems = scorer_weight_identities(campaign)
    assert problems == [] and found["clip_vitb32"]["stand_in"] is False
    assert campaign.scorer_undeclared_stand_ins() == {}
    known_standins.record_written(weights, [("clip_vitb32", sha)])
    found, _ = scorer_weight_identities(campaign)
    assert found["clip_vitb32"]["stand_in"] is True
    assert campaign.scorer_undeclared_stand_ins() == {"clip_vitb32": "clip_vitb32"}


# -- the lossy gate's weights check and the verdict --------------------------------------------
def _scored(*identities: WeightRecord, seed: int = 42) -> lossy.ScoredOutcome:
    info = SCORERS[CLIP].with_weights(identities)
    scores = (ok_score(info, 0.9), ok_score(SCORERS["vbench.temporal_flickering"], 0.9))
    return lossy.ScoredOutcome(seed, SimpleNamespace(), scores)


REAL = WeightRecord.of("ViT-B-32.pt", "1" * 64)
DECLARED = WeightRecord.of("ViT-B-32.pt", "2" * 64, stand_in=True, declared=True)
UNDECLARED = WeightRecord.of("ViT-B-32.pt", "3" * 64, stand_in=True)


def test_the_weights_check_names_stand_ins_and_fails_an_undeclared_one() -> None:
    none = lossy.ScoredOutcome(42, SimpleNamespace(),
                               (ok_score(SCORERS["vbench.temporal_flickering"], 0.9),))
    assert lossy.weights_check(T, "b0", [none]) is None  # no model scored: nothing to say
    real = lossy.weights_check(T, "b0", [_scored(REAL), _scored(REAL, seed=7)])
    assert real is not None and real.status == "pass" and real.name is Check.SCORER_WEIGHTS
    assert real.detail == "scored with ViT-B-32.pt; none is a stand-in"
    assert real.data.stand_ins == [] and len(real.data.weights) == 1
    declared = lossy.weights_check(T, "c", [_scored(DECLARED)])
    assert declared is not None and declared.status == "pass"
    assert declared.data.stand_ins == ["ViT-B-32.pt"] and declared.data.undeclared == []
    assert "declared stand-in weights (seeded random, not VBench's): ViT-B-32.pt" in \
        declared.detail
    bad = lossy.weights_check(T, "c", [_scored(UNDECLARED)])
    assert bad is not None and bad.status == "fail"
    assert bad.reason is Reason.UNDECLARED_STAND_IN_WEIGHTS
    assert "ViT-B-32.pt, sha256 333333333333..." in bad.detail
    assert "no lossy verdict is better than inconclusive" in bad.detail


def _lossy_passing(candidate: str = "c1") -> list[AnyCheck]:
    """Every check a lossy track requires, passed (B0's own on B0), and a supported latency."""
    from ref2va_accept.core import required_checks
    from ref2va_accept.timing import latency_verdict

    on_b0 = {Check.B0_MEDIA, Check.BASELINE_VARIABILITY}
    checks = [make_check(T, "b0" if name in on_b0 else candidate, name, "pass")
              for name in required_checks("lossy") if name is not Check.LATENCY_RATIO]
    return [*checks, make_check(T, candidate, Check.LATENCY_RATIO, "pass",
                                latency=latency_verdict((300, 298, 305), (140, 141, 139)))]


@pytest.mark.parametrize("failed_gate", [False, True])
def test_undeclared_stand_in_scores_give_no_lossy_verdict_better_than_inconclusive(
        failed_gate: bool) -> None:
    checks = _lossy_passing()
    assert judge(T, "lossy", "c1", checks).verdict == "supported"
    if failed_gate:  # a gate "failed" on stand-in scores is not a quality failure either
        checks = [c for c in checks if c.name is not Check.LOSSY_GATE] + [make_check(
            T, "c1", "lossy_gate", "fail", "quality_gate_failed", "relative error 2%")]
        assert judge(T, "lossy", "c1", checks).verdict == "failed"
    weights = lossy.weights_check(T, "b0", [_scored(UNDECLARED)])
    assert weights is not None
    verdict = judge(T, "lossy", "c1", [*checks, weights])
    assert verdict.verdict == "inconclusive"
    assert verdict.reasons[0] is Reason.UNDECLARED_STAND_IN_WEIGHTS
    assert verdict.note == weights.detail  # why, in one line
    assert verdict.stand_in_weights == ("ViT-B-32.pt",)
    assert verdict.json_dict_full()["stand_in_weights"] == ["ViT-B-32.pt"]


def test_declared_stand_in_scores_decide_but_the_verdict_is_labelled() -> None:
    weights = lossy.weights_check(T, "c1", [_scored(DECLARED)])
    assert weights is not None
    verdict = judge(T, "lossy", "c1", [*_lossy_passing(), weights])
    assert verdict.verdict == "supported" and verdict.stand_in_weights == ("ViT-B-32.pt",)
    assert verdict.stand_in_label == "STAND-IN scores (ViT-B-32.pt)"
    real = lossy.weights_check(T, "c1", [_scored(REAL)])
    assert real is not None
    plain = judge(T, "lossy", "c1", [*_lossy_passing(), real])
    assert plain.stand_in_weights == () and plain.stand_in_label == ""
    # Another candidate's stand-ins are not this one's.
    other = lossy.weights_check(T, "c2", [_scored(DECLARED)])
    assert other is not None
    assert judge(T, "lossy", "c1", [*_lossy_passing(), other]).stand_in_weights == ()


def test_every_view_of_a_verdict_labels_stand_in_scores(tmp_path: Path) -> None:
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run-a", Sanitizer((), ()))
    row = TrackVerdict(track=T, candidate="c1", verdict="supported",
                       reasons=("latency_supported",), open_checks=(), checks={},
                       stand_in_weights=("ViT-B-32.pt",))
    bundle.verdicts = [row, TrackVerdict(track="15s-lossy", candidate="c1", verdict="failed",
                                         reasons=("latency_failed",), open_checks=(), checks={})]
    page = verdict_table_html(bundle)
    assert page.count("STAND-IN scores (ViT-B-32.pt): seeded random weights, not VBench's") == 1
    # The campaign record in the report, from the ledger's entries.
    from ref2va_accept.report import ledger_html

    entry = {"schema": "ref2va-ledger/1", "kind": "attempt", "run_id": "run-a",
             "run_status": "complete"}
    bundle.set_section("ledger", {"file": "c.ledger.jsonl", "appended": 2, "torn_tail": False,
                                  "history": [
        {**entry, "verdict": "supported", "track": T, "stand_in_weights": ["ViT-B-32.pt"]},
        {**entry, "verdict": "failed", "track": "15s-lossy"}]})
    assert ledger_html(bundle).count("STAND-IN scores (ViT-B-32.pt)") == 1
    # The ledger's table, from the same entries.
    record = bundle.record.ledger
    assert record is not None
    lines = table_lines(record.history)
    assert "SUPPORTED STAND-IN scores (ViT-B-32.pt)" in lines[1]
    assert "STAND-IN" not in lines[2]
    # merge: the cell and merge.json, of two runs that recorded the row.
    runs = [finished_run(tmp_path, run_id, [row], campaign="x", lock="c" * 64)
            for run_id in ("run-a", "run-b")]
    merged = merge(runs, tmp_path / "merged")
    assert merged.read_text().count("STAND-IN scores (ViT-B-32.pt)") == 2
    merged_record = json.loads((tmp_path / "merged" / "merge.json").read_text())
    assert merged_record["rows"][0]["runs"]["run-a"]["stand_in_weights"] == ["ViT-B-32.pt"]


def test_the_terminal_summary_labels_stand_in_scores(tmp_path: Path) -> None:
    from ref2va_accept.plugin._reporting import pytest_terminal_summary
    from ref2va_accept.plugin._state import STATE

    bundle = EvidenceBundle.create(tmp_path / "evidence", "run-a", Sanitizer((), ()))
    bundle.verdicts = [
        TrackVerdict(track=T, candidate="c1", verdict="inconclusive",
                     reasons=("undeclared_stand_in_weights",), open_checks=(), checks={},
                     stand_in_weights=("ViT-B-32.pt",)),
        TrackVerdict(track="15s-lossy", candidate="c1", verdict="failed",
                     reasons=("latency_failed",), open_checks=(), checks={})]
    lines: list[str] = []
    reporter = SimpleNamespace(write_sep=lambda *_: None, write_line=lines.append)
    state = SimpleNamespace(bundle=bundle, display=lambda p: "evidence/run-a")
    pytest_terminal_summary(reporter, 0, SimpleNamespace(stash={STATE: state}))
    assert lines[0].endswith("INCONCLUSIVE  undeclared_stand_in_weights STAND-IN scores "
                             "(ViT-B-32.pt)")
    assert "STAND-IN" not in lines[1]
