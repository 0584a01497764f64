"""The bring-up: one command an operator runs once on a fresh host, before anything is frozen.

It makes exactly the starts and requests `step_schedule` lists (so `plan` prices what it spends),
answers every question of `rows.QUESTIONS` with a row, and writes `bringup.json`,
`bringup.html` and `bringup.patch` into its run folder beside the usual evidence (every instance,
sample, log and dump of its engines). Each step records what it saw before the next starts; a
step that fails (an engine that does not start, a request refused) leaves the rows that depend
on it `not_checked`, naming the failure, and the steps that do not depend on it still run. A step
that raises stops the bring-up there, and a stop signal interrupts it (_stopping.py): its engines
are stopped in upstream's order, the rows it had not reached are `not_checked` naming where it
stopped, the page is written, and it exits with its own code.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from ref2va_accept.bringup._cost import price
from ref2va_accept.bringup._page import write_page
from ref2va_accept.bringup._patch import CampaignPatch
from ref2va_accept.bringup._records import BringupData
from ref2va_accept.bringup._rows import QUESTIONS, complete, not_checked
from ref2va_accept.bringup._step_schedule import display, step_schedule
from ref2va_accept.bringup._steps import Steps
from ref2va_accept.bringup._stopping import (
    EXIT_CONTRADICTED,
    EXIT_FINISHED,
    EXIT_SIGNALLED_BASE,
    EXIT_STOPPED_EARLY,
    StopSignals,
    signal_name,
    signal_of,
)
from ref2va_accept.campaign import LoadedCampaign, load_campaign
from ref2va_accept.engines import read_idle
from ref2va_accept.evidence import BringupRow, EvidenceBundle, new_run_id
from ref2va_accept.evidence.sanitize import Sanitizer

log = logging.getLogger(__name__)


@dataclass
class BringupResult:
    """What one bring-up saw, its rows, and where it wrote them."""

    folder: Path
    rows: list[BringupRow]
    data: BringupData  # what bringup.json holds
    patch: CampaignPatch | None = None
    patch_file: Path | None = None
    failure: str | None = None  # where and why it stopped before finishing, if it did
    signalled: int | None = None  # the stop signal that interrupted it

    @property
    def contradicted(self) -> list[BringupRow]:
        return [r for r in self.rows if r.status == "contradicted"]

    @property
    def finished(self) -> bool:
        return self.failure is None

    @property
    def exit_code(self) -> int:
        """128 + the signal when interrupted; EXIT_STOPPED_EARLY when a step raised; else 1
        when a row is contradicted, 0 when none is."""
        if self.signalled is not None:
            return EXIT_SIGNALLED_BASE + self.signalled
        if self.failure is not None:
            return EXIT_STOPPED_EARLY
        return EXIT_CONTRADICTED if self.contradicted else EXIT_FINISHED

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for row in self.rows:
            found[row.status] = found.get(row.status, 0) + 1
        return found


def patch_base(campaign: LoadedCampaign) -> Path:
    """Where the patch applies: the engine workdir (the checkout) when the campaign is in it,
    else the campaign's own folder."""
    workdir = campaign.engine_workdir()
    try:
        campaign.folder.relative_to(workdir)
        return workdir
    except ValueError:
        return campaign.folder


def run_bringup(campaign_path: Path, evidence_root: Path, run_id: str | None = None,
                policies: tuple[Path, ...] | None = None, *,
                warmup_demonstration: bool = True) -> BringupResult:
    """Run the bring-up of `campaign_path` and write its page, JSON and patch."""
    campaign = load_campaign(campaign_path)
    plan = step_schedule(campaign, policies, demonstrate=warmup_demonstration)
    run_id = run_id or f"bringup-{new_run_id()}"
    sanitizer = Sanitizer.for_this_host(repo=campaign.engine_workdir(), evidence=evidence_root)
    bundle = EvidenceBundle.create(evidence_root, run_id, sanitizer)
    cost = price(campaign, plan)
    work = Steps(campaign, bundle, plan, data=BringupData(
        campaign=campaign.path.name, run_id=bundle.run_id, questions=len(QUESTIONS),
        plan=cost.line(plan), schedule=plan, cost=cost))
    # Every stop's audit, the engines whose start failed or was interrupted included.
    work.registry.subscribe(lambda audit: bundle.add_audit(audit.json_dict()))
    started = time.monotonic()
    failure: str | None = None
    signalled: int | None = None
    with StopSignals(work.registry) as signals:
        try:
            _steps(work)
        except KeyboardInterrupt as exc:
            signalled = signal_of(exc)
            failure = f"interrupted by {signal_name(signalled)} during {work.step}"
            log.warning("bring-up %s", failure)
        except Exception as exc:
            failure = f"stopped early during {work.step}: {type(exc).__name__}: {exc}"
            log.exception("bring-up stopped early")
        # From here a signal only hurries the stops: the page is written whatever comes.
        signals.settle()
        _stop_all(work)
        return _finish(work, campaign, failure, signalled, round(time.monotonic() - started, 1))


def _stop_all(work: Steps) -> None:
    """Every engine still live (a step interrupted or raised before its own stop), stopped in
    upstream's order and audited."""
    try:
        work.registry.stop_all()
    except Exception:
        log.exception("bring-up: stopping the engines left")
        work.registry.hurry()


def _steps(work: Steps) -> None:
    """The steps in order, each named in `work.step` while it runs."""
    campaign, plan = work.campaign, work.plan
    work.step = "the identity preflight"
    work.host()
    work.step = "the serve command's flags"
    work.flags()
    work.step = "the reference inputs (ffprobe)"
    work.inputs()
    if campaign.model.devices.kind != "none":
        work.step = "the idle device memory"
        work.idle = read_idle(work.probe(), campaign.model.devices.visible)
        work.data.idle = work.idle
    for profile in plan.profiles:
        work.step = f"B0 with {display(campaign, profile)}"
        first = not any(r.served for r in work.policies)
        work.policy(profile, first)
        work.data.policies = [r.record() for r in work.policies]
        work.bundle.checkpoint()
    work.step = "the Cache-DiT server"
    work.cache_dit()
    if plan.warmup_demonstration:
        work.step = "the warm-up demonstration"
        work.demonstration()
    if plan.scoring:
        work.step = "the scoring prices"
        work.scoring()
    work.step = "the judgements"
    work.judge_policies()
    work.judge_prices()


def _finish(work: Steps, campaign: LoadedCampaign, failure: str | None, signalled: int | None,
            elapsed_s: float) -> BringupResult:
    """The rows (every question once), the patch, the page and the evidence's end."""
    bundle, data = work.bundle, work.data
    data.policies = [r.record() for r in work.policies]
    data.elapsed_s = elapsed_s
    data.failure = failure
    why = (f"not reached: the bring-up did not finish ({failure})" if failure
           else "not reached: an earlier step failed")
    work.put(not_checked("live_line", "needs a person at the host's terminal: watch the "
                         "progress line of any `pytest -m ...` run there"))
    rows = complete(work.rows, why)
    result = BringupResult(bundle.folder, rows, data, failure=failure, signalled=signalled)
    data.rows, data.counts = rows, result.counts()
    data.finished, data.exit_code = result.finished, result.exit_code
    try:
        result.patch = work.make_patch()
    except Exception as exc:
        data.patch_error = str(exc)
        log.exception("bring-up: no patch")
    write_page(result, campaign, bundle, patch_base(campaign))
    bundle.set_section("bringup", {"campaign": campaign.path.name,
                                   "rows": [r.json_dict() for r in rows], "failure": failure})
    if failure is not None:
        bundle.note(f"bring-up: {failure}")
    bundle.finish("interrupted" if signalled is not None
                  else "stopped" if failure is not None else "complete", lambda checks: [])
    bundle.sanitize_files()
    return result


def summary_lines(result: BringupResult) -> list[str]:
    counts = result.counts()
    lines = [row.line() for row in result.rows]
    lines.append(", ".join(f"{counts.get(s, 0)} {s}" for s in (
        "confirmed", "measured", "contradicted", "not_checked")))
    return lines


__all__ = ["BringupResult", "run_bringup", "summary_lines"]
