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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .campaign import track_rank
from .errors import Ref2VAError
from .evidence_log import (
    EVENTS_FILE,
    EVIDENCE_FILE,
    EventLog,
    payload,
    read_bundle_file_transitional,
    read_events,
    rebuild,
    utc_now,
)
from .hashing import file_sha256
from .records import bundle_text, transitional_dict
from .review_pages import DIFFERENCES, PREFERRED, SIDES, Pair, results_page, sheet_page
from .safe_write import atomic_write
from .sanitize import Sanitizer

__all__ = ["RATINGS_SCHEMA", "ReviewError", "ingest", "pairs", "write_review"]

RATINGS_SCHEMA = "ref2va-ratings/1"
KEY_SCHEMA = "ref2va-review-key/1"
# Which outputs a pair shows, best first: the quality gate's, else the timed ones.
KINDS = ("quality", "measured")
NOTES_LIMIT = 2000


class ReviewError(Ref2VAError):
    """A run that cannot be reviewed, or ratings that cannot be ingested (one line, what and
    where)."""


def _load(run: Path) -> dict[str, Any]:
    return read_bundle_file_transitional(run, ReviewError)[1]


def _outputs(data: Mapping[str, Any]) -> dict[tuple[str, str, int, str], str]:
    """(track, arm, seed, kind) -> the first complete output's media file."""
    found: dict[tuple[str, str, int, str], str] = {}
    for sample in data.get("samples") or []:
        if not sample.get("ok") or not sample.get("media_file") or sample.get("seed") is None:
            continue
        key = (str(sample.get("track")), str(sample.get("arm")), int(sample["seed"]),
               str(sample.get("kind")))
        found.setdefault(key, str(sample["media_file"]))
    return found


def pairs(data: Mapping[str, Any]) -> tuple[list[Pair], list[str]]:
    """Every (track, candidate, seed) with a complete output of both B0 and the candidate, and a
    line for each candidate of the run's verdicts that has none (so the sheet says so)."""
    outputs = _outputs(data)
    judged = [(str(v.get("track")), str(v.get("candidate"))) for v in data.get("verdicts") or []
              if v.get("candidate")]
    judged.sort(key=lambda tc: track_rank(tc[0]))
    found: list[Pair] = []
    missing: list[str] = []
    for track, candidate in judged:
        seeds = sorted({seed for (t, arm, seed, kind) in outputs
                        if t == track and arm == candidate and kind in KINDS})
        shown = 0
        for seed in seeds:
            for kind in KINDS:
                b0 = outputs.get((track, "b0", seed, kind))
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
    data = _load(run)
    found, missing = pairs(data)
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
    fps = _fps(data)
    atomic_write(folder / "key.json", json.dumps(
        {"schema": KEY_SCHEMA, "review_id": review_id, "run_id": data.get("run_id"),
         "pairs": key}, indent=2) + "\n")
    template = _template(review_id, str(data.get("run_id")), found)
    atomic_write(folder / "ratings.json", json.dumps(template, indent=2) + "\n")
    page = folder / "index.html"
    atomic_write(page, sheet_page(data, review_id, shown, missing, fps, template))
    return page


def _fps(data: Mapping[str, Any]) -> float:
    for entry in data.get("media") or []:
        fps = ((entry.get("probe") or {}).get("video") or {}).get("fps")
        if fps:
            return float(fps)
    return 24.0


def _template(review_id: str, run_id: str, found: Sequence[Pair]) -> dict[str, Any]:
    return {"schema": RATINGS_SCHEMA, "review_id": review_id, "run_id": run_id,
            "reviewer": "",
            "ratings": [{"pair": p.pair, "preferred": None, "visible_differences": None,
                         "audio_differences": None, "notes": ""} for p in found]}


# -- ingesting -----------------------------------------------------------------------------------
def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReviewError(f"{path.name}: no such {what}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReviewError(f"{path.name}: not a readable {what} ({exc})") from None


def _check_ratings(ratings: Any, key: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    if not isinstance(ratings, dict) or ratings.get("schema") != RATINGS_SCHEMA:
        raise ReviewError(f"{name}: not a ratings file (schema {RATINGS_SCHEMA} expected)")
    for field in ("review_id", "run_id"):
        if ratings.get(field) != key.get(field):
            raise ReviewError(f"{name}: {field} {ratings.get(field)!r} is not this sheet's "
                              f"({key.get(field)!r}): ratings answer the sheet they came with")
    reviewer = ratings.get("reviewer")
    if not isinstance(reviewer, str) or not reviewer.strip():
        raise ReviewError(f"{name}: reviewer: an alias or a role is needed (who rated, for "
                          "the record)")
    rows = ratings.get("ratings")
    if not isinstance(rows, list):
        raise ReviewError(f"{name}: ratings: a list of pairs expected")
    known = {p["pair"] for p in key["pairs"]}
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
        checked.append(dict(row))
    return checked


def _summary(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["track"], row["candidate"]), []).append(row)
    out = []
    for (track, candidate), members in groups.items():
        rated = [r for r in members if r["preferred"] is not None
                 or r["visible_differences"] is not None or r["audio_differences"] is not None]
        preferred = Counter(r["preferred"] for r in rated if r["preferred"] is not None)
        out.append({"track": track, "candidate": candidate, "pairs": len(members),
                    "rated": len(rated),
                    "preferred": {v: preferred.get(v, 0) for v in ("b0", "candidate", "same")},
                    "visible_differences": dict(Counter(
                        r["visible_differences"] for r in rated
                        if r["visible_differences"] is not None)),
                    "audio_differences": dict(Counter(
                        r["audio_differences"] for r in rated
                        if r["audio_differences"] is not None))})
    return out


def ingest(run: Path, ratings_file: Path, review: Path | None = None) -> dict[str, Any]:
    """Ratings for a sheet of ``run`` (default RUN/review) into the run's evidence; returns the
    rating set as recorded."""
    data = _load(run)
    folder = review or run / "review"
    key = _read_json(folder / "key.json", "review key")
    if not isinstance(key, dict) or key.get("schema") != KEY_SCHEMA:
        raise ReviewError(f"{folder.name}/key.json: not a review key ({KEY_SCHEMA} expected)")
    if key.get("run_id") != data.get("run_id"):
        raise ReviewError(f"{folder.name}/key.json: a sheet of run {key.get('run_id')}, not of "
                          f"{data.get('run_id')}")
    raw = ratings_file.read_bytes() if ratings_file.is_file() else None
    if raw is None:
        raise ReviewError(f"{ratings_file.name}: no such ratings file")
    digest = hashlib.sha256(raw).hexdigest()
    earlier = list(data.get("human_evaluation") or [])
    if any(entry.get("file_sha256") == digest for entry in earlier):
        raise ReviewError(f"{ratings_file.name}: these ratings are in the evidence already")
    try:
        ratings = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReviewError(f"{ratings_file.name}: not a readable ratings file ({exc})") from None
    rows = _check_ratings(ratings, key, ratings_file.name)
    by_pair = {p["pair"]: p for p in key["pairs"]}
    sanitizer = Sanitizer.for_this_host(evidence=run.parent)
    recorded = []
    for row in rows:
        pair = by_pair[row["pair"]]
        side = row.get("preferred")
        preferred = (None if side is None else "same" if side == "same"
                     else "b0" if side == pair["b0_side"] else "candidate")
        recorded.append({"pair": pair["pair"], "track": pair["track"],
                         "candidate": pair["candidate"], "seed": pair["seed"],
                         "kind": pair["kind"], "preferred": preferred,
                         "visible_differences": row.get("visible_differences"),
                         "audio_differences": row.get("audio_differences"),
                         "notes": sanitizer.text(str(row.get("notes") or ""))})
    entry = {"review_id": key["review_id"], "reviewer": sanitizer.text(ratings["reviewer"]),
             "ingested_at": utc_now(), "file_sha256": digest,
             "unrated_pairs": sorted(set(by_pair) - {r["pair"] for r in rows}),
             "ratings": recorded, "summary": _summary(recorded)}
    events = run / EVENTS_FILE
    if not events.is_file():
        raise ReviewError(f"{run.name}: no {EVENTS_FILE}; the evidence cannot take an addition")
    section = {"key": "human_evaluation", "value": [*earlier, entry]}
    # Refused before it is appended when it is not its record (the log would not rebuild).
    payload("section", json.loads(json.dumps(section)), f"{run.name}: human_evaluation")
    log = EventLog(events)
    log.seq = sum(1 for _ in read_events(events))
    log.append("section", section, utc_now())
    bundle = rebuild(run)
    atomic_write(run / EVIDENCE_FILE, bundle_text(bundle))
    atomic_write(folder / "results.html", results_page(transitional_dict(bundle)))
    return entry
