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

from ..campaign import load_campaign
from ..errors import EXIT_OK, EXIT_PROBLEM, LocalizeError
from ..evidence import EvidenceBundle, new_run_id
from ..lock import canonical_campaign, verify
from ..plan import plan_campaign
from ..sanitize import Sanitizer
from ..server import InstanceRegistry
from ..vocabulary import ArmRole
from ..workload import Arms
from .runner import Pass, equal_before


def _gate_check(evidence: dict[str, Any], track: str, candidate: str) -> dict[str, Any]:
    for check in evidence.get("checks", []):
        if (check.get("track"), check.get("arm"), check.get("name")) == (
                track, candidate, "lossless_gate"):
            found: dict[str, Any] = check
            return found
    raise LocalizeError(f"no lossless_gate check of {candidate} on {track} in this run")


def _dump_dir(run: Path, evidence: dict[str, Any], track: str, arm: str) -> Path | None:
    """The folder of the arm's watched (quality) request in the finished run, if it dumped."""
    for sample in evidence.get("samples", []):
        if (sample.get("track"), sample.get("arm"), sample.get("kind")) == (
                track, arm, "quality") and sample.get("dump_dir"):
            return run / str(sample["dump_dir"])
    return None


def localize_run(run: Path, track: str, candidate: str, campaign_path: Path | None,
                 repo: Path) -> tuple[Path, dict[str, Any]]:
    """Run the pass for one candidate of a finished run; its folder and the check's record."""
    try:
        evidence = json.loads((run / "evidence.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LocalizeError(f"{run.name}: not a finished run's evidence folder "
                            f"(evidence.json: {exc})") from None
    gate = _gate_check(evidence, track, candidate)
    data = gate.get("data") or {}
    point, seed = data.get("first_divergence"), data.get("seed")
    if gate.get("status") != "fail" or not isinstance(point, str):
        raise LocalizeError(f"{candidate} on {track} was not a bit-exact failure in {run.name} "
                            f"(lossless_gate {gate.get('status')}: {gate.get('detail')})")
    recorded = evidence.get("campaign") or {}
    path = campaign_path or repo / str(recorded.get("file"))
    campaign = load_campaign(path)
    if canonical_campaign(campaign) != recorded.get("canonical"):
        raise LocalizeError(f"{path.name} is not the campaign {run.name} ran (its canonical form "
                            "differs): the pass must start the same launch lines")
    # A frozen run also fixed its profiles' and inputs' bytes (the lock): they must still match.
    lock = (recorded.get("freeze") or {}).get("lock_sha256")
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
    status = "complete"
    try:
        b0_dir, cand_dir = (_dump_dir(run, evidence, track, a) for a in (ArmRole.B0, candidate))
        result = Pass(arms, candidate, point, int(seed) if seed is not None else plan.seeds[0],
                      (b0_dir, cand_dir) if b0_dir and cand_dir else None,
                      equal_points=equal_before(data)).run()
        check = result.check()
        bundle.add_check(check)
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        for audit in registry.stop_all():
            bundle.add_audit(audit.to_dict())
        bundle.finish(status, lambda checks: [])
    record = check.to_dict()
    _write_page(bundle.folder, record, run.name)
    bundle.sanitize_files()
    return bundle.folder, record


def _write_page(folder: Path, record: dict[str, Any], run: str) -> None:
    from ..report_localize import panel  # noqa: PLC0415

    (folder / "localize.html").write_text(
        "<!doctype html><meta charset='utf-8'><title>first divergence</title>"
        f"<h2>First divergence, from run {html.escape(run)}</h2>" + panel(record),
        encoding="utf-8")


def run(args: argparse.Namespace) -> int:
    folder, record = localize_run(args.run_folder, args.track, args.candidate, args.campaign,
                                  Path.cwd())
    if args.json:
        print(json.dumps({"folder": folder.name, "check": record}, indent=2))
    else:
        print(record["detail"])
        print(f"page: {folder.name}/localize.html")
    return EXIT_OK if record["status"] == "pass" else EXIT_PROBLEM


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
