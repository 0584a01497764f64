"""`ref2va-accept score VIDEO`: every dimension and the soundtrack; with a baseline, errors,
fidelity and audio against it.

Scores describe the whole video or nothing: the frames the scoring pass decoded are checked
against the container's declared count and the run's expected count (``--frames N``, or the
track's with ``--campaign C --track T``). A video that falls short is refused (one line naming
the file, frames found against each count; exit 1) unless ``--allow-partial`` lets its prefix be
scored, and then the output says ``partial: N of M frames``. The baseline is held to the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field

from ref2va_accept.core import EXIT_OK, EXIT_PROBLEM, MediaContentError, MediaError, Ref2VAError
from ref2va_accept.evidence import (
    AudioComparisonRecord,
    AudioStatsRecord,
    FidelityFigures,
    Record,
    RelativeError,
    json_number,
)
from ref2va_accept.media import FrameCount, open_mp4, probe
from ref2va_accept.planning import plan_option
from ref2va_accept.quality import (
    ScoredVideo,
    audio_stats,
    check_comparable,
    compare_audio,
    compare_videos,
    decode_audio,
    relative_errors,
    score_video_counted,
)
from ref2va_accept.report import audio_comparison_text, number

__all__ = ["run"]


def _weights(items: list[str] | None) -> dict[str, Path]:
    weights: dict[str, Path] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise Ref2VAError(f"--weights expects NAME=PATH, got {item!r}")
        weights[name] = Path(value)
    return weights


def _expected_frames(args: argparse.Namespace) -> int | None:
    plan = plan_option(args.campaign, args.track)
    if plan is not None and args.frames is not None and args.frames != plan.num_frames:
        raise Ref2VAError(f"--frames {args.frames} differs from track {plan.track_id}'s "
                          f"{plan.num_frames} frames; give one of them")
    if args.frames is not None and args.frames < 1:
        raise Ref2VAError(f"--frames expects a positive frame count, got {args.frames}")
    return args.frames if plan is None else plan.num_frames


def whole(scored: ScoredVideo, path: Path, expected: int | None,
          allow_partial: bool) -> str | None:
    """None when ``scored`` covers every frame; the ``partial: N of M frames`` line when it
    covers a prefix and that is allowed; otherwise MediaContentError naming the file."""
    count = FrameCount(path.name, scored.frames_decoded, scored.frames_declared, expected)
    problem = count.problem()
    if problem is None:
        return None
    if allow_partial and count.partial:
        return count.partial_text()
    hint = " (--allow-partial scores them anyway)" if count.partial else ""
    raise MediaContentError(f"{problem}: not scored{hint}")


class _Audio(AudioStatsRecord):
    """The soundtrack's stats (quality.audio_stats), decoded."""

    status: Literal["ok"]


class _NotMeasured(Record):
    """A soundtrack absent, or one (or a comparison of two) that could not be made: why."""

    status: Literal["absent", "error"]
    detail: str


def _spelled(entry: dict[str, object]) -> dict[str, object]:
    """A relative error as --json prints it: a figure JSON cannot hold ("inf" for an error
    against a zero baseline) spelled out, so that the output stays JSON every reader takes."""
    return {key: json_number(value) if isinstance(value, float) else value
            for key, value in entry.items()}


class _Shown(Record):
    """What the text view shows of the command's JSON (its scores come from the scoring pass
    itself), read from the very payload --json prints."""

    model_config = ConfigDict(extra="ignore")

    partial: str | None = None
    baseline_partial: str | None = None
    audio: _Audio | _NotMeasured | None = None
    precondition_problems: list[str] = Field(default_factory=list)
    relative_errors: list[RelativeError] = Field(default_factory=list)
    fidelity: FidelityFigures | None = None
    audio_comparison: AudioComparisonRecord | _NotMeasured | None = None


def _audio_rows(shown: _Shown) -> list[str]:
    rows: list[str] = []
    audio = shown.audio
    if isinstance(audio, _NotMeasured):
        rows.append(f"audio: {audio.status}: {audio.detail}")
    elif audio is not None:
        start = audio.start_time_s
        rows.append(
            f"audio: {number(audio.duration_s, '.3f')} s"
            + (f" from {number(start, '.3f')} s" if start is not None else "")
            + f", {audio.sample_rate} Hz x{audio.channels}, loudness "
            f"{number(audio.loudness_lufs, '.2f')} LUFS, peak "
            f"{number(audio.peak_dbfs, '.2f')} dBFS, clipping "
            f"{number(audio.clipping_ratio, '.4%')}, silence "
            f"{number(audio.silence_ratio, '.1%')}")
    cmp = shown.audio_comparison
    if isinstance(cmp, _NotMeasured):
        rows.append(f"audio vs baseline: error: {cmp.detail}")
    elif cmp is not None:
        rows.append(f"audio vs baseline: {audio_comparison_text(cmp)}")
    return rows


def _text(payload: dict[str, object], scored: ScoredVideo) -> str:
    shown = _Shown.model_validate(payload)
    rows = [f"{'scorer':<42} {'kind':<12} {'status':<6} value"]
    rows += [f"{s.scorer:<42} {s.kind:<12} {s.status:<6} "
             + (f"{s.value:.6f}" if s.value is not None else s.detail) for s in scored.scores]
    if shown.partial is not None:
        rows.append(shown.partial)
    if shown.baseline_partial is not None:
        rows.append(f"baseline {shown.baseline_partial}")
    for problem in shown.precondition_problems:
        rows.append(f"not comparable: {problem}")
    for err in shown.relative_errors:
        value = err.error
        shown_error = (f"{value:.4%}" if isinstance(value, float)
                       else f"{err.status} {err.detail}")
        rows.append(f"rel.err {err.scorer:<34} {err.kind:<12} {shown_error}")
    fidelity = shown.fidelity
    if fidelity is not None:
        rows.append(f"fidelity: PSNR {fidelity.psnr_db} dB (min {fidelity.psnr_min_db}), "
                    f"SSIM {fidelity.ssim_mean:.6f} (min {fidelity.ssim_min:.6f})")
    rows += _audio_rows(shown)
    return "\n".join(rows) + "\n"


def run(args: argparse.Namespace) -> int:
    weights = _weights(args.weights)
    expected = _expected_frames(args)
    video = Path(args.video)
    scored = score_video_counted(video, reference_image=args.reference, weights=weights)
    partial = whole(scored, video, expected, args.allow_partial)
    payload: dict[str, object] = {"video": video.name,
                                  "scores": [s.json_dict() for s in scored.scores],
                                  "frames_decoded": scored.frames_decoded,
                                  "frames_declared": scored.frames_declared,
                                  "frames_expected": expected}
    if partial is not None:
        payload["partial"] = partial
    code = EXIT_OK
    with open_mp4(video) as container:  # the stream list only: nothing decoded twice
        has_audio = bool(container.streams.audio)
    soundtrack = None
    if not has_audio:
        payload["audio"] = {"status": "absent", "detail": "no audio stream"}
    else:
        try:
            soundtrack = decode_audio(video)
            payload["audio"] = {"status": "ok", **audio_stats(soundtrack).json_dict()}
        except MediaError as exc:  # the video scores stand; the broken soundtrack is a problem
            payload["audio"] = {"status": "error", "detail": str(exc)}
            code = EXIT_PROBLEM
    if args.baseline is not None:
        problems = check_comparable(probe(video), probe(args.baseline))
        payload["baseline"] = Path(args.baseline).name
        payload["comparable"] = not problems
        payload["precondition_problems"] = problems
        if problems:
            code = EXIT_PROBLEM  # a failed precondition: reported, never scored
        else:
            base = score_video_counted(args.baseline, reference_image=args.reference,
                                       weights=weights)
            base_partial = whole(base, Path(args.baseline), expected, args.allow_partial)
            if base_partial is not None:
                payload["baseline_partial"] = base_partial
            payload["baseline_scores"] = [s.json_dict() for s in base.scores]
            payload["normalized"] = args.normalized
            payload["relative_errors"] = [
                _spelled(e.json_dict()) for e in relative_errors(scored.scores, base.scores,
                                                                 normalized=args.normalized)]
            payload["fidelity"] = compare_videos(video, args.baseline).json_dict()
            if soundtrack is not None:
                try:
                    payload["audio_comparison"] = compare_audio(
                        soundtrack, decode_audio(args.baseline)).json_dict()
                except (MediaError, ValueError) as exc:
                    payload["audio_comparison"] = {"status": "error", "detail": str(exc)}
                    code = EXIT_PROBLEM
    sys.stdout.write(json.dumps(payload, indent=2) + "\n" if args.json
                     else _text(payload, scored))
    return code
