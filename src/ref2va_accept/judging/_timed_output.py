"""The timed outputs are what was judged for quality (MLPerf TEST01 idea), on both track kinds.

The timed (perf) requests carry no diagnostics and are not scored, so an engine that takes
another path when it is watched or scored would show here: each measured MP4 of the candidate
is compared, frames and audio, with the MP4 of its quality request of the same seed (the watched
one on a lossless track, the scored one on a lossy track). The check is judged once, at verdict
time (`judge_timed_outputs`: a track's verdict scenario, or the run's end), when both sides
have run whatever the order of the scenarios. From the run's typed outcomes, never from the
sanitized evidence.

- Lossless (`timed_output`): every timed MP4 must decode bit-identical to the watched one.
- Lossy (`timed_output_fidelity`): bit-identical passes. Otherwise the timed output may differ
  from the scored one only as far as the lossy contract lets a candidate differ from B0, with
  no extra scoring model: video PSNR (float64, from the mean MSE over frames) at least the
  gate's `min_psnr_db` when frozen, else `DEFAULT_MIN_PSNR_DB`; mean SSIM at least `min_ssim`
  when frozen; audio SNR at least `DEFAULT_MIN_AUDIO_SNR_DB`. Outputs that cannot be compared
  (frame counts, a stream missing, a decode error) differ. docs/quality.md states the rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ref2va_accept.arms import OutcomeLog
from ref2va_accept.core import Check, CheckStatus, MediaError, QualityClass, Reason, Ref2VAError
from ref2va_accept.evidence import AnyCheck, json_number, new_check
from ref2va_accept.judging._decoded import compare_decoded_mp4

if TYPE_CHECKING:
    from ref2va_accept.campaign import LossyGate
    from ref2va_accept.planning import TrackPlan

WATCHED, TIMED = "quality", "measured"
_POINTS = ("mp4.video", "mp4.audio")
# Two runs of one deterministic computation decode identical; a nondeterministic reduction moves
# a few least significant bits, far above 40 dB. An approximate path taken only when unscored
# (cache-dit-mild against B0 sits near 32 dB at 112x64) falls below it.
DEFAULT_MIN_PSNR_DB = 40.0
DEFAULT_MIN_AUDIO_SNR_DB = 40.0


def _identical(reference: Path, path: Path) -> bool:
    try:
        decoded = compare_decoded_mp4(reference, path)
    except MediaError:
        return False
    points = [p for p in decoded.points if p.name in _POINTS]
    return len(points) == len(_POINTS) and all(p.equal for p in points)


def _files(outcomes: OutcomeLog, track: str, candidate: str, kind: str
           ) -> list[tuple[int | None, Path]]:
    return [(o.sample.seed, o.media_path) for o in outcomes.of(track, candidate, kind)
            if o.sample.ok and o.media_path is not None]


def _pairs(outcomes: OutcomeLog, track: str, candidate: str) -> list[tuple[int | None, Path, Path]]:
    """(seed, quality MP4, timed MP4) for every timed MP4 whose seed has a quality one."""
    quality: dict[int | None, Path] = {}
    for seed, path in _files(outcomes, track, candidate, WATCHED):
        quality.setdefault(seed, path)
    return [(seed, quality[seed], path)
            for seed, path in _files(outcomes, track, candidate, TIMED) if seed in quality]


_CHECK_OF = {QualityClass.LOSSLESS: Check.TIMED_OUTPUT,
             QualityClass.LOSSY: Check.TIMED_OUTPUT_FIDELITY}
_CHECKS = frozenset(_CHECK_OF.values())


def judge_timed_outputs(plans: Mapping[str, TrackPlan], outcomes: OutcomeLog,
                        recorded: Sequence[AnyCheck], tracks: Iterable[str]
                        ) -> tuple[list[AnyCheck], list[str]]:
    """At verdict time: the timed-output check of every candidate of `tracks` (of `plans`) that
    has none `recorded` yet and whose timed and quality outputs are both in, in the plans'
    order; its caller records them. The one place the check is judged.

    A comparison that raises leaves that candidate's check unjudged (open in its verdict, as a
    scenario that errored left it) and is said in the second list, one line each, so that the
    run's other checks and verdicts are still judged."""
    done = {(c.track, c.arm) for c in recorded if c.name in _CHECKS}
    wanted = set(tracks)
    found: list[AnyCheck] = []
    problems: list[str] = []
    for track_id, plan in plans.items():
        if track_id not in wanted:
            continue
        for arm in plan.candidates:
            if (track_id, arm.id) in done:
                continue
            try:
                check = timed_output_for(plan, outcomes, arm.id)
            except Exception as exc:  # not one comparison may cost the run all its verdicts
                problems.append(f"{track_id}/{arm.id}: timed outputs not compared "
                                f"({type(exc).__name__}: {exc}); {_CHECK_OF[plan.quality]} "
                                "stays open")
                continue
            if check is not None:
                found.append(check)
    return found, problems


def timed_output_for(plan: TrackPlan, outcomes: OutcomeLog, candidate: str
                     ) -> AnyCheck | None:
    """The track kind's timed-output check, or None while either side has not run."""
    if plan.quality == QualityClass.LOSSLESS:
        return timed_output_check(outcomes, plan.track_id, candidate)
    return lossy_timed_output_check(outcomes, plan.track_id, candidate, plan.lossy.gate)


def timed_output_check(outcomes: OutcomeLog, track: str, candidate: str) -> AnyCheck | None:
    """Pass when every timed MP4 decodes identical to the watched one of its seed; None while
    either side has not run (the verdict then lists the check as open)."""
    pairs = _pairs(outcomes, track, candidate)
    if not pairs:
        return None
    differing = [path.name for _, reference, path in pairs if not _identical(reference, path)]
    if differing:
        return new_check(track, candidate, Check.TIMED_OUTPUT, CheckStatus.FAIL,
                         Reason.OUTPUT_DIFFERS_WHEN_UNOBSERVED,
                         f"timed outputs differ from the watched one: {', '.join(differing)}")
    return new_check(track, candidate, Check.TIMED_OUTPUT, CheckStatus.PASS, None,
                     f"{len(pairs)} timed outputs decode identical to the watched one")


def lossy_rule(gate: LossyGate) -> dict[str, Any]:
    """The minimums a differing timed output must reach against the scored one."""
    return {"min_psnr_db": gate.min_psnr_db if gate.min_psnr_db is not None
            else DEFAULT_MIN_PSNR_DB,
            "min_psnr_from": "lossy_gate.min_psnr_db" if gate.min_psnr_db is not None
            else "default",
            "min_ssim": gate.min_ssim, "min_audio_snr_db": DEFAULT_MIN_AUDIO_SNR_DB}


def _beyond(rule: dict[str, Any], figures: dict[str, Any]) -> list[str]:
    """What of the rule a differing pair breaks (empty: within what the contract tolerates)."""
    found = []
    psnr = figures["psnr_db"]
    if not psnr >= rule["min_psnr_db"]:
        found.append(f"PSNR {psnr:.2f} dB < {rule['min_psnr_db']:g} dB")
    if rule["min_ssim"] is not None and not figures["ssim_mean"] >= rule["min_ssim"]:
        found.append(f"SSIM {figures['ssim_mean']:.4f} < {rule['min_ssim']:g}")
    snr = figures["audio_snr_db"]
    if not snr >= rule["min_audio_snr_db"]:
        found.append(f"audio SNR {snr:.2f} dB < {rule['min_audio_snr_db']:g} dB")
    return found


def _lossy_pair(rule: dict[str, Any], seed: int | None, scored: Path, timed: Path
                ) -> tuple[dict[str, Any], list[str]]:
    """One timed MP4 against the scored one of its seed: its figures and what it breaks."""
    entry: dict[str, Any] = {"seed": seed, "timed": timed.name, "scored": scored.name}
    if _identical(scored, timed):
        return entry | {"identical": True}, []
    # Imported here: fidelity pulls in the scoring stack, which a lossless track never needs.
    from ref2va_accept.quality import compare_audio_files, compare_videos  # noqa: PLC0415
    try:
        video = compare_videos(timed, scored)
        audio = compare_audio_files(timed, scored)
    except (Ref2VAError, ValueError) as exc:
        return entry | {"identical": False, "error": str(exc)}, [f"not comparable: {exc}"]
    figures = {"psnr_db": float(video.psnr_db), "ssim_mean": float(video.ssim_mean),
               "audio_snr_db": float(audio.snr_db)}
    shown = {k: json_number(v) for k, v in figures.items()}
    return entry | {"identical": False, **shown}, _beyond(rule, figures)


def lossy_timed_output_check(outcomes: OutcomeLog, track: str, candidate: str,
                             gate: LossyGate) -> AnyCheck | None:
    """Pass when every timed MP4 decodes identical to the scored one of its seed, or differs
    within the rule (lossy_rule); None while either side has not run."""
    pairs = _pairs(outcomes, track, candidate)
    if not pairs:
        return None
    rule = lossy_rule(gate)
    compared, broken = [], []
    for seed, scored, timed in pairs:
        entry, beyond = _lossy_pair(rule, seed, scored, timed)
        compared.append(entry)
        broken += [f"{timed.name} (seed {seed}): {what}" for what in beyond]
    data = {"rule": rule, "pairs": compared}
    if broken:
        return new_check(track, candidate, Check.TIMED_OUTPUT_FIDELITY, CheckStatus.FAIL,
                         Reason.OUTPUT_DIFFERS_WHEN_UNOBSERVED,
                         "timed outputs differ from the scored one beyond the lossy contract: "
                         + "; ".join(broken), data)
    identical = sum(1 for entry in compared if entry["identical"])
    return new_check(
        track, candidate, Check.TIMED_OUTPUT_FIDELITY, CheckStatus.PASS, None,
        f"{len(pairs)} timed outputs against the scored one of their seed: {identical} "
        f"identical, {len(pairs) - identical} within PSNR {rule['min_psnr_db']:g} dB "
        f"({rule['min_psnr_from']}) and audio SNR {rule['min_audio_snr_db']:g} dB", data)
