"""The review sheet's pages (history/_review.py makes the sheet and ingests its ratings): the blind
page with its controls and form, and the unblinded results of the ratings ingested so far."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ref2va_accept.evidence import Bundle, Difference

__all__ = ["DIFFERENCES", "PREFERRED", "SIDES", "Pair", "results_page", "sheet_page"]

SIDES = ("A", "B")
PREFERRED = ("A", "B", "same")
DIFFERENCES = ("none", "minor", "major")


@dataclass(frozen=True)
class Pair:
    pair: str  # p01, p02, ... in track, candidate and seed order
    track: str
    candidate: str
    seed: int
    kind: str  # which outputs: quality or measured
    b0: str  # run-relative media files
    candidate_file: str


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


def sheet_page(bundle: Bundle, review_id: str,
               shown: Sequence[tuple[Pair, dict[str, str]]], missing: Sequence[str], fps: float,
               template: Mapping[str, Any]) -> str:
    """The blind sheet: per pair both clips, one control bar, the rating form; the ratings
    template inline for the form's save button."""
    run_id = html.escape(bundle.run_id)
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


def results_page(bundle: Bundle) -> str:
    """Every rating set in the run's evidence, unblinded (which side was B0 is resolved): the
    human evaluation, apart from the automatic gates' verdicts, which it does not change."""
    verdicts = {(v.track, str(v.candidate)): v.verdict.value for v in bundle.verdicts}
    sections = []
    for entry in bundle.human_evaluation or []:
        rows = "".join(
            f"<tr><td>{html.escape(r.track)}</td><td>{html.escape(r.candidate)}</td>"
            f"<td>{html.escape(verdicts.get((r.track, r.candidate), '-').upper())}</td>"
            f"<td>{r.rated} of {r.pairs}</td><td>{r.preferred['b0']}</td>"
            f"<td>{r.preferred['candidate']}</td><td>{r.preferred['same']}</td>"
            f"<td>{html.escape(_counts(r.visible_differences))}</td>"
            f"<td>{html.escape(_counts(r.audio_differences))}</td></tr>"
            for r in entry.summary)
        notes = "".join(f"<li>{html.escape(r.pair)} ({html.escape(r.candidate)}, seed "
                        f"{r.seed}): {html.escape(r.notes)}</li>"
                        for r in entry.ratings if r.notes)
        sections.append(
            f"<h2>Review {html.escape(entry.review_id)} by {html.escape(entry.reviewer)}"
            f"</h2><p>ingested {html.escape(entry.ingested_at)}"
            + (f"; not rated: {html.escape(', '.join(entry.unrated_pairs))}"
               if entry.unrated_pairs else "") + "</p>"
            "<table border='1' cellpadding='4' style='border-collapse:collapse'><tr>"
            "<th>track</th><th>candidate</th><th>automatic verdict</th><th>rated pairs</th>"
            "<th>preferred B0</th><th>preferred candidate</th><th>same</th>"
            "<th>visible differences</th><th>audio differences</th></tr>" + rows + "</table>"
            + (f"<p>Notes:</p><ul>{notes}</ul>" if notes else ""))
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>Ref2VA human evaluation"
            "</title></head><body style='font-family:sans-serif'><h1>Ref2VA human evaluation</h1>"
            f"<p>Run {html.escape(bundle.run_id)}. Ratings from the blind review "
            "sheet, with B0 and candidate resolved from its key. They are reported apart from "
            "the automatic gates and change no verdict (the automatic verdict is shown beside "
            "them for reading, not combined).</p>" + "".join(sections) + "</body></html>\n")


def _counts(counts: Mapping[Difference, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in (counts or {}).items()) or "-"
