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
import html
import json
import os
import secrets
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .campaign import TRACK_IDS
from .errors import Ref2VAError
from .evidence_log import EVENTS_FILE, EVIDENCE_FILE, EventLog, read_events, rebuild, utc_now
from .safe_write import atomic_write
from .sanitize import Sanitizer

__all__ = ["RATINGS_SCHEMA", "Pair", "ReviewError", "ingest", "pairs", "write_review"]

RATINGS_SCHEMA = "ref2va-ratings/1"
KEY_SCHEMA = "ref2va-review-key/1"
SIDES = ("A", "B")
PREFERRED = ("A", "B", "same")
DIFFERENCES = ("none", "minor", "major")
# Which outputs a pair shows, best first: the quality gate's, else the timed ones.
KINDS = ("quality", "measured")
NOTES_LIMIT = 2000


class ReviewError(Ref2VAError):
    """A run that cannot be reviewed, or ratings that cannot be ingested (one line, what and
    where)."""


@dataclass(frozen=True)
class Pair:
    pair: str  # p01, p02, ... in track, candidate and seed order
    track: str
    candidate: str
    seed: int
    kind: str  # which outputs: quality or measured
    b0: str  # run-relative media files
    candidate_file: str


def _load(run: Path) -> dict[str, Any]:
    file = run / EVIDENCE_FILE
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReviewError(f"{run.name}: no {EVIDENCE_FILE} (not a run folder)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReviewError(f"{run.name}/{EVIDENCE_FILE}: cannot be read ({exc})") from None
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith("ref2va-evidence/"):
        raise ReviewError(f"{run.name}/{EVIDENCE_FILE}: not a ref2va evidence bundle")
    return data


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
    order = list(TRACK_IDS)
    judged.sort(key=lambda tc: (order.index(tc[0]) if tc[0] in order else len(order)))
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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
                    "sha256": {side: _sha256(folder / clips[side]) for side in SIDES}})
        shown.append((pair, clips))
    fps = _fps(data)
    atomic_write(folder / "key.json", json.dumps(
        {"schema": KEY_SCHEMA, "review_id": review_id, "run_id": data.get("run_id"),
         "pairs": key}, indent=2) + "\n")
    template = _template(review_id, str(data.get("run_id")), found)
    atomic_write(folder / "ratings.json", json.dumps(template, indent=2) + "\n")
    page = folder / "index.html"
    atomic_write(page, _page(data, review_id, shown, missing, fps, template))
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


_STYLE = ("body{font-family:sans-serif;margin:16px;max-width:1500px}"
          ".pair{border:1px solid #d0d7de;padding:10px;margin:12px 0}"
          ".sides{display:flex;gap:12px}.side{flex:1}.side video{width:100%;background:#000;"
          "image-rendering:pixelated}.bar{margin:6px 0}.bar input[type=range]{width:60%}"
          "label{margin-right:10px}")

# Both videos of a pair follow one control bar; B follows A within one frame.
_SCRIPT = """
const FPS = %s;
function pairOf(el) { return el.closest('.pair'); }
function vids(p) { return [p.querySelector('video.A'), p.querySelector('video.B')]; }
function follow(p) {
  const [a, b] = vids(p);
  if (Math.abs(b.currentTime - a.currentTime) > 1 / FPS) b.currentTime = a.currentTime;
  const pos = p.querySelector('input.pos');
  if (a.duration) pos.value = String(a.currentTime / a.duration);
  p.querySelector('.time').textContent = a.currentTime.toFixed(2) + ' s';
}
function act(btn, what) {
  const p = pairOf(btn), [a, b] = vids(p);
  if (what === 'play') { a.play(); b.play(); }
  if (what === 'pause') { a.pause(); b.pause(); follow(p); }
  if (what === 'back' || what === 'next') {
    a.pause(); b.pause();
    a.currentTime = Math.max(0, a.currentTime + (what === 'next' ? 1 : -1) / FPS);
    b.currentTime = a.currentTime;
  }
}
function seek(input) {
  const p = pairOf(input), [a, b] = vids(p);
  if (!a.duration) return;
  a.currentTime = Number(input.value) * a.duration;
  b.currentTime = a.currentTime;
}
function hear(input) {
  const p = pairOf(input), [a, b] = vids(p);
  a.muted = input.value !== 'A'; b.muted = input.value !== 'B';
}
document.querySelectorAll('.pair').forEach(p => {
  const [a, b] = vids(p);
  a.addEventListener('timeupdate', () => follow(p));
  a.addEventListener('seeked', () => follow(p));
  a.addEventListener('ended', () => b.pause());
});
function ratings() {
  const out = JSON.parse(document.getElementById('template').textContent);
  out.reviewer = document.getElementById('reviewer').value;
  for (const r of out.ratings) {
    const p = document.getElementById(r.pair);
    for (const field of ['preferred', 'visible_differences', 'audio_differences']) {
      const chosen = p.querySelector('input[name="' + r.pair + '-' + field + '"]:checked');
      r[field] = chosen ? chosen.value : null;
    }
    r.notes = p.querySelector('textarea').value;
  }
  return out;
}
function save() {
  const blob = new Blob([JSON.stringify(ratings(), null, 2) + '\\n'], {type: 'application/json'});
  const link = document.createElement('a');
  link.href = URL.createObjectURL(blob);
  link.download = 'ratings.json';
  link.click();
}
"""


def _choices(pair: str, field: str, values: Sequence[str]) -> str:
    return "".join(f"<label><input type='radio' name='{pair}-{field}' value='{v}'> {v}</label>"
                   for v in values)


def _page(data: Mapping[str, Any], review_id: str, shown: Sequence[tuple[Pair, dict[str, str]]],
          missing: Sequence[str], fps: float, template: Mapping[str, Any]) -> str:
    run_id = html.escape(str(data.get("run_id")))
    blocks = []
    for pair, clips in shown:
        p = pair.pair
        videos = "".join(
            f"<div class='side'><b>{side}</b><br><video class='{side}' src='{clips[side]}' "
            f"preload='auto' playsinline{' muted' if side == 'B' else ''}></video></div>"
            for side in SIDES)
        blocks.append(
            f"<div class='pair' id='{p}'><h3>{p}: {html.escape(pair.track)}, "
            f"{html.escape(pair.candidate)} against B0, seed {pair.seed}</h3>"
            f"<div class='sides'>{videos}</div>"
            "<div class='bar'><button onclick=\"act(this,'play')\">play</button> "
            "<button onclick=\"act(this,'pause')\">pause</button> "
            "<button onclick=\"act(this,'back')\">&#9664; frame</button> "
            "<button onclick=\"act(this,'next')\">frame &#9654;</button> "
            "<input class='pos' type='range' min='0' max='1' step='0.001' value='0' "
            "oninput='seek(this)'> <span class='time'>0.00 s</span></div>"
            f"<div class='bar'>hear: <label><input type='radio' name='{p}-hear' value='A' "
            "checked onchange='hear(this)'> A</label><label><input type='radio' "
            f"name='{p}-hear' value='B' onchange='hear(this)'> B</label></div>"
            f"<div class='bar'>preferred: {_choices(p, 'preferred', PREFERRED)}</div>"
            f"<div class='bar'>visible differences: "
            f"{_choices(p, 'visible_differences', DIFFERENCES)}</div>"
            f"<div class='bar'>audio differences: "
            f"{_choices(p, 'audio_differences', DIFFERENCES)}</div>"
            "<div class='bar'><textarea rows='2' cols='100' placeholder='notes'></textarea>"
            "</div></div>")
    gaps = "".join(f"<li>{html.escape(line)}</li>" for line in missing)
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Ref2VA review sheet</title>"
        f"<style>{_STYLE}</style></head><body><h1>Ref2VA review sheet</h1>"
        f"<p>Run {run_id}, review {review_id}. Each pair is B0 and a candidate, the same seed, "
        "shown as A and B in a random order: which side is B0 is not on this page. Play, pause, "
        "seek and step move both sides together; you hear one side at a time. Rate each pair, "
        "then save the ratings and hand the file back (<code>ref2va-accept review RUN --ingest "
        "ratings.json</code>). These ratings are human evaluation, reported apart from the "
        "automatic gates; they change no verdict.</p>"
        + (f"<p>Not shown:</p><ul>{gaps}</ul>" if gaps else "")
        + "<p>reviewer (an alias or a role, not a login name): <input id='reviewer' size='30'> "
        "<button onclick='save()'>save ratings.json</button></p>"
        + "".join(blocks)
        + "<script type='application/json' id='template'>"
        + json.dumps(template).replace("</", "<\\/") + "</script>"
        + f"<script>{_SCRIPT % json.dumps(fps)}</script></body></html>\n")


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
    rows = _check_ratings(_read_json(ratings_file, "ratings file"), key, ratings_file.name)
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
    ratings = _read_json(ratings_file, "ratings file")
    entry = {"review_id": key["review_id"], "reviewer": sanitizer.text(ratings["reviewer"]),
             "ingested_at": utc_now(), "file_sha256": digest,
             "unrated_pairs": sorted(set(by_pair) - {r["pair"] for r in rows}),
             "ratings": recorded, "summary": _summary(recorded)}
    events = run / EVENTS_FILE
    if not events.is_file():
        raise ReviewError(f"{run.name}: no {EVENTS_FILE}; the evidence cannot take an addition")
    log = EventLog(events)
    log.seq = sum(1 for _ in read_events(events))
    log.append("section", {"key": "human_evaluation", "value": [*earlier, entry]}, utc_now())
    bundle = rebuild(run)
    atomic_write(run / EVIDENCE_FILE, json.dumps(bundle, indent=2, sort_keys=False) + "\n")
    atomic_write(folder / "results.html", results_page(bundle))
    return entry


def results_page(bundle: Mapping[str, Any]) -> str:
    """Every rating set in the run's evidence, unblinded (which side was B0 is resolved): the
    human evaluation, apart from the automatic gates' verdicts, which it does not change."""
    verdicts = {(str(v.get("track")), str(v.get("candidate"))): str(v.get("verdict"))
                for v in bundle.get("verdicts") or []}
    sections = []
    for entry in bundle.get("human_evaluation") or []:
        rows = "".join(
            f"<tr><td>{html.escape(r['track'])}</td><td>{html.escape(r['candidate'])}</td>"
            f"<td>{html.escape(verdicts.get((r['track'], r['candidate']), '-').upper())}</td>"
            f"<td>{r['rated']} of {r['pairs']}</td><td>{r['preferred']['b0']}</td>"
            f"<td>{r['preferred']['candidate']}</td><td>{r['preferred']['same']}</td>"
            f"<td>{html.escape(_counts(r.get('visible_differences')))}</td>"
            f"<td>{html.escape(_counts(r.get('audio_differences')))}</td></tr>"
            for r in entry["summary"])
        notes = "".join(f"<li>{html.escape(r['pair'])} ({html.escape(r['candidate'])}, seed "
                        f"{r['seed']}): {html.escape(r['notes'])}</li>"
                        for r in entry["ratings"] if r["notes"])
        sections.append(
            f"<h2>Review {html.escape(entry['review_id'])} by {html.escape(entry['reviewer'])}"
            f"</h2><p>ingested {html.escape(entry['ingested_at'])}"
            + (f"; not rated: {html.escape(', '.join(entry['unrated_pairs']))}"
               if entry["unrated_pairs"] else "") + "</p>"
            "<table border='1' cellpadding='4' style='border-collapse:collapse'><tr>"
            "<th>track</th><th>candidate</th><th>automatic verdict</th><th>rated pairs</th>"
            "<th>preferred B0</th><th>preferred candidate</th><th>same</th>"
            "<th>visible differences</th><th>audio differences</th></tr>" + rows + "</table>"
            + (f"<p>Notes:</p><ul>{notes}</ul>" if notes else ""))
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>Ref2VA human evaluation"
            "</title></head><body style='font-family:sans-serif'><h1>Ref2VA human evaluation</h1>"
            f"<p>Run {html.escape(str(bundle.get('run_id')))}. Ratings from the blind review "
            "sheet, with B0 and candidate resolved from its key. They are reported apart from "
            "the automatic gates and change no verdict (the automatic verdict is shown beside "
            "them for reading, not combined).</p>" + "".join(sections) + "</body></html>\n")


def _counts(counts: Mapping[str, int] | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in (counts or {}).items()) or "-"
