"""`ref2va-accept review RUN`: a blind side-by-side review sheet of a run's outputs, and the ratings
a reviewer gives back, ingested into the run's evidence as human evaluation.

The requester chose no human checks during the automated search; the quality contract still names
human evaluation, and a reviewer needs outputs to look at. For every candidate, track and seed of
the run, the sheet pairs the candidate's output with B0's output of the same seed (the quality
gate's outputs, else the measured ones), as A and B in a random order per pair, under names that
do not say which is which (`clips/<pair>-A.mp4`). The page plays both in step (one play, pause,
seek and frame step for the pair; the audio of one side at a time) and writes the ratings file
from its form; `ratings.json` is the same file to fill by hand. Which side is B0 is kept in
`key.json`, which the page never reads.

Ingesting (`review RUN --ingest FILE`) checks the file against the sheet it answers (its review
id and run id, every pair known, every value allowed), maps A and B back to B0 and the candidate
through the key, and appends the ratings to the run's event log as the `human_evaluation` section
(all rating sets so far, each with a summary per track and candidate); evidence.json is then
rebuilt from the log, and the sheet's `results.html` shows every rating set, unblinded. Free text
(reviewer, notes) is sanitized like everything else in the evidence. Human evaluation stays apart
from the automatic gates: no verdict reads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ref2va_accept.campaign import track_rank
from ref2va_accept.core import ArmRole, Ref2VAError, atomic_write, file_sha256
from ref2va_accept.evidence import (
    EVENTS_FILE,
    EVIDENCE_FILE,
    Bundle,
    EventLog,
    HumanEvaluation,
    Preference,
    Rating,
    RatingSummary,
    bundle_text,
    payload,
    read_bundle_file,
    read_events,
    rebuild,
    utc_now,
)
from ref2va_accept.evidence.sanitize import Sanitizer
from ref2va_accept.history._review_pages import (
    DIFFERENCES,
    PREFERRED,
    SIDES,
    Pair,
    results_page,
    sheet_page,
)

__all__ = ["RATINGS_SCHEMA", "ReviewError", "ingest", "pairs", "write_review"]

RATINGS_SCHEMA = "ref2va-ratings/1"
KEY_SCHEMA = "ref2va-review-key/1"
# Which outputs a pair shows, best first: the quality gate's, else the timed ones.
KINDS = ("quality", "measured")
NOTES_LIMIT = 2000


class ReviewError(Ref2VAError):
    """A run that cannot be reviewed, or ratings that cannot be ingested (one line, what and
    where)."""


def _load(run: Path) -> Bundle:
    return read_bundle_file(run, ReviewError)[1]


def _outputs(bundle: Bundle) -> dict[tuple[str, str, int, str], str]:
    """(track, arm, seed, kind) -> the first complete output's media file."""
    found: dict[tuple[str, str, int, str], str] = {}
    for sample in bundle.samples:
        if not sample.ok or not sample.media_file or sample.seed is None:
            continue
        key = (sample.track, sample.arm, sample.seed, sample.kind)
        found.setdefault(key, sample.media_file)
    return found


def pairs(bundle: Bundle) -> tuple[list[Pair], list[str]]:
    """Every (track, candidate, seed) with a complete output of both B0 and the candidate, and a
    line for each candidate of the run's verdicts that has none (so the sheet says so)."""
    outputs = _outputs(bundle)
    judged = [(v.track, v.candidate) for v in bundle.verdicts if v.candidate]
    judged.sort(key=lambda tc: track_rank(tc[0]))
    found: list[Pair] = []
    missing: list[str] = []
    for track, candidate in judged:
        seeds = sorted({seed for (t, arm, seed, kind) in outputs
                        if t == track and arm == candidate and kind in KINDS})
        shown = 0
        for seed in seeds:
            for kind in KINDS:
                b0 = outputs.get((track, ArmRole.B0, seed, kind))
                cand = outputs.get((track, candidate, seed, kind))
                if b0 and cand:
                    found.append(Pair(f"p{len(found) + 1:02d}", track, candidate, seed, kind, b0,
                                      cand))
                    shown += 1
                    break
        if not shown:
            missing.append(f"{track} {candidate}: no complete output of both B0 and the "
                           "candidate for the same seed")
    return found, missing


def _place(source: Path, target: Path) -> None:
    """A clip under its blind name: a hard link where the filesystem allows, else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def write_review(run: Path, output: Path | None = None) -> Path:
    """The sheet for one run: ``output`` (default RUN/review) with index.html, ratings.json,
    key.json and clips/. Refused when the folder exists: its key answers ratings that may be out
    already. Returns the page's path."""
    bundle = _load(run)
    found, missing = pairs(bundle)
    if not found:
        raise ReviewError(f"{run.name}: nothing to review: "
                          + ("; ".join(missing) if missing else "no candidate was judged"))
    folder = output or run / "review"
    if folder.exists():
        raise ReviewError(f"{folder.name}: exists already (its key answers the ratings handed out "
                          "with it); --output DIR for another sheet")
    (folder / "clips").mkdir(parents=True)
    review_id = secrets.token_hex(4)
    key = []
    shown = []
    for pair in found:
        b0_side = secrets.choice(SIDES)
        sides = {b0_side: pair.b0, ("B" if b0_side == "A" else "A"): pair.candidate_file}
        clips = {}
        for side in SIDES:
            source = run / sides[side]
            if not source.is_file():
                shutil.rmtree(folder)
                raise ReviewError(f"{run.name}/{sides[side]}: the output the evidence lists is "
                                  "missing")
            clips[side] = f"clips/{pair.pair}-{side}.mp4"
            _place(source, folder / clips[side])
        key.append({"pair": pair.pair, "track": pair.track, "candidate": pair.candidate,
                    "seed": pair.seed, "kind": pair.kind, "b0_side": b0_side,
                    "b0": pair.b0, "candidate_file": pair.candidate_file,
                    "sha256": {side: file_sha256(folder / clips[side]) for side in SIDES}})
        shown.append((pair, clips))
    fps = _fps(bundle)
    atomic_write(folder / "key.json", json.dumps(
        {"schema": KEY_SCHEMA, "review_id": review_id, "run_id": bundle.run_id,
         "pairs": key}, indent=2) + "\n")
    template = _template(review_id, bundle.run_id, found)
    atomic_write(folder / "ratings.json", json.dumps(template, indent=2) + "\n")
    page = folder / "index.html"
    atomic_write(page, sheet_page(bundle, review_id, shown, missing, fps, template))
    return page


def _fps(bundle: Bundle) -> float:
    for entry in bundle.media:
        video = None if entry.probe is None else entry.probe.video
        if video is not None and video.fps:
            return float(video.fps)
    return 24.0


def _template(review_id: str, run_id: str, found: Sequence[Pair]) -> dict[str, Any]:
    return {"schema": RATINGS_SCHEMA, "review_id": review_id, "run_id": run_id,
            "reviewer": "",
            "ratings": [{"pair": p.pair, "preferred": None, "visible_differences": None,
                         "audio_differences": None, "notes": ""} for p in found]}


# -- ingesting -----------------------------------------------------------------------------------
class _KeyRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class KeyPair(_KeyRecord):
    """One pair of the sheet, unblinded: which side shows B0 (key.json)."""

    pair: str
    track: str
    candidate: str
    seed: int
    kind: Literal["quality", "measured"]
    b0_side: Literal["A", "B"]
    b0: str
    candidate_file: str
    sha256: dict[str, str]


class ReviewKey(_KeyRecord):
    """The sheet's key (key.json, written by write_review and never shown on the page)."""

    schema_id: Literal["ref2va-review-key/1"] = Field(alias="schema")
    review_id: str
    run_id: str
    pairs: list[KeyPair]


@dataclass(frozen=True)
class GivenRating:
    """One row of a ratings file, checked: the sides as the reviewer saw them (A, B, same)."""

    pair: str
    preferred: str | None
    visible_differences: str | None
    audio_differences: str | None
    notes: str


@dataclass(frozen=True)
class GivenRatings:
    reviewer: str
    rows: tuple[GivenRating, ...]


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReviewError(f"{path.name}: no such {what}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReviewError(f"{path.name}: not a readable {what} ({exc})") from None


def _read_key(folder: Path) -> ReviewKey:
    where = f"{folder.name}/key.json"
    raw = _read_json(folder / "key.json", "review key")
    try:
        return ReviewKey.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(map(str, first["loc"]))
        if field in ("", "schema"):
            raise ReviewError(f"{where}: not a review key ({KEY_SCHEMA} expected)") from None
        raise ReviewError(f"{where}: {field}: {first['msg']}") from None


def _check_ratings(ratings: Any, key: ReviewKey, name: str) -> GivenRatings:
    """The reviewer's file checked against the sheet it answers (the file as handed back, read
    here only: what goes into the evidence is the HumanEvaluation record ingest makes)."""
    if not isinstance(ratings, dict) or ratings.get("schema") != RATINGS_SCHEMA:
        raise ReviewError(f"{name}: not a ratings file (schema {RATINGS_SCHEMA} expected)")
    for field, expected in (("review_id", key.review_id), ("run_id", key.run_id)):
        if ratings.get(field) != expected:
            raise ReviewError(f"{name}: {field} {ratings.get(field)!r} is not this sheet's "
                              f"({expected!r}): ratings answer the sheet they came with")
    reviewer = ratings.get("reviewer")
    if not isinstance(reviewer, str) or not reviewer.strip():
        raise ReviewError(f"{name}: reviewer: an alias or a role is needed (who rated, for "
                          "the record)")
    rows = ratings.get("ratings")
    if not isinstance(rows, list):
        raise ReviewError(f"{name}: ratings: a list of pairs expected")
    known = {p.pair for p in key.pairs}
    seen: set[str] = set()
    allowed = {"preferred": PREFERRED, "visible_differences": DIFFERENCES,
               "audio_differences": DIFFERENCES}
    checked = []
    for index, row in enumerate(rows):
        where = f"{name}: ratings[{index}]"
        if not isinstance(row, dict):
            raise ReviewError(f"{where}: an object expected")
        extra = sorted(set(row) - {"pair", "notes", *allowed})
        if extra:
            raise ReviewError(f"{where}: unknown field {extra[0]!r}")
        pair = str(row.get("pair"))
        if pair not in known:
            raise ReviewError(f"{where}.pair: {row.get('pair')!r} is not a pair of this sheet "
                              f"({', '.join(sorted(known))})")
        if pair in seen:
            raise ReviewError(f"{where}.pair: {pair} is rated twice")
        seen.add(pair)
        for field, values in allowed.items():
            value = row.get(field)
            if value is not None and value not in values:
                raise ReviewError(f"{where}.{field}: one of {', '.join(values)}, or null "
                                  f"(not rated); found {value!r}")
        notes = row.get("notes", "")
        if not isinstance(notes, str) or len(notes) > NOTES_LIMIT:
            raise ReviewError(f"{where}.notes: a text of at most {NOTES_LIMIT} characters")
        checked.append(GivenRating(pair, row.get("preferred"), row.get("visible_differences"),
                                   row.get("audio_differences"), notes))
    return GivenRatings(reviewer, tuple(checked))


def _summary(rows: Sequence[Rating]) -> list[RatingSummary]:
    groups: dict[tuple[str, str], list[Rating]] = {}
    for row in rows:
        groups.setdefault((row.track, row.candidate), []).append(row)
    out = []
    for (track, candidate), members in groups.items():
        rated = [r for r in members if r.preferred is not None
                 or r.visible_differences is not None or r.audio_differences is not None]
        preferred = Counter(r.preferred for r in rated if r.preferred is not None)
        out.append(RatingSummary.model_validate({
            "track": track, "candidate": candidate, "pairs": len(members), "rated": len(rated),
            "preferred": {v: preferred[v] for v in get_args(Preference)},
            "visible_differences": dict(Counter(
                r.visible_differences for r in rated if r.visible_differences is not None)),
            "audio_differences": dict(Counter(
                r.audio_differences for r in rated if r.audio_differences is not None))}))
    return out


def _unblinded(side: str | None, pair: KeyPair) -> str | None:
    """What the reviewer preferred, A or B resolved through the key: b0, candidate or same."""
    if side is None or side == "same":
        return side
    return ArmRole.B0.value if side == pair.b0_side else "candidate"


def ingest(run: Path, ratings_file: Path, review: Path | None = None) -> HumanEvaluation:
    """Ratings for a sheet of ``run`` (default RUN/review) into the run's evidence; returns the
    rating set as recorded."""
    bundle = _load(run)
    folder = review or run / "review"
    key = _read_key(folder)
    if key.run_id != bundle.run_id:
        raise ReviewError(f"{folder.name}/key.json: a sheet of run {key.run_id}, not of "
                          f"{bundle.run_id}")
    raw = ratings_file.read_bytes() if ratings_file.is_file() else None
    if raw is None:
        raise ReviewError(f"{ratings_file.name}: no such ratings file")
    digest = hashlib.sha256(raw).hexdigest()
    earlier = list(bundle.human_evaluation or [])
    if any(entry.file_sha256 == digest for entry in earlier):
        raise ReviewError(f"{ratings_file.name}: these ratings are in the evidence already")
    try:
        ratings = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReviewError(f"{ratings_file.name}: not a readable ratings file ({exc})") from None
    given = _check_ratings(ratings, key, ratings_file.name)
    by_pair = {p.pair: p for p in key.pairs}
    sanitizer = Sanitizer.for_this_host(evidence=run.parent)
    recorded = []
    for row in given.rows:
        pair = by_pair[row.pair]
        recorded.append(Rating.model_validate({
            "pair": pair.pair, "track": pair.track, "candidate": pair.candidate,
            "seed": pair.seed, "kind": pair.kind, "preferred": _unblinded(row.preferred, pair),
            "visible_differences": row.visible_differences,
            "audio_differences": row.audio_differences, "notes": sanitizer.text(row.notes)}))
    entry = HumanEvaluation.model_validate({
        "review_id": key.review_id, "reviewer": sanitizer.text(given.reviewer),
        "ingested_at": utc_now(), "file_sha256": digest,
        "unrated_pairs": sorted(set(by_pair) - {r.pair for r in given.rows}),
        "ratings": recorded, "summary": _summary(recorded)})
    events = run / EVENTS_FILE
    if not events.is_file():
        raise ReviewError(f"{run.name}: no {EVENTS_FILE}; the evidence cannot take an addition")
    section = {"key": "human_evaluation",
               "value": [*(e.json_dict() for e in earlier), entry.json_dict()]}
    # Refused before it is appended when it is not its record (the log would not rebuild).
    payload("section", json.loads(json.dumps(section)), f"{run.name}: human_evaluation")
    log = EventLog(events)
    log.seq = sum(1 for _ in read_events(events))
    log.append("section", section, utc_now())
    rebuilt = rebuild(run)
    atomic_write(run / EVIDENCE_FILE, bundle_text(rebuilt))
    atomic_write(folder / "results.html", results_page(rebuilt))
    return entry
