"""`ref2va-accept`: the harness's command line.

Every failure is one line on stderr naming what and where, and a non-zero exit; no traceback for
bad input. Exit codes: 0 ok, 1 the check found a problem in its input (for probe and score, an
MP4 that is not one, is cut short or does not decode: MediaContentError), 2 input that could not
be checked at all (missing, unreadable, malformed) or bad usage.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from ref2va_accept import __version__, bringup
from ref2va_accept.campaign import (
    fill_points,
    freeze,
    load_campaign,
    lock_path,
    report_lines,
    verify,
)
from ref2va_accept.campaign.identity import HostProbes, preflight
from ref2va_accept.cli import _tensors as tensors_command
from ref2va_accept.cli._calibrate import add_command as add_calibrate_command
from ref2va_accept.cli._localize import add_command as add_localize_command
from ref2va_accept.cli._profile import add_command as add_profile_command
from ref2va_accept.cli._runs import add_run_commands
from ref2va_accept.cli._schema import add_schema_command
from ref2va_accept.cli._scorers import add_scorer_commands
from ref2va_accept.core import (
    CALIBRATED_CONFIDENCE,
    CALIBRATED_DECISION_RULE,
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_PROBLEM,
    DecisionRule,
    MediaContentError,
    Ref2VAError,
)
from ref2va_accept.media import MediaExpectation, check_media, probe
from ref2va_accept.planning import Prices, campaign_costs, cost_lines, plan_campaign

log = logging.getLogger("ref2va_accept")


def _cmd_freeze(args: argparse.Namespace) -> int:
    written = freeze(args.campaign)
    sys.stdout.write(f"froze {args.campaign} -> {written.name}\n")
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    status = verify(args.campaign)
    campaign = load_campaign(args.campaign)
    plans, prices = plan_campaign(campaign), Prices.of(campaign)
    if args.json:
        sys.stdout.write(json.dumps({
            "campaign": str(args.campaign), "lock": lock_path(args.campaign).name,
            "state": status.state, "ok": status.ok, "problems": list(status.problems),
            "unfilled": list(status.unfilled), "verdict_cap": status.cap_reason,
            "cost": [c.json_dict() for c in campaign_costs(plans, prices)],
        }, indent=2) + "\n")
    else:
        for problem in status.problems:
            sys.stdout.write(f"drift: {problem}\n")
        for name in status.unfilled:
            sys.stdout.write(f"unfilled: {name}\n")
        sys.stdout.write(f"{args.campaign}: {status.state}"
                         + ("" if status.ok else f" (verdicts capped: {status.cap_reason})")
                         + "\n")
        sys.stdout.write("".join(f"{line}\n" for line in cost_lines(plans, prices)))
    return EXIT_OK if status.ok else EXIT_PROBLEM


def _cmd_preflight(args: argparse.Namespace) -> int:
    # A missing tool raises IdentityToolMissing (a Ref2VAError): one line on stderr, exit 2.
    result = preflight(load_campaign(args.campaign),
                       HostProbes(vllm_omni_wheel=args.vllm_omni_wheel))
    if args.json:
        sys.stdout.write(json.dumps({"campaign": str(args.campaign)} | result.json_dict(),
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
        payload = result.json_dict() | {
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


def _cmd_score(args: argparse.Namespace) -> int:
    # Imported here: the quality package pulls in OpenCV, which the other subcommands never need.
    from ref2va_accept.cli._score import run  # noqa: PLC0415

    return run(args)


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
    from ref2va_accept.timing import latency_verdict  # noqa: PLC0415 (scipy is only needed here)

    baseline = _latencies("--baseline", args.baseline)
    candidate = _latencies("--candidate", args.candidate)
    try:
        result = latency_verdict(baseline, candidate, args.target, args.confidence,
                                 single_instance=args.instances == 1,
                                 rule=DecisionRule(args.rule))
    except ValueError as exc:
        raise Ref2VAError(str(exc)) from None
    if args.json:
        sys.stdout.write(json.dumps(result.json_dict(), indent=2) + "\n")
        return EXIT_OK  # the verdict is data, not an exit status
    interval = result.interval

    def shown(value: float | None) -> str:
        return "null" if value is None else f"{value:.4f}"

    rows = [
        f"baseline  (n={len(result.baseline)}): " + " ".join(f"{v:g}" for v in result.baseline),
        f"candidate (n={len(result.candidate)}): " + " ".join(f"{v:g}" for v in result.candidate),
        (f"ratio interval: k={interval.k} lower={shown(interval.lower)} "
         f"upper={shown(interval.upper)} (one-sided {interval.confidence:g} at each end)")
        if interval.rule != "welch-log/1" else
        (f"Welch interval on log values: lower={shown(interval.lower)} "
         f"upper={shown(interval.upper)} (one-sided {interval.confidence:g} at each end, "
         f"df {shown(interval.df)})"),
        f"p-value of ratio >= target: {shown(result.p_value)}",
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


def _cmd_bringup(args: argparse.Namespace) -> int:
    campaign = load_campaign(args.campaign)
    plan = bringup.step_schedule(campaign, tuple(p.resolve() for p in args.policy) or None,
                            demonstrate=not args.no_warmup_demonstration)
    cost = bringup.price(campaign, plan)
    if args.dry_run:
        sys.stdout.write(json.dumps(plan.json_dict() | {"cost": cost.json_dict()},
                                    indent=2) + "\n" if args.json else "\n".join(
            [f"{args.campaign}: the bring-up starts and sends, in order:",
             *(f"  {line}" for line in plan.lines()), cost.line(plan)]) + "\n")
        return EXIT_OK
    sys.stderr.write(cost.line(plan) + "\n")
    result = bringup.run_bringup(args.campaign, args.evidence_dir, args.run_id, plan.profiles,
                                 warmup_demonstration=not args.no_warmup_demonstration)
    if args.json:
        sys.stdout.write(json.dumps({"folder": result.folder.name, "counts": result.counts(),
                                     "failure": result.failure, "exit_code": result.exit_code,
                                     "rows": [r.json_dict() for r in result.rows]},
                                    indent=2) + "\n")
    else:
        sys.stdout.write("\n".join(bringup.summary_lines(result)) + "\n")
        where = result.folder
        sys.stdout.write(f"page: {where.name}/bringup.html; patch: "
                         + (f"{where.name}/{result.patch_file.name}" if result.patch_file
                            else "nothing to change") + "\n")
    if result.failure is not None:
        sys.stderr.write(f"ref2va-accept bringup: did not finish: {result.failure} (exit "
                         f"{result.exit_code}; {result.folder.name}/bringup.html says where)\n")
    return result.exit_code


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
    p.set_defaults(run=_cmd_probe, problems=(MediaContentError,))

    p = sub.add_parser("compare-tensors",
                       help="compare two safetensors files or dump folders bit for bit")
    tensors_command.add_arguments(p)
    p.set_defaults(run=tensors_command.run)

    p = sub.add_parser("score", help="score a video (VBench, proxies, consistency, audio); "
                       "with --baseline also relative errors, fidelity and audio against it")
    p.add_argument("video", type=Path)
    p.add_argument("--baseline", type=Path, help="B0's MP4 for the same seed")
    p.add_argument("--reference", type=Path, help="the reference image")
    p.add_argument("--weights", action="append", metavar="NAME=PATH",
                   help="a local TorchScript model, e.g. dino_vitb16=/models/dino.pt (repeatable)")
    p.add_argument("--normalized", action="store_true",
                   help="relative errors on VBench-normalised scores (default: raw)")
    p.add_argument("--frames", type=int, help="expected frame count (default: the container's)")
    p.add_argument("--campaign", type=Path, help="with --track: expect that track's frame count")
    p.add_argument("--track", help="a track of --campaign")
    p.add_argument("--allow-partial", action="store_true", help="score the frames that decode "
                   "when fewer than expected, and say so (default: refuse, exit 1)")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.set_defaults(run=_cmd_score, problems=(MediaContentError,))

    p = sub.add_parser("verdict", help="latency ratio interval and verdict from raw latencies")
    p.add_argument("--baseline", required=True,
                   help="B0 latencies in seconds, e.g. 301.2,298,305.5")
    p.add_argument("--candidate", required=True, help="candidate latencies in seconds")
    p.add_argument("--target", type=float, default=0.5, help="target ratio (0.5 = 50%% lower)")
    p.add_argument("--confidence", type=float, default=CALIBRATED_CONFIDENCE,
                   help="one-sided confidence at each end of the interval (default: the "
                   f"shipped campaigns' {CALIBRATED_CONFIDENCE:g})")
    p.add_argument("--instances", type=int, default=1,
                   help="server instances per arm the samples came from")
    p.add_argument("--rule", choices=tuple(r.value for r in DecisionRule),
                   default=CALIBRATED_DECISION_RULE.value,
                   help="decision rule (a campaign's protocol.decision_rule; default: the "
                   f"shipped campaigns' {CALIBRATED_DECISION_RULE})")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(run=_cmd_verdict)

    p = sub.add_parser("bringup", help="once on a fresh host, before freezing: answer every "
                       "guess and risk with a row (B0 per memory policy, dumps, stop, Cache-DiT, "
                       "bad audio, a 15 s request) and measure every price `plan` uses (starts, "
                       "stops, requests, capture overhead, scoring, the warm-up "
                       "demonstration); writes bringup.html/.json and a patch of what it "
                       "measured (exit 1 when a row is contradicted, 3 when it stopped early, "
                       "128+N when signal N interrupted it)")
    p.add_argument("campaign", type=Path)
    p.add_argument("--evidence-dir", type=Path, default=Path("evidence"), metavar="DIR",
                   help="where the run's folder goes (default: evidence)")
    p.add_argument("--run-id", default=None, help="the run folder's name (default: "
                   "bringup-<time>)")
    p.add_argument("--policy", type=Path, action="append", default=[], metavar="PROFILE",
                   help="a B0 memory-policy profile to try (repeatable; default: the "
                   "baseline's and every b0*.yaml beside it)")
    p.add_argument("--no-warmup-demonstration", action="store_true",
                   help="leave the warm-up demonstration out (its row stays open, naming "
                   "`pytest -m warmup_demonstration`; `plan` keeps the cheap warm-up a what-if)")
    p.add_argument("--dry-run", action="store_true", help="print what it would start and send, "
                   "and its cost; start nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_cmd_bringup)

    add_localize_command(sub)
    add_profile_command(sub)
    add_run_commands(sub)
    add_scorer_commands(sub)
    add_schema_command(sub)

    add_calibrate_command(sub)
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
        # A problem the command exists to find in its input (an MP4 that is not one, or is cut
        # short, for probe and score) is exit 1; input it could not check at all is exit 2.
        return EXIT_PROBLEM if isinstance(exc, getattr(args, "problems", ())) else EXIT_BAD_INPUT
    except OSError as exc:
        sys.stderr.write(f"ref2va-accept {args.command}: {exc.filename or ''}: {exc.strerror}\n")
        return EXIT_BAD_INPUT
    return code

