"""What single observations of the server say: the rows read from one request or one look
(the Cache-DiT server's requests, the too-short audio, the dumps, the 15 s request, MindIE-SD's
import), as plain functions of what the steps recorded.

Each row is confirmed only by the event its question asks about, seen in this run: anything
else is `not_checked` with the reason, or `contradicted` with the value seen.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ref2va_accept.arms import Outcome
from ref2va_accept.bringup._records import ServerBounds
from ref2va_accept.bringup._rows import BOUND_HEADROOM, confirmed, contradicted, not_checked
from ref2va_accept.bringup._state import PolicyRun, cache_of
from ref2va_accept.bringup._step_schedule import CacheSteps
from ref2va_accept.evidence import BringupRow
from ref2va_contract.diagnostics import CACHE_DIT_PATH, ENABLED_PATH_FILE

# A collective refused for its averaging op, however the backend words it: "ReduceOp.AVG",
# "RedOpType=AVG", "op=AVG", "(AVG)"; not a longer word that contains it (AVERAGE, AVGPOOL).
AVG_OP = re.compile(r"(?<![A-Za-z0-9])AVG(?![A-Za-z0-9])")
# H3's answer to a reference audio outside its bounds (reference_video.py, an OmniClientError:
# HTTP 400): "reference audio 0 duration must be in [2, 15] seconds, got 1.000".
H3_DURATION_WORDS = re.compile(
    r"reference audio \d+ duration must be in \[2, 15\] seconds, got (?P<got>\S+?)(?=[\"',}\s]|$)")
SHORT_AUDIO_S = 1.0  # the too-short reference audio the bring-up sends (probes.short_wav)
# A request that failed this close to a server bound was cut by it.
AT_BOUND = 0.98


def avg_refusal(*texts: str) -> str | None:
    """The first line of `texts` that names the AVG reduce op, or None."""
    for text in texts:
        for line in text.splitlines():
            if AVG_OP.search(line):
                return line.strip()
    return None


# -- the Cache-DiT server ------------------------------------------------------------------------

def cache_rows(runs: Mapping[str, Outcome], paths: Mapping[str, dict[str, Any] | None],
               log_text: str, steps: CacheSteps | None) -> list[BringupRow]:
    """cache_dit_avg, cache_dit_reset and lossless_no_cache from the Cache-DiT server's
    requests ("first", "second": identical; "lossless"), their enabled paths and its log."""
    first, second, lossless = (runs.get(k) for k in ("first", "second", "lossless"))
    asked = steps.line() if steps is not None else "the track's steps"
    return [_avg_row(first, paths.get("first"), log_text, asked),
            _reset_row(first, second, paths, asked),
            _lossless_row(lossless, paths.get("lossless"), paths.get("first"))]


def _avg_row(first: Outcome | None, path: dict[str, Any] | None, log_text: str,
             asked: str) -> BringupRow:
    if first is None:
        return not_checked("cache_dit_avg", "the first Cache-DiT request was not sent")
    if not first.sample.ok:
        said = first.explain()
        refusal = avg_refusal(said, log_text)
        if refusal is not None:
            return contradicted("cache_dit_avg", f"refused: {refusal[:240]}")
        return not_checked("cache_dit_avg", "the first Cache-DiT request failed, naming no AVG "
                           f"reduce op (the averaging all_reduce was not seen): {said[:240]}")
    if path is None:
        return not_checked("cache_dit_avg", f"the first Cache-DiT request wrote no "
                           f"{ENABLED_PATH_FILE}: its cached steps were not seen")
    cache = cache_of(path)
    backend, reused = cache.backend, cache.reused_steps
    if backend == "none":
        return contradicted("cache_dit_avg", f"the Cache-DiT server ran no cache "
                            f"({ENABLED_PATH_FILE}: cache backend none; {asked})")
    if backend != CACHE_DIT_PATH:
        return not_checked("cache_dit_avg", f"{ENABLED_PATH_FILE} names the cache backend "
                           f"{backend!r}, not {CACHE_DIT_PATH}")
    if not reused:
        return not_checked("cache_dit_avg", f"no step was cached ({asked}): Cache-DiT "
                           "averages with all_reduce(op=AVG) only past its warm-up, on the "
                           "steps it tests for caching; nothing shows that it ran")
    return confirmed("cache_dit_avg", f"the request succeeded with {len(reused)} cached "
                     f"step(s) {reused}; {asked}")


def _reset_row(first: Outcome | None, second: Outcome | None,
               paths: Mapping[str, dict[str, Any] | None], asked: str) -> BringupRow:
    if first is None or second is None or not (first.complete and second.complete):
        said = "; ".join(o.explain() for o in (first, second) if o is not None) or "not sent"
        return not_checked("cache_dit_reset", "the two identical requests did not both "
                           f"complete: {said[:240]}")
    if paths.get("first") is None or paths.get("second") is None:
        return not_checked("cache_dit_reset", f"a request wrote no {ENABLED_PATH_FILE}: its "
                           "cached steps were not seen")
    a, b = cache_of(paths["first"]).reused_steps, cache_of(paths["second"]).reused_steps
    same_bytes = first.sample.sha256 == second.sample.sha256
    if not a and not b:
        return not_checked("cache_dit_reset", f"neither request cached a step ({asked}): there "
                           "was nothing to reset")
    if a == b and same_bytes:
        return confirmed("cache_dit_reset", f"the same {len(a)} cached step(s) {a} and the same "
                         "bytes in both requests")
    return contradicted("cache_dit_reset", f"cached steps {a} then {b}; bytes "
                        + ("equal" if same_bytes else "differ"))


def _lossless_row(lossless: Outcome | None, path: dict[str, Any] | None,
                  plain: dict[str, Any] | None) -> BringupRow:
    if lossless is None or not lossless.complete:
        return not_checked("lossless_no_cache", "the quality=lossless request did not "
                           "complete: " + (lossless.explain() if lossless else "not sent"))
    if path is None:
        return not_checked("lossless_no_cache", f"the quality=lossless request wrote no "
                           f"{ENABLED_PATH_FILE}: its cache was not seen")
    cache, plain_cache = cache_of(path), cache_of(plain)
    if cache.backend != "none" or cache.reused_steps:
        return contradicted("lossless_no_cache", f"cache backend {cache.backend}, cached steps "
                            f"{cache.reused_steps}")
    if plain_cache.backend != CACHE_DIT_PATH:
        return not_checked("lossless_no_cache", "the lossless request ran no cache, but the "
                           f"plain request did not run Cache-DiT either (backend "
                           f"{plain_cache.backend}): the switch was not seen")
    return confirmed("lossless_no_cache", f"{ENABLED_PATH_FILE}: cache backend none, no cached "
                     f"step (the plain request: {CACHE_DIT_PATH}, "
                     f"{len(plain_cache.reused_steps)} cached)")


# -- the too-short reference audio ---------------------------------------------------------------

def _message(detail: str) -> str:
    """The error's message where the body is a JSON error object, else the text as it came."""
    try:
        body = json.loads(detail)
    except ValueError:
        return detail
    found: Any = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(found, dict):
        found = found.get("message", found.get("detail", found))
    return found if isinstance(found, str) else detail


def bad_audio_row(status: int | None, detail: str, failure: str | None,
                  sent_s: float = SHORT_AUDIO_S) -> BringupRow:
    """bad_audio_400 from the answer to a `sent_s` reference audio: HTTP 400 in H3's words,
    naming its [2, 15] s bound and the duration it read."""
    said = _message(detail)
    if status is None:
        return not_checked("bad_audio_400", f"no answer to the {sent_s:g} s reference audio "
                           f"({failure}): {said[:200]}")
    if status == 400:
        found = H3_DURATION_WORDS.search(said)
        if found is None:
            return contradicted("bad_audio_400", "HTTP 400, but not in H3's words (\"reference "
                                f"audio 0 duration must be in [2, 15] seconds, got ...\"): "
                                f"{said[:200]}")
        try:
            got = float(found["got"].rstrip("."))
        except ValueError:
            got = float("nan")
        if not abs(got - sent_s) <= 0.05:
            return contradicted("bad_audio_400", f"HTTP 400: {found[0]}: the server read "
                                f"{found['got']} s of a {sent_s:.3f} s audio")
        return confirmed("bad_audio_400", f"HTTP 400: {found[0]}")
    if status == 200:
        return contradicted("bad_audio_400", f"HTTP 200: the server accepted a {sent_s:.3f} s "
                            "reference audio")
    hint = ""
    if "ffprobe" in said.lower():
        hint = " (ffprobe is missing or fails where the server runs: H3 runs it with " \
               "check=True on every reference audio)"
    elif status == 500:
        hint = " (H3 answers so when its ffprobe call fails, e.g. no ffprobe on the server's " \
               "PATH)"
    return contradicted("bad_audio_400", f"HTTP {status}: {said[:200]}{hint}")


# -- B0's dumps and the 15 s request --------------------------------------------------------------

def dump_owner_row(run: PolicyRun | None) -> BringupRow:
    if run is None or not run.served:
        return not_checked("dump_owner", "no B0 request completed")
    path = run.enabled_path
    if path is None:
        return contradicted("dump_owner", f"no {ENABLED_PATH_FILE} in the request's dump folder")
    rank = path.get("rank")
    if run.dump_folders != 1:
        return contradicted("dump_owner", f"{run.dump_folders} dump folder(s), rank {rank}")
    if rank is None:
        return not_checked("dump_owner", f"one dump folder, but its {ENABLED_PATH_FILE} names "
                           "no rank: the writer was not seen")
    if rank != 0:
        return contradicted("dump_owner", f"one dump folder, written by rank {rank}")
    return confirmed("dump_owner", "one dump folder, rank 0")


def dump_time_row(run: PolicyRun | None, long: Outcome | None, long_path: dict[str, Any] | None,
                  bounds: ServerBounds, has_15s: bool, scale: float) -> BringupRow:
    """dump_time: a completed B0 request with its points inside the server bound, from the
    15 s request when the campaign has one (its own dump measured, or the 5 s one scaled by
    frames); never from an estimate."""
    if run is None or not run.served or run.request is None:
        return not_checked("dump_time", "no B0 request completed")
    seconds = (run.enabled_path or {}).get("dump_seconds")
    if seconds is None:
        return not_checked("dump_time", f"{ENABLED_PATH_FILE} has no dump_seconds")
    dump_5 = float(seconds)
    bound = bounds.tightest
    if bound is None or bound.seconds is None:
        return not_checked("dump_time", bounds.line())
    limit = bound.seconds
    if not has_15s:
        own = run.request.sample.latency_s or 0.0
        seen = (f"the 5 s request with its points {own:.1f} s (their dump {dump_5:.1f} s) "
                f"against {bounds.line()}")
        return (confirmed if own < limit else contradicted)("dump_time", seen)
    if long is None:
        return not_checked("dump_time", "the 15 s request was not sent: a 15 s request with "
                           f"its points was not seen (5 s points: {dump_5:.1f} s)")
    latency = long.sample.latency_s
    if not long.complete or latency is None:
        return not_checked("dump_time", "the 15 s request did not complete "
                           f"({long.explain()[:160]}): a 15 s request with its points was not "
                           f"seen (5 s points: {dump_5:.1f} s)")
    long_dump = (long_path or {}).get("dump_seconds")
    if long_dump is not None:
        total, part = latency, f"its own dump {float(long_dump):.1f} s inside it"
    else:
        total = latency + dump_5 * scale
        part = (f"{latency:.1f} s plus {dump_5 * scale:.1f} s of points scaled by frames from "
                "the 5 s request's")
    seen = (f"the 15 s request with its points {total:.1f} s ({part}) against {bounds.line()}; "
            f"5 s points: {dump_5:.1f} s")
    return (confirmed if total < limit else contradicted)("dump_time", seen)


def long_rows(long: Outcome | None, client_s: float | None, bounds: ServerBounds,
              has_15s: bool) -> list[BringupRow]:
    """wave_timeout and first_15s_bound from the untimed 15 s request, against the client
    timeout and the server bound as the server saw it."""
    rows = ("wave_timeout", "first_15s_bound")
    if not has_15s:
        return [not_checked(r, "the campaign has no 15 s track") for r in rows]
    if long is None:
        return [not_checked(r, "no B0 server served its 5 s request, so the 15 s request was "
                            "not sent") for r in rows]
    bound = bounds.tightest
    if bound is None or bound.seconds is None or client_s is None:
        why = bounds.line() if bound is None else "the client timeout was not read"
        return [not_checked(r, why) for r in rows]
    limit, where = bound.seconds, bounds.line()
    sample = long.sample
    latency = sample.latency_s
    if sample.ok and latency is not None:
        inside = latency < client_s and latency < limit
        wave = (confirmed if inside else contradicted)(
            "wave_timeout", f"{latency:.1f} s, {'inside' if inside else 'not inside'} the "
            f"client timeout {client_s:g} s and {where}")
        clear = latency <= BOUND_HEADROOM * limit
        first = (confirmed if clear else contradicted)(
            "first_15s_bound", f"{latency:.1f} s is {latency / limit:.0%} of {where} (clear "
            f"up to {BOUND_HEADROOM:.0%})")
        return [wave, first]
    said = long.explain()[:200]
    if sample.failure == "timeout":
        wave = contradicted("wave_timeout", f"no answer within the client timeout "
                            f"{client_s:g} s ({where}): {said}")
        if client_s >= BOUND_HEADROOM * limit:
            first = contradicted("first_15s_bound", f"no answer within {client_s:g} s, "
                                 f"{client_s / limit:.0%} of {where}")
        else:
            first = not_checked("first_15s_bound", f"the client gave up at {client_s:g} s, "
                                f"{client_s / limit:.0%} of {where}: whether the request stays "
                                "clear of the bound was not seen")
        return [wave, first]
    if latency is not None and latency >= AT_BOUND * limit:
        cut = f"failed after {latency:.1f} s, at {where}: {said}"
        return [contradicted("wave_timeout", cut), contradicted("first_15s_bound", cut)]
    after = "" if latency is None else f"after {latency:.1f} s, "
    before = (f"the 15 s request failed {after}before the client timeout {client_s:g} s and "
              f"{where}: the bounds were not reached ({said})")
    return [not_checked(r, before) for r in rows]


# -- MindIE-SD -------------------------------------------------------------------------------------

def mindiesd_row(seen: str) -> BringupRow:
    """The mindiesd row from the preflight's `import mindiesd` where the server runs, worded as
    vLLM-Omni 0.30.0's NPU platform behaves (platforms/npu/platform.py): with MindIE-SD
    installed, selecting FLASH_ATTN imports it at start-up; absent, FLASH_ATTN is chosen anyway
    and fails at the first attention call."""
    if seen == "importable":
        return confirmed("mindiesd", "import mindiesd works where the server runs (the NPU "
                         "platform imports it at start-up, selecting FLASH_ATTN)")
    fix = "pin TORCH_SDPA in every profile (the patch does)"
    if "No module named 'mindiesd'" in seen:
        return contradicted("mindiesd", "MindIE-SD is not installed where the server runs: a "
                            "server pinned to FLASH_ATTN starts and fails at the first "
                            f"attention call ({seen})", fix)
    return contradicted("mindiesd", "MindIE-SD is installed but does not import: a server "
                        "pinned to FLASH_ATTN stops at start-up, during backend selection "
                        f"({seen})", fix)
