"""`ref2va-accept review`: a blind side-by-side sheet of a run's outputs (B0 and candidate, same
seed), and the ratings given back ingested into the run's evidence as human evaluation, apart from
the automatic gates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ref2va_accept.cli import main
from ref2va_accept.evidence import (
    EVENTS_FILE,
    EVIDENCE_FILE,
    Bundle,
    EventLog,
    bundle_text,
    project,
    rebuild,
)
from ref2va_accept.history import ReviewError, ingest, pairs, write_review
from tests.media_samples import write_mp4
from tests.unit.browser import chromium
from tests.unit.evidence_schema import read_bundle

AT = "2026-12-01T05:00:00+00:00"
# (track, arm, seed, kind): lossless-text-kv has its quality output; cache-dit-mild only its
# measured one for seed 43 (its quality output of seed 43 failed); reduction-order none at all.
OUTPUTS = [("5s-lossless", "b0", 42, "quality"), ("5s-lossless", "lossless-text-kv", 42, "quality"),
           ("5s-lossless", "b0", 42, "measured"), ("5s-lossy", "b0", 42, "quality"),
           ("5s-lossy", "b0", 43, "quality"), ("5s-lossy", "b0", 43, "measured"),
           ("5s-lossy", "cache-dit-mild", 42, "quality"),
           ("5s-lossy", "cache-dit-mild", 43, "measured")]
VERDICTS = [("5s-lossless", "lossless-text-kv", "supported"),
            ("5s-lossless", "reduction-order", "failed"), ("5s-lossy", "cache-dit-mild", "failed")]


def _run(root: Path, outputs: list[tuple[str, str, int, str]] = OUTPUTS) -> Path:
    """A finished run folder as the plugin leaves it: its event log, evidence.json and media."""
    run = root / "20261201T050000Z-abcdef"
    run.mkdir(parents=True)
    log = EventLog(run / EVENTS_FILE)
    events = [log.append("start", {
        "schema": "ref2va-evidence/1", "run_id": run.name, "status": "running",
        "started_at": AT, "finished_at": None, "harness_version": "0.1.0",
        "environment": {"python": "3.11.7", "implementation": "cpython", "machine": "x86_64",
                        "system": "Linux", "packages": {}},
        "campaign": None, "verdicts": [], "checks": [], "instances": [], "samples": [],
        "media": [], "notes": []}, AT)]
    for index, (track, arm, seed, kind) in enumerate(outputs):
        media = f"media/{track}/{arm}/{kind}-{index}-seed{seed}.mp4"
        (run / media).parent.mkdir(parents=True, exist_ok=True)
        write_mp4(run / media, 48, level=40 + 20 * index)  # 2 s, every frame one grey
        events.append(log.append("sample", {
            "sample_id": f"s{index}", "arm": arm, "track": track, "kind": kind, "index": 0,
            "seed": seed, "started_at": AT, "ok": True, "failure": None, "detail": None,
            "status": 200, "latency_s": 1.0, "ttfb_s": 0.9, "body_bytes": 1000, "sha256": None,
            "content_type": "video/mp4", "server_request_id": None, "server_model": None,
            "inference_time_s": None, "stage_durations": None, "peak_memory_mb": None,
            "media_file": media, "extra": {},
            "request": {"fields": {"seed": str(seed)}, "references": []}}, AT))
    events.append(log.append("verdicts", [
        {"track": t, "candidate": c, "verdict": v, "reasons": [], "open_checks": [],
         "checks": {}, "note": "", "holm": None, "p_value": None, "attempt": None,
         "earlier": [], "stand_in_weights": [], "localized": ""} for t, c, v in VERDICTS], AT))
    events.append(log.append("status", {"status": "complete", "finished_at": AT}, AT))
    (run / EVIDENCE_FILE).write_text(bundle_text(project(events)))
    return run


@pytest.mark.fast
def test_every_candidate_and_seed_with_both_outputs_is_a_pair(tmp_path: Path) -> None:
    found, missing = pairs(Bundle.model_validate(read_bundle(_run(tmp_path))))
    assert [(p.pair, p.track, p.candidate, p.seed, p.kind) for p in found] == [
        ("p01", "5s-lossless", "lossless-text-kv", 42, "quality"),
        ("p02", "5s-lossy", "cache-dit-mild", 42, "quality"),
        ("p03", "5s-lossy", "cache-dit-mild", 43, "measured")]  # no quality output of seed 43
    assert found[2].b0.startswith("media/5s-lossy/b0/measured-")
    assert missing == ["5s-lossless reduction-order: no complete output of both B0 and the "
                       "candidate for the same seed"]


@pytest.mark.fast
def test_the_sheet_is_blind_and_its_key_says_which_side_is_b0(tmp_path: Path) -> None:
    run = _run(tmp_path)
    page = write_review(run).read_text()
    sheet = run / "review"
    key = json.loads((sheet / "key.json").read_text())
    assert [p["pair"] for p in key["pairs"]] == ["p01", "p02", "p03"]
    for entry in key["pairs"]:
        other = "B" if entry["b0_side"] == "A" else "A"
        for side, source in ((entry["b0_side"], entry["b0"]), (other, entry["candidate_file"])):
            clip = sheet / "clips" / f"{entry['pair']}-{side}.mp4"
            assert clip.read_bytes() == (run / source).read_bytes()
            assert f"src='clips/{entry['pair']}-{side}.mp4'" in page
    # Nothing on the page says which side is B0: no arm in a clip's name, no key.
    assert "key.json" not in page and "media/" not in page and "/b0/" not in page
    assert "reduction-order: no complete output" in page
    template = json.loads((sheet / "ratings.json").read_text())
    assert template["review_id"] == key["review_id"] and template["run_id"] == run.name
    assert [r["pair"] for r in template["ratings"]] == ["p01", "p02", "p03"]
    # A second sheet never replaces the first (its key answers ratings already out).
    with pytest.raises(ReviewError, match="review: exists already"):
        write_review(run)
    assert json.loads((sheet / "key.json").read_text()) == key


@pytest.mark.fast
def test_a_run_with_nothing_to_pair_or_no_evidence_is_one_line(tmp_path: Path) -> None:
    run = _run(tmp_path / "a", [("5s-lossless", "b0", 42, "quality")])
    with pytest.raises(ReviewError, match="nothing to review: 5s-lossless lossless-text-kv: no "
                                          "complete output"):
        write_review(run)
    assert not (run / "review").exists()
    with pytest.raises(ReviewError, match=r"no evidence\.json"):
        write_review(tmp_path / "nowhere")


@pytest.mark.fast
def test_a_key_or_evidence_that_is_not_its_record_is_one_line(tmp_path: Path) -> None:
    run = _run(tmp_path)
    write_review(run)
    ratings = tmp_path / "r.json"
    ratings.write_text(json.dumps(_ratings(run)))
    key_file = run / "review" / "key.json"
    key = json.loads(key_file.read_text())
    key_file.write_text(json.dumps({**key, "pairs": [{**key["pairs"][0], "b0_side": "C"}]}))
    with pytest.raises(ReviewError, match=r"^review/key\.json: pairs\.0\.b0_side: Input should "
                                          r"be 'A' or 'B'$"):
        ingest(run, ratings)
    key_file.write_text(json.dumps({**key, "schema": "ref2va-review-key/0"}))
    with pytest.raises(ReviewError, match=r"^review/key\.json: not a review key "
                                          r"\(ref2va-review-key/1 expected\)$"):
        ingest(run, ratings)
    evidence = json.loads((run / EVIDENCE_FILE).read_text())
    del evidence["samples"][0]["seed"]
    (run / EVIDENCE_FILE).write_text(json.dumps(evidence))
    with pytest.raises(ReviewError, match=r"^20261201T050000Z-abcdef: evidence\.json does not "
                                          r"match the evidence records: "
                                          r"samples\.0\.seed: Field required$"):
        write_review(run, tmp_path / "another")
    assert not (tmp_path / "another").exists()


def _ratings(run: Path, **changes: Any) -> dict[str, Any]:
    ratings = json.loads((run / "review" / "ratings.json").read_text())
    ratings["reviewer"] = "reviewer-1"
    ratings.update(changes)
    return ratings


def _side(run: Path, pair: str, of: str) -> str:
    entry = next(p for p in json.loads((run / "review" / "key.json").read_text())["pairs"]
                 if p["pair"] == pair)
    return entry["b0_side"] if of == "b0" else ("B" if entry["b0_side"] == "A" else "A")


def test_ratings_are_resolved_through_the_key_into_the_evidence(tmp_path: Path) -> None:
    run = _run(tmp_path)
    write_review(run)
    lines_before = len((run / EVENTS_FILE).read_text().splitlines())
    ratings = _ratings(run)
    ratings["ratings"][0].update(preferred=_side(run, "p01", "candidate"),
                                 visible_differences="none", audio_differences="none",
                                 notes=f"looked at {tmp_path}/frame.png")
    ratings["ratings"][1].update(preferred=_side(run, "p02", "b0"), visible_differences="major")
    ratings["ratings"][2].update(preferred="same")
    file = tmp_path / "ratings-1.json"
    file.write_text(json.dumps(ratings))
    entry = ingest(run, file)
    assert [(r.pair, r.preferred) for r in entry.ratings] == [
        ("p01", "candidate"), ("p02", "b0"), ("p03", "same")]
    summary = {(s.track, s.candidate): s for s in entry.summary}
    assert summary[("5s-lossy", "cache-dit-mild")].preferred == {"b0": 1, "candidate": 0,
                                                                "same": 1}
    assert summary[("5s-lossy", "cache-dit-mild")].visible_differences == {"major": 1}
    assert summary[("5s-lossless", "lossless-text-kv")].rated == 1
    # Sanitized like the rest of the evidence; one event appended, evidence.json its projection.
    assert str(tmp_path) not in entry.ratings[0].notes
    assert entry.ratings[0].notes.endswith("/frame.png")
    assert len((run / EVENTS_FILE).read_text().splitlines()) == lines_before + 1
    bundle = read_bundle(run)  # valid against the published schema
    assert bundle["human_evaluation"] == [entry.json_dict()]
    assert rebuild(run).json_dict() == bundle
    assert bundle["verdicts"][0]["verdict"] == "supported"  # no verdict reads it
    results = (run / "review" / "results.html").read_text()
    assert "reviewer-1" in results and "preferred candidate" in results
    assert "<td>5s-lossy</td><td>cache-dit-mild</td><td>FAILED</td><td>2 of 2</td>" in results
    # The same file twice is refused; a second reviewer's ratings are a second set.
    with pytest.raises(ReviewError, match=r"ratings-1\.json: these ratings are in the evidence"):
        ingest(run, file)
    second = tmp_path / "ratings-2.json"
    second.write_text(json.dumps(_ratings(run, reviewer="reviewer-2")))
    ingest(run, second)
    assert [e["reviewer"] for e in read_bundle(run)["human_evaluation"]] == ["reviewer-1",
                                                                             "reviewer-2"]


@pytest.mark.fast
@pytest.mark.parametrize(("change", "said"), [
    ({"review_id": "ffffffff"}, "review_id 'ffffffff' is not this sheet's"),
    ({"reviewer": " "}, "reviewer: an alias or a role is needed"),
    ({"schema": "x"}, "not a ratings file"),
    ({"ratings": {}}, "ratings: a list of pairs expected"),
    ({"ratings": [{"pair": "p09"}]}, "ratings[0].pair: 'p09' is not a pair of this sheet"),
    ({"ratings": [{"pair": "p01"}, {"pair": "p01"}]}, "ratings[1].pair: p01 is rated twice"),
    ({"ratings": [{"pair": "p01", "preferred": "left"}]},
     "ratings[0].preferred: one of A, B, same, or null (not rated); found 'left'"),
    ({"ratings": [{"pair": "p01", "visible_differences": "huge"}]},
     "ratings[0].visible_differences: one of none, minor, major"),
    ({"ratings": [{"pair": "p01", "score": 5}]}, "ratings[0]: unknown field 'score'"),
])
def test_bad_ratings_are_one_line_and_change_nothing(
        tmp_path: Path, change: dict[str, Any], said: str) -> None:
    run = _run(tmp_path)
    write_review(run)
    before = (run / EVENTS_FILE).read_bytes(), (run / EVIDENCE_FILE).read_bytes()
    file = tmp_path / "ratings.json"
    file.write_text(json.dumps(_ratings(run, **change)))
    with pytest.raises(ReviewError) as refused:
        ingest(run, file)
    assert str(refused.value) == f"ratings.json: {said}" or said in str(refused.value)
    assert "\n" not in str(refused.value)
    assert ((run / EVENTS_FILE).read_bytes(), (run / EVIDENCE_FILE).read_bytes()) == before


def test_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path)
    assert main(["review", str(run)]) == 0
    assert "review sheet:" in capsys.readouterr().out
    file = tmp_path / "r.json"
    file.write_text("{not json")
    assert main(["review", str(run), "--ingest", str(file)]) == 1
    assert "r.json: not a readable ratings file" in capsys.readouterr().err
    ratings = _ratings(run)
    ratings["ratings"][0]["preferred"] = "same"
    file.write_text(json.dumps(ratings))
    assert main(["review", str(run), "--ingest", str(file)]) == 0
    out = capsys.readouterr().out
    assert "ingested 3 ratings by reviewer-1" in out and "rated 1/1" in out
    assert main(["review", str(tmp_path / "none")]) == 1


def test_the_sheet_plays_both_sides_in_step_and_saves_the_ratings(tmp_path: Path) -> None:
    """In a real browser: play, seek and frame steps move both videos of a pair together, the
    audio is one side's, and the form saves a ratings file that ingests."""
    from playwright.sync_api import sync_playwright

    run = _run(tmp_path)
    page_file = write_review(run)
    errors: list[str] = []
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium(), args=[
            "--no-sandbox", "--autoplay-policy=no-user-gesture-required"])
        try:
            page = browser.new_page(accept_downloads=True)
            page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
            page.goto(page_file.as_uri())
            page.wait_for_function("() => Array.from(document.querySelectorAll('video'))"
                                   ".every(v => v.readyState >= 1 && v.duration > 1.9)")
            pair = page.locator("#p01")
            times = "p => Array.from(p.querySelectorAll('video')).map(v => v.currentTime)"
            pair.locator("button", has_text="play").first.click()
            page.wait_for_function("() => document.querySelector('#p01 video.A').currentTime"
                                   " > 0.5")
            pair.locator("button", has_text="pause").click()
            a, b = pair.evaluate(times)
            assert a > 0.5 and abs(a - b) <= 1 / 24 + 0.05, (a, b)
            pair.locator("input.pos").fill("0.25")  # the seek bar: a quarter of 2 s
            page.wait_for_timeout(200)
            assert pair.evaluate(times) == pytest.approx([0.5, 0.5], abs=0.05)
            pair.locator("button", has_text="frame ▶").click()
            page.wait_for_timeout(200)
            assert pair.evaluate(times) == pytest.approx([0.5 + 1 / 24] * 2, abs=0.02)
            pair.locator("input[value=B][name='p01-hear']").check()
            assert pair.evaluate("p => Array.from(p.querySelectorAll('video'))"
                                 ".map(v => v.muted)") == [True, False]
            page.fill("#reviewer", "reviewer-3")
            pair.locator("input[name='p01-preferred'][value=same]").check()
            pair.locator("input[name='p01-visible_differences'][value=minor]").check()
            pair.locator("textarea").fill("B flickers at 1 s")
            with page.expect_download() as download:
                page.click("text=save ratings.json")
            saved = tmp_path / "saved.json"
            download.value.save_as(saved)
        finally:
            browser.close()
    assert errors == []
    entry = ingest(run, saved)
    assert entry.reviewer == "reviewer-3"
    assert entry.ratings[0].json_dict() | {"notes": ""} == {
        "pair": "p01", "track": "5s-lossless", "candidate": "lossless-text-kv", "seed": 42,
        "kind": "quality", "preferred": "same", "visible_differences": "minor",
        "audio_differences": None, "notes": ""}
    assert entry.ratings[0].notes == "B flickers at 1 s"
