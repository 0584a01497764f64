"""`ref2va-accept`: the harness's command line.

Every failure is one line on stderr naming what and where, and a non-zero exit; no traceback for
bad input. Exit codes: 0 ok, 1 the check found a problem, 2 bad input or usage.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from . import __version__, calibration
from .campaign import load_campaign
from .cost import campaign_costs, describe
from .errors import MediaError, Ref2VAError, TensorFileError
from .fill_points import fill_points, report_lines
from .identity import HostProbes, preflight
from .lock import freeze, lock_path, verify
from .media import MediaExpectation, check_media, open_mp4, probe
from .plan import plan_campaign
from .report import audio_comparison_text, number
from .tensors import compare_dumps, compare_tensor_files

log = logging.getLogger("ref2va_accept")

EXIT_OK, EXIT_PROBLEM, EXIT_BAD_INPUT = 0, 1, 2


def _cmd_freeze(args: argparse.Namespace) -> int:
    written = freeze(args.campaign)
    sys.stdout.write(f"froze {args.campaign} -> {written.name}\n")
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    status = verify(args.campaign)
    campaign = load_campaign(args.campaign)
    plans, expected = plan_campaign(campaign), campaign.model.protocol.expected_request_s
    if args.json:
        sys.stdout.write(json.dumps({
            "campaign": str(args.campaign), "lock": lock_path(args.campaign).name,
            "state": status.state, "ok": status.ok, "problems": list(status.problems),
            "unfilled": list(status.unfilled), "verdict_cap": status.cap_reason,
            "cost": [c.to_dict() for c in campaign_costs(plans, expected)],
        }, indent=2) + "\n")
    else:
        for problem in status.problems:
            sys.stdout.write(f"drift: {problem}\n")
        for name in status.unfilled:
            sys.stdout.write(f"unfilled: {name}\n")
        sys.stdout.write(f"{args.campaign}: {status.state}"
                         + ("" if status.ok else f" (verdicts capped: {status.cap_reason})")
                         + "\n")
        sys.stdout.write("".join(f"{line}\n" for line in describe(plans, expected)))
    return EXIT_OK if status.ok else EXIT_PROBLEM


def _cmd_preflight(args: argparse.Namespace) -> int:
    # A missing tool raises IdentityToolMissing (a Ref2VAError): one line on stderr, exit 2.
    result = preflight(load_campaign(args.campaign),
                       HostProbes(vllm_omni_wheel=args.vllm_omni_wheel))
    if args.json:
        sys.stdout.write(json.dumps({"campaign": str(args.campaign)} | result.to_dict(),
                                    indent=2) + "\n")
    else:
        sys.stdout.write(result.table() + "\n")
        sys.stdout.write(f"{args.campaign}: host identity "
                         + ("matches engine.source_pin" if result.ok else
                            f"differs from engine.source_pin in {len(result.problems())} field(s)")
                         + "\n")
    return EXIT_OK if result.ok else EXIT_PROBLEM


def _cmd_probe(args: argparse.Namespace) -> int:
    expect = None
    if args.frames is not None:
        expect = MediaExpectation(
            num_frames=args.frames, fps=args.fps, width=args.width, height=args.height,
            sample_rate=args.sample_rate, channels=args.channels, audio=not args.no_audio,
        )
    result = probe(args.file)
    problems = check_media(result, expect)
    if args.json:
        payload = result.to_dict() | {
            "complete": not problems,
            "problems": [{"code": p.code, "message": p.message} for p in problems],
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        video, audio = result.video, result.audio
        if video:
            sys.stdout.write(f"video: {video.codec} {video.width}x{video.height} "
                             f"{video.fps:g} fps, {video.frames_decoded} frames decoded, "
                             f"{video.duration_s:.3f} s\n")
        if audio:
            sys.stdout.write(f"audio: {audio.codec} {audio.sample_rate} Hz, {audio.channels} ch, "
                             f"{audio.duration_s:.3f} s\n")
    if problems:
        # One line, however many problems: the file's name, then each problem with its code.
        sys.stderr.write(f"{Path(args.file).name}: incomplete: "
                         + "; ".join(f"{p.code}: {p.message}" for p in problems) + "\n")
    return EXIT_OK if not problems else EXIT_PROBLEM


def _cmd_compare_tensors(args: argparse.Namespace) -> int:
    a, b = Path(args.a), Path(args.b)
    if a.is_dir() and b.is_dir():
        result = compare_dumps(a, b)
    elif a.is_dir() or b.is_dir():
        # Names only: an absolute path in a report leaks the host's layout.
        folder, other = (a, b) if a.is_dir() else (b, a)
        raise TensorFileError(f"{folder.name} is a folder but {other.name} is not; "
                              "expected two safetensors files or two dump folders")
    else:
        result = compare_tensor_files(a, b)
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
    else:
        for point in result.points:
            sys.stdout.write(point.summary() + "\n")
        if not result.points:
            sys.stdout.write("no tensors found on either side\n")
        elif result.first_divergence is None:
            sys.stdout.write(f"all {len(result.points)} points equal\n")
        else:
            sys.stdout.write(f"first divergence: {result.first_divergence}\n")
    # Nothing compared proves nothing: an empty dump is a problem, not a pass.
    return EXIT_OK if result.points and result.equal else EXIT_PROBLEM


def _audio_rows(payload: dict[str, object]) -> list[str]:
    rows: list[str] = []
    audio = payload.get("audio")
    if isinstance(audio, dict):
        if audio["status"] != "ok":
            rows.append(f"audio: {audio['status']}: {audio['detail']}")
        else:
            start = audio["start_time_s"]
            rows.append(
                f"audio: {number(audio['duration_s'], '.3f')} s"
                + (f" from {number(start, '.3f')} s" if start is not None else "")
                + f", {audio['sample_rate']} Hz x{audio['channels']}, loudness "
                f"{number(audio['loudness_lufs'], '.2f')} LUFS, peak "
                f"{number(audio['peak_dbfs'], '.2f')} dBFS, clipping "
                f"{number(audio['clipping_ratio'], '.4%')}, silence "
                f"{number(audio['silence_ratio'], '.1%')}")
    cmp = payload.get("audio_comparison")
    if isinstance(cmp, dict):
        if cmp.get("status") == "error":
            rows.append(f"audio vs baseline: error: {cmp['detail']}")
        else:
            rows.append(f"audio vs baseline: {audio_comparison_text(cmp)}")
    return rows


def _cmd_score(args: argparse.Namespace) -> int:
    # Imported here: the quality package pulls in OpenCV, which the other subcommands never need.
    from .quality import (  # noqa: PLC0415
        check_comparable,
        compare_videos,
        relative_errors,
        score_video,
    )
    from .quality.audio import audio_stats, compare_audio, decode_audio  # noqa: PLC0415

    weights: dict[str, Path] = {}
    for item in args.weights or []:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise Ref2VAError(f"--weights expects NAME=PATH, got {item!r}")
        weights[name] = Path(value)
    scores = score_video(args.video, reference_image=args.reference, weights=weights)
    payload: dict[str, object] = {"video": Path(args.video).name,
                                  "scores": [s.to_dict() for s in scores]}
    code = EXIT_OK
    with open_mp4(Path(args.video)) as container:  # the stream list only: nothing decoded twice
        has_audio = bool(container.streams.audio)
    soundtrack = None
    if not has_audio:
        payload["audio"] = {"status": "absent", "detail": "no audio stream"}
    else:
        try:
            soundtrack = decode_audio(args.video)
            payload["audio"] = {"status": "ok", **audio_stats(soundtrack).to_dict()}
        except MediaError as exc:  # the video scores stand; the broken soundtrack is a problem
            payload["audio"] = {"status": "error", "detail": str(exc)}
            code = EXIT_PROBLEM
    if args.baseline is not None:
        problems = check_comparable(probe(args.video), probe(args.baseline))
        payload["baseline"] = Path(args.baseline).name
        payload["comparable"] = not problems
        payload["precondition_problems"] = problems
        if problems:
            code = EXIT_PROBLEM  # a failed precondition: reported, never scored
        else:
            base = score_video(args.baseline, reference_image=args.reference, weights=weights)
            payload["baseline_scores"] = [s.to_dict() for s in base]
            payload["relative_errors"] = [e.to_dict() for e in
                                          relative_errors(scores, base, normalized=args.normalized)]
            payload["fidelity"] = compare_videos(args.video, args.baseline).to_dict()
            if soundtrack is not None:
                try:
                    payload["audio_comparison"] = compare_audio(
                        soundtrack, decode_audio(args.baseline)).to_dict()
                except (MediaError, ValueError) as exc:
                    payload["audio_comparison"] = {"status": "error", "detail": str(exc)}
                    code = EXIT_PROBLEM
    if args.json:
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return code
    rows = [f"{'scorer':<42} {'kind':<12} {'status':<6} value"]
    rows += [f"{s.scorer.id:<42} {s.kind:<12} {s.status:<6} "
             + (f"{s.value:.6f}" if s.value is not None else s.detail) for s in scores]
    for problem in payload.get("precondition_problems", []):  # type: ignore[attr-defined]
        rows.append(f"not comparable: {problem}")
    for err in payload.get("relative_errors", []):  # type: ignore[attr-defined]
        value = err["error"]
        shown = f"{value:.4%}" if isinstance(value, float) else f"{err['status']} {err['detail']}"
        rows.append(f"rel.err {err['scorer']:<34} {err['kind']:<12} {shown}")
    fidelity = payload.get("fidelity")
    if isinstance(fidelity, dict):
        rows.append(f"fidelity: PSNR {fidelity['psnr_db']} dB (min {fidelity['psnr_min_db']}), "
                    f"SSIM {fidelity['ssim_mean']:.6f} (min {fidelity['ssim_min']:.6f})")
    rows += _audio_rows(payload)
    sys.stdout.write("\n".join(rows) + "\n")
    return code


def _latencies(flag: str, text: str) -> list[float]:
    values = []
    for item in text.split(","):
        try:
            values.append(float(item))
        except ValueError:
            raise Ref2VAError(f"{flag} expects comma-separated seconds, got {item.strip()!r} "
                              f"in {text!r}") from None
    return values


def _cmd_verdict(args: argparse.Namespace) -> int:
    from .stats import latency_verdict  # noqa: PLC0415 (scipy is only needed here)

    baseline = _latencies("--baseline", args.baseline)
    candidate = _latencies("--candidate", args.candidate)
    try:
        result = latency_verdict(baseline, candidate, args.target, args.confidence,
                                 single_instance=args.instances == 1)
    except ValueError as exc:
        raise Ref2VAError(str(exc)) from None
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
        return EXIT_OK  # the verdict is data, not an exit status
    interval = result.interval

    def shown(value: float | None) -> str:
        return "null" if value is None else f"{value:.4f}"

    rows = [
        f"baseline  (n={len(result.baseline)}): " + " ".join(f"{v:g}" for v in result.baseline),
        f"candidate (n={len(result.candidate)}): " + " ".join(f"{v:g}" for v in result.candidate),
        f"ratio interval: k={interval.k} lower={shown(interval.lower)} "
        f"upper={shown(interval.upper)} (one-sided {interval.confidence:g} at each end)",
        f"ratio of medians: {result.ratio_of_medians:.4f}  "
        f"ratio of means: {result.ratio_of_means:.4f}",
        f"verdict: {result.verdict} ({', '.join(result.reasons)}); target ratio {result.target:g}",
    ]
    rows += [f"tail {t.arm} p{t.percentile * 100:g}: {shown(t.value)} "
             f"({t.samples} samples; early stopping needs {t.required})" for t in result.tails]
    if result.note:
        rows.append(f"note: {result.note}")
    sys.stdout.write("\n".join(rows) + "\n")
    return EXIT_OK


def _cmd_fill_points(args: argparse.Namespace) -> int:
    result = fill_points(args.campaign, args.dump_dir, tracks=args.track, mp4=args.mp4,
                         force=args.force, dry_run=args.dry_run)
    sys.stdout.write("\n".join(report_lines(result, dry_run=args.dry_run)) + "\n")
    return EXIT_PROBLEM if result.unfilled else EXIT_OK


def _cmd_calibrate(args: argparse.Namespace) -> int:
    sys.stdout.write("\n".join(calibration.run_command(args)) + "\n")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ref2va-accept", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what is done")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("freeze", help="write the campaign's lock (hashes of campaign and files)")
    p.add_argument("campaign", type=Path)
    p.set_defaults(run=_cmd_freeze)

    p = sub.add_parser("verify", help="check a campaign against its lock; names each drift")
    p.add_argument("campaign", type=Path)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_cmd_verify)

    p = sub.add_parser("preflight", help="compare engine.source_pin with this host, field by "
                       "field (exit 1 on drift/unfilled, 2 when a tool is missing)")
    p.add_argument("campaign", type=Path)
    p.add_argument("--json", action="store_true")
    p.add_argument("--vllm-omni-wheel", type=Path, default=None, metavar="WHEEL",
                   help="the installed vllm_omni wheel file, hashed when its dist-info records "
                        "no hash (also REF2VA_VLLM_OMNI_WHEEL)")
    p.set_defaults(run=_cmd_preflight)

    p = sub.add_parser("fill-points", help="fill lossless comparison-point shapes and dtypes "
                       "from B0's first dump, before freezing (exit 1 when some stay unfilled)")
    p.add_argument("campaign", type=Path)
    p.add_argument("dump_dir", type=Path, help="B0's dump folder of <point>.safetensors")
    p.add_argument("--track", action="append", help="a lossless track (repeatable; default: all)")
    p.add_argument("--mp4", type=Path, help="B0's MP4, for mp4.audio's [channels, samples]")
    p.add_argument("--force", action="store_true", help="fill a frozen campaign anyway")
    p.add_argument("--dry-run", action="store_true", help="print the changes, write nothing")
    p.set_defaults(run=_cmd_fill_points)

    p = sub.add_parser("probe", help="decode an MP4 and check it is complete")
    p.add_argument("file", type=Path)
    p.add_argument("--json", action="store_true", help="print the probe as JSON")
    p.add_argument("--frames", type=int, help="expected frame count (enables the exact checks)")
    p.add_argument("--fps", type=float, default=24.0)
    p.add_argument("--width", type=int)
    p.add_argument("--height", type=int)
    p.add_argument("--sample-rate", type=int, default=32000)
    p.add_argument("--channels", type=int, default=2)
    p.add_argument("--no-audio", action="store_true", help="expect no audio stream")
    p.set_defaults(run=_cmd_probe)

    p = sub.add_parser("compare-tensors",
                       help="compare two safetensors files or dump folders bit for bit")
    p.add_argument("a", type=Path, help="a safetensors file, or a folder of <point>.safetensors")
    p.add_argument("b", type=Path, help="the same kind as A")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(run=_cmd_compare_tensors)

    p = sub.add_parser("score", help="score a video (VBench, proxies, consistency, audio); "
                       "with --baseline also relative errors, fidelity and audio against it")
    p.add_argument("video", type=Path)
    p.add_argument("--baseline", type=Path, help="B0's MP4 for the same seed")
    p.add_argument("--reference", type=Path, help="the reference image")
    p.add_argument("--weights", action="append", metavar="NAME=PATH",
                   help="a local TorchScript model, e.g. dino_vitb16=/models/dino.pt (repeatable)")
    p.add_argument("--normalized", action="store_true",
                   help="relative errors on VBench-normalised scores (default: raw)")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.set_defaults(run=_cmd_score)

    p = sub.add_parser("verdict", help="latency ratio interval and verdict from raw latencies")
    p.add_argument("--baseline", required=True,
                   help="B0 latencies in seconds, e.g. 301.2,298,305.5")
    p.add_argument("--candidate", required=True, help="candidate latencies in seconds")
    p.add_argument("--target", type=float, default=0.5, help="target ratio (0.5 = 50%% lower)")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="one-sided confidence at each end of the interval")
    p.add_argument("--instances", type=int, default=1,
                   help="server instances per arm the samples came from")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(run=_cmd_verdict)

    p = sub.add_parser("calibrate", help="simulate the campaign's latency protocol: false "
                       "'supported' at the target and power, beside the older ABA design")
    calibration.add_arguments(p)
    p.set_defaults(run=_cmd_calibrate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.command == "probe" and args.frames is not None and (
        args.width is None or args.height is None
    ):
        sys.stderr.write("ref2va-accept probe: --frames needs --width and --height\n")
        return EXIT_BAD_INPUT
    try:
        code: int = args.run(args)
    except Ref2VAError as exc:
        sys.stderr.write(f"ref2va-accept {args.command}: {exc}\n")
        return EXIT_BAD_INPUT
    except OSError as exc:
        sys.stderr.write(f"ref2va-accept {args.command}: {exc.filename or ''}: {exc.strerror}\n")
        return EXIT_BAD_INPUT
    return code


if __name__ == "__main__":
    raise SystemExit(main())
