"""``ref2va-accept localize RUN --track T --candidate C``: the localization pass again, on demand,
from a finished run's evidence.

It reads the run's ``evidence.json``: the candidate's ``lossless_gate`` check (its first diverging
point and seed) and the campaign the run used (its canonical form and, for a frozen run, its
lock). The campaign named now (by default the file the run recorded) must be the same campaign
with the same profiles and inputs (its lock verified), or the command refuses: the pass must
start the same launch lines with the same inputs. Its own evidence goes into a new folder
beside the run (``localize-<time>``): the instances, requests and captures, one ``localization``
check, and ``localize.html`` with the first-divergence panel. The gate's dumps of the finished run
give the picture when level 2 does not run.
"""

from __future__ import annotations

import argparse
import html
import json
from pathlib import Path
from typing import Any

from ref2va_accept.arms import Arms
from ref2va_accept.campaign import canonical_campaign, load_campaign, verify
from ref2va_accept.core import EXIT_OK, EXIT_PROBLEM, ArmRole, CheckStatus, LocalizeError
from ref2va_accept.engines import InstanceRegistry
from ref2va_accept.evidence import (
    EVIDENCE_FILE,
    Bundle,
    EvidenceBundle,
    LocalizationCheck,
    LosslessGateCheck,
    LosslessGateData,
    RunStatus,
    new_run_id,
    read_bundle_file,
)
from ref2va_accept.evidence.sanitize import Sanitizer
from ref2va_accept.judging.localize import LocalizationPass, equal_before
from ref2va_accept.planning import plan_campaign


def _gate_check(evidence: Bundle, track: str, candidate: str) -> LosslessGateCheck:
    gate = evidence.check_of(LosslessGateCheck, track, candidate)
    if gate is None:
        raise LocalizeError(f"no lossless_gate check of {candidate} on {track} in this run")
    return gate


def _dump_dir(run: Path, evidence: Bundle, track: str, arm: str) -> Path | None:
    """The folder of the arm's watched (quality) request in the finished run, if it dumped."""
    for sample in evidence.samples_where(track=track, arm=arm, kind="quality"):
        if sample.dump_dir:
            return run / sample.dump_dir
    return None


def _read(run: Path) -> Bundle:
    """The finished run's evidence.json, typed (LocalizeError naming the run when it is not
    one)."""
    try:
        return read_bundle_file(run / EVIDENCE_FILE, LocalizeError)[1]
    except LocalizeError as exc:
        raise LocalizeError(f"{run.name}: not a finished run's evidence folder "
                            f"({str(exc).removeprefix(f'{run.name}: ')})") from None


def localize_run(run: Path, track: str, candidate: str, campaign_path: Path | None,
                 repo: Path) -> tuple[Path, LocalizationCheck]:
    """Run the pass for one candidate of a finished run; its folder and its check."""
    evidence = _read(run)
    gate = _gate_check(evidence, track, candidate)
    data = gate.data
    if (gate.status is not CheckStatus.FAIL or not isinstance(data, LosslessGateData)
            or data.first_divergence is None):
        raise LocalizeError(f"{candidate} on {track} was not a bit-exact failure in {run.name} "
                            f"(lossless_gate {gate.status}: {gate.detail})")
    point, seed = data.first_divergence, data.seed
    recorded = evidence.campaign
    if recorded is None:
        raise LocalizeError(f"{run.name} recorded no campaign: the pass must start the same "
                            "launch lines")
    path = campaign_path or repo / recorded.file
    campaign = load_campaign(path)
    if canonical_campaign(campaign) != recorded.canonical:
        raise LocalizeError(f"{path.name} is not the campaign {run.name} ran (its canonical form "
                            "differs): the pass must start the same launch lines")
    # A frozen run also fixed its profiles' and inputs' bytes (the lock): they must still match.
    lock = recorded.freeze.lock_sha256
    if lock:
        now = verify(path)
        if now.state != "frozen" or now.lock_sha256 != lock:
            why = "; ".join(now.problems) or "another lock"
            raise LocalizeError(f"{path.name}: its profiles or inputs are not the ones "
                                f"{run.name} ran (lock {now.state}: {why})")
    plans = plan_campaign(campaign)
    if track not in plans:
        raise LocalizeError(f"{path.name}: no track {track}")
    plan = plans[track]
    if candidate not in {arm.id for arm in plan.arms}:
        raise LocalizeError(f"{path.name}: {candidate} does not enter {track}")
    root = run.parent
    sanitizer = Sanitizer.for_this_host(repo=campaign.engine_workdir(), evidence=root)
    bundle = EvidenceBundle.create(root, f"localize-{new_run_id()}", sanitizer)
    registry = InstanceRegistry()
    arms = Arms(campaign, plan, bundle, registry)
    status: RunStatus = "complete"
    try:
        b0_dir, cand_dir = (_dump_dir(run, evidence, track, a) for a in (ArmRole.B0, candidate))
        result = LocalizationPass(
            arms, candidate, point, seed if seed is not None else plan.seeds[0],
            (b0_dir, cand_dir) if b0_dir and cand_dir else None,
            equal_points=equal_before(data)).run()
        check = result.check()
        bundle.add_check(check)
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        for audit in registry.stop_all():
            bundle.add_audit(audit.json_dict())
        bundle.finish(status, lambda checks: [])
    _write_page(bundle.folder, check, run.name)
    bundle.sanitize_files()
    return bundle.folder, check


def _write_page(folder: Path, record: LocalizationCheck, run: str) -> None:
    from ref2va_accept.report import panel  # noqa: PLC0415

    (folder / "localize.html").write_text(
        "<!doctype html><meta charset='utf-8'><title>first divergence</title>"
        f"<h2>First divergence, from run {html.escape(run)}</h2>" + panel(record),
        encoding="utf-8")


def run(args: argparse.Namespace) -> int:
    folder, check = localize_run(args.run_folder, args.track, args.candidate, args.campaign,
                                 Path.cwd())
    if args.json:
        print(json.dumps({"folder": folder.name, "check": check.json_dict()}, indent=2))
    else:
        print(check.detail)
        print(f"page: {folder.name}/localize.html")
    return EXIT_OK if check.status is CheckStatus.PASS else EXIT_PROBLEM


def add_command(sub: Any) -> None:
    p = sub.add_parser("localize", help="after a lossless candidate's bit-exact failure: run the "
                       "localization pass again from the run's evidence and name the first "
                       "module where it parts from B0 (writes localize-<time>/localize.html)")
    p.add_argument("run_folder", type=Path, metavar="RUN",
                   help="the finished run's evidence folder")
    p.add_argument("--track", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("--campaign", type=Path, default=None,
                   help="the campaign file (default: the one the run recorded, from here)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)
