"""What one pytest session knows about its campaign and its evidence (kept in `config.stash`).

Not a plugin module: the plugin's modules share it through ``run_state(config)``.
"""

from __future__ import annotations

import contextlib
import secrets
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from .. import budget, disk, ledger
from ..b0_gate import Baselines, GateInstances
from ..campaign import TRACK_IDS, LoadedCampaign, load_campaign, quality_class
from ..check_records import CheckResult, TrackVerdict
from ..checks import Check, Reason
from ..device_memory import MemoryGuard
from ..devices import probe_for
from ..evidence import WRITE_FAILED, EvidenceBundle
from ..identity import IdentityToolMissing, identity_checks, preflight
from ..input_pins import input_problems, problem_lines
from ..latency import LatencySchedules
from ..leftovers import DONE, start_reaper, stop_leftovers
from ..lock import FreezeStatus, canonical_campaign, verify
from ..plan import LossyScoring, TrackPlan, plan_campaign
from ..run_plan import ScenarioItem, plan_run
from ..safe_write import WriteFailed, describe
from ..sanitize import Sanitizer
from ..server import CleanupAudit
from ..timed_output import judge_timed_outputs
from ..verdicts import family_wise, judge
from ..vocabulary import ArmRole, CheckStatus
from ..workload import OutcomeLog

STATE = pytest.StashKey["RunState"]()


def run_state(config: pytest.Config) -> RunState:
    """The session's RunState (made at configure by the evidence module)."""
    return config.stash[STATE]


@dataclass
class RunState:
    """What one pytest session knows about the campaign and its evidence."""

    config: pytest.Config
    run_id: str
    evidence_root: Path
    campaign_path: Path
    _campaign: LoadedCampaign | None = None
    _freeze: FreezeStatus | None = None
    bundle: EvidenceBundle | None = None
    ran_tracks: set[str] = field(default_factory=set)
    # The tracks of the collected campaign scenarios (a run cut short is judged on all of them).
    selected_tracks: set[str] = field(default_factory=set)
    # Why the campaign, its plans or its lock could not be used (the session then stops).
    unusable: str | None = None
    # Why the harness stopped the run before any engine started (its final status: stopped).
    stopped: str | None = None
    host_checked: bool = False
    memory: MemoryGuard | None = None
    _plans: Mapping[str, TrackPlan] | None = None
    _order_seed: int | None = None
    # The ledger's entries before this run (read by the budget check): attempts are counted
    # from them. None until read.
    ledger_entries: tuple[dict[str, Any], ...] | None = None
    # Every request's typed outcome in this run, for the gates (never read back from evidence).
    outcomes: OutcomeLog = field(default_factory=OutcomeLog)
    # Which candidates each track's latency schedule covers, and its instances once run.
    latency: LatencySchedules = field(default_factory=LatencySchedules)
    # B0's quality-gate instances, one pair per gate group of the session's quality tracks.
    gate_instances: GateInstances = field(default_factory=GateInstances)
    # B0's gate results per track, on those instances; candidates' gates hosted by `latency`.
    baselines: Baselines = field(init=False)
    # Stops this run's engines if the judge dies outright (leftovers.start_reaper).
    reaper: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.baselines = Baselines(self.gate_instances, self.latency)
        self.baselines.localize = not self.config.getoption("no_localize", False)

    @property
    def campaign(self) -> LoadedCampaign:
        if self._campaign is None:
            self._campaign = load_campaign(self.campaign_path)
        return self._campaign

    @property
    def order_seed(self) -> int:
        """This run's seed of the instances' order: `--order-seed`, else the campaign's fixed
        one, else drawn now (protocol.order_seed: per_run); the evidence records it."""
        if self._order_seed is None:
            given = self.config.getoption("order_seed", None)
            fixed = self.campaign.model.protocol.order_seed
            self._order_seed = (int(given) if given is not None else
                                fixed if isinstance(fixed, int) else secrets.randbits(31))
        return self._order_seed

    @property
    def plans(self) -> Mapping[str, TrackPlan]:
        """Each track's frozen plan, made once from the loaded campaign."""
        if self._plans is None:
            plans = plan_campaign(self.campaign, self.order_seed)
            if self.config.getoption("order_seed", None) is not None:
                # Given on the command line: this run's order replays that seed, even on a
                # campaign that fixes another (the evidence says so).
                plans = MappingProxyType({t: replace(p, latency=replace(
                    p.latency, order_seed=self.order_seed)) for t, p in plans.items()})
            self._plans = plans
        return self._plans

    @property
    def freeze(self) -> FreezeStatus:
        if self._freeze is None:
            self._freeze = verify(self.campaign_path)
        return self._freeze

    @property
    def run_folder(self) -> Path:
        return self.evidence_root / self.run_id

    def display(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.config.rootpath.resolve()).as_posix()
        except ValueError:
            return path.name

    def evidence(self) -> EvidenceBundle:
        if self.bundle is None:
            sanitizer = Sanitizer.for_this_host(repo=self.config.rootpath,
                                                evidence=self.evidence_root)
            try:
                self.bundle = EvidenceBundle.create(self.evidence_root, self.run_id, sanitizer,
                                                    on_failure=self.say_failure)
            except WriteFailed as exc:  # not even the run's first event: nothing to finish
                self.say_failure(exc)
                pytest.exit(f"ref2va: no evidence could be written: {self.failure_line(exc)}",
                            returncode=pytest.ExitCode.INTERNAL_ERROR)
            campaign, freeze = self.campaign, self.freeze
            self.bundle.set_campaign({
                "name": campaign.model.name,
                "file": self.display(self.campaign_path),
                "engine_kind": campaign.model.engine.kind,
                "source_pin": campaign.model.engine.source_pin.model_dump(mode="json"),
                "canonical": canonical_campaign(campaign),
                "freeze": {
                    "state": freeze.state,
                    "lock_sha256": freeze.lock_sha256,
                    "problems": list(freeze.problems),
                    "unfilled": list(freeze.unfilled),
                    "verdict_cap": freeze.cap_reason,
                },
                # The seed every latency schedule of this run was ordered by (replication.py).
                "order": {"seed": self.order_seed,
                          "drawn_per_run": campaign.model.protocol.order_seed == "per_run",
                          "given": self.config.getoption("order_seed", None) is not None},
            })
        return self.bundle

    # -- write failures --------------------------------------------------------------------------
    def failure_line(self, failure: WriteFailed) -> str:
        """The failed file (under the run folder as `evidence/<run-id>/...`) and the error."""
        try:
            where = (f"{self.display(self.run_folder)}/"
                     f"{failure.path.relative_to(self.run_folder).as_posix()}")
        except ValueError:
            where = self.display(failure.path)
        return f"cannot write {where}: {describe(failure.error)}"

    def say_failure(self, failure: WriteFailed) -> None:
        """The run's first failed write: one line on the terminal, now."""
        self._say(f"ref2va: {self.failure_line(failure)}; the run stops, status {WRITE_FAILED}")

    # -- engine stops (the session registry's one audit subscriber) ------------------------------
    def after_stop(self, audit: CleanupAudit) -> None:
        """Each stopped instance: its audit, then the device-memory wait, then a checkpoint.
        A write that fails here is the bundle's (said once, status failed_write), not the stop's:
        the next instance is still stopped and audited."""
        with contextlib.suppress(WriteFailed):
            self._record_audit(audit)
        with contextlib.suppress(WriteFailed):
            self._wait_for_memory(audit)
        with contextlib.suppress(WriteFailed):
            self.evidence().checkpoint()

    def _record_audit(self, audit: CleanupAudit) -> None:
        bundle = self.evidence()
        bundle.add_audit(audit.to_dict())
        track = audit.instance_id.split(".", 1)[0]
        bundle.add_check(CheckResult(
            track, audit.arm_id, Check.CLEANUP,
            CheckStatus.PASS if audit.clean else CheckStatus.FAIL,
            None if audit.clean else Reason.INCOMPLETE_CLEANUP, "; ".join(audit.problems),
            {"instance": audit.instance_id, "stop_s": round(audit.stop_s, 3)}))

    def warn_stand_ins(self, tracks: Iterable[str]) -> None:
        """A note and a terminal line, before any engine, for each scorer pin that is a seeded
        stand-in's bytes on a campaign that does not declare it, where a selected lossy track
        scores with it: its scores fail the scorer_weights check (lossy.weights_check), so
        that track's verdicts can be no better than inconclusive."""
        undeclared = self.campaign.scorer_undeclared_stand_ins()
        used = {name for track_id in tracks if (plan := self.plans.get(track_id)) is not None
                and isinstance(plan.gate, LossyScoring) for name in plan.gate.weights}
        hit = sorted(set(undeclared) & used)
        if not hit:
            return
        line = ("ref2va: scorer_weights " + ", ".join(
            f"{name} (pinned to the sha256 of {undeclared[name]}'s seeded stand-in)"
            for name in hit) + ": the campaign does not mark them stand_in: true, so no lossy "
            "verdict scored with them will be better than inconclusive; pin the real files")
        self.evidence().note(line)
        self._say(line)

    def check_inputs(self, tracks: Iterable[str]) -> str | None:
        """Every track's inputs against their pins, before any engine starts (every run).

        Each problem is a note and, per track it touches, a failing `inputs` check on B0
        (`protocol_deviation`); the selected `tracks` get their verdict rows. Returns the lines
        to stop the run with, None when every input is its pin.
        """
        problems = input_problems(self.campaign)
        if not problems:
            return None
        bundle = self.evidence()
        lines = [f"ref2va: input check: {line}" for line in problem_lines(problems)]
        for line in lines:
            bundle.note(line)
        for track_id in dict.fromkeys(p.track for p in problems):
            own = [p for p in problems if p.track == track_id]
            bundle.add_check(CheckResult(
                track_id, ArmRole.B0, Check.INPUTS, CheckStatus.FAIL, Reason.PROTOCOL_DEVIATION,
                "; ".join(p.line() for p in own), {"inputs": [p.to_dict() for p in own]}))
        self.ran_tracks.update(tracks)
        self.stopped = "\n".join(lines)
        bundle.checkpoint()
        return self.stopped

    def check_disk(self, items: Sequence[ScenarioItem], tracks: Iterable[str], *,
                   skip: bool) -> str | None:
        """The run's estimated evidence size against the free space of the evidence folder,
        before any engine starts (disk.py). Recorded in `disk`; when it does not fit, a note and
        the line to stop the run with (unless `skip`: then a note that the check was skipped).
        The line names the folder as given (the evidence's copy is sanitized)."""
        result = disk.check(plan_run(items, self.plans), self.plans, self.evidence_root,
                            skipped=skip)
        bundle = self.evidence()
        bundle.set_section("disk", result.to_dict())
        if result.fits:
            bundle.checkpoint()
            return None
        line = result.refusal(str(self.evidence_root))
        if skip:
            said = (f"ref2va: disk check skipped (--ref2va-skip-disk-check): needs about "
                    f"{disk.fmt_bytes(result.estimate.need_bytes)}, "
                    f"{disk.fmt_bytes(result.free_bytes)} free on the filesystem of "
                    f"{self.evidence_root}")
            bundle.note(said)
            self._say(said)
            bundle.checkpoint()
            return None
        self._stop_with(line, tracks)
        return line

    def check_budget(self, tracks: Iterable[str], ledger_file: Path) -> str | None:
        """This run's planned hours, with what earlier runs spent (the ledger), against the
        campaign's ceilings and authorizations (budget.py), before any engine starts. Recorded
        in `budget`; past a ceiling, a note and the line to stop the run with."""
        wanted = set(tracks)
        plans = {t: p for t, p in self.plans.items() if t in wanted}
        try:
            earlier = ledger.read_ledger(ledger_file).entries
        except ledger.LedgerError as exc:
            line = f"ref2va: the campaign's ledger cannot be read, so its budget cannot be: {exc}"
            self._stop_with(line, tracks)
            return line
        self.ledger_entries = tuple(earlier)
        result = budget.check(self.campaign, plans, earlier)
        bundle = self.evidence()
        bundle.set_section("budget", result.to_dict())
        refusal = result.refusal()
        if refusal is None:
            bundle.checkpoint()
            return None
        self._stop_with(refusal, tracks)
        return refusal

    def _stop_with(self, line: str, tracks: Iterable[str]) -> None:
        """Stop the run before any engine: the line as a note, every selected track judged."""
        bundle = self.evidence()
        bundle.note(line)
        self.ran_tracks.update(tracks)
        self.stopped = line
        bundle.checkpoint()

    def before_first_engine(self) -> None:
        """Once per session, before any engine starts: the host identity preflight, then the
        assigned devices' idle memory level and the wait for it after every stop.

        A tool the pin needs but the host lacks ends the session (usage error, nothing started);
        an identity that differs from the pin is a `host_identity` check failing every track
        with `protocol_deviation`.
        """
        if self.host_checked:
            return
        self.host_checked = True
        bundle, campaign = self.evidence(), self.campaign
        self._stop_leftovers(bundle, campaign.model.engine.shutdown_grace_s)
        try:
            result = preflight(campaign)
        except IdentityToolMissing as exc:
            pytest.exit(f"ref2va preflight: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
        bundle.set_section("host_identity", result.to_dict())
        for check in identity_checks(result, campaign.model.tracks):
            bundle.add_check(check)
        devices = campaign.model.devices
        self.memory = MemoryGuard(devices.kind, tuple(devices.visible), devices.memory_release,
                                  probe_for(devices.kind, devices.visible))
        self.memory.read_idle()
        self._record_memory()
        bundle.checkpoint()

    def _stop_leftovers(self, bundle: EvidenceBundle, grace_s: float) -> None:
        """Engines of a dead run are stopped (by pid) before ours start, and recorded; then the
        reaper that stops ours if this judge dies outright (within half the frozen grace, so
        that they are gone within the grace)."""
        found = stop_leftovers(grace_s / 2)
        if found:
            listed = ", ".join(f"{f.name}[{f.pid}] ({f.tag}, {f.stopped_by})" for f in found)
            bundle.set_section("leftovers", [f.to_dict() for f in found])
            bundle.note(f"stopped {len(found)} engine process(es) left by a dead run: {listed}")
            self._say(f"ref2va: stopped {len(found)} engine process(es) left by a dead run: "
                      f"{listed}")
        if self.reaper is None:
            self.reaper = start_reaper(self.run_id, grace_s / 2, self.run_folder,
                                       self.config.rootpath, self.evidence_root)

    def _say(self, line: str) -> None:
        """One line on the terminal now, even from inside a test (output capture paused)."""
        plugins = self.config.pluginmanager
        reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin(
            "capturemanager")
        if reporter is None:
            return
        paused = capture.global_and_fixture_disabled() if capture is not None else None
        with paused if paused is not None else contextlib.nullcontext():
            reporter.write_line(line)

    def close_reaper(self) -> None:
        """The judge is ending normally, its evidence final: the reaper is told so (it then
        leaves the run's folder alone), finds nothing of ours left, and exits."""
        if self.reaper is not None:
            with contextlib.suppress(OSError):
                if self.reaper.stdin is not None:
                    self.reaper.stdin.write(DONE)
                    self.reaper.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.reaper.wait(timeout=30)
            self.reaper = None

    def _wait_for_memory(self, audit: CleanupAudit) -> None:
        if self.memory is None:
            return
        track = audit.instance_id.split(".", 1)[0]
        check = self.memory.after_stop(track, audit.arm_id, audit.instance_id)
        if check is not None:
            self.evidence().add_check(check)
        self._record_memory()

    def _record_memory(self) -> None:
        if self.memory is not None and self.bundle is not None:
            self.bundle.set_section("device_memory", self.memory.to_dict())

    # -- verdicts --------------------------------------------------------------------------------
    @property
    def verdict_caps(self) -> list[str]:
        """What caps every verdict of this run at inconclusive: an unfrozen or drifted lock, and
        a campaign that lets the engine sleep declared device time."""
        caps = [c for c in (self.freeze.cap_reason,) if c is not None]
        if self.campaign.model.protocol.declared_device_time:
            caps.append(Reason.DECLARED_DEVICE_TIME.value)
        return caps

    def judge_timed_outputs(self, tracks: Iterable[str]) -> None:
        """The timed-output checks of `tracks`' candidates, judged now (verdict time) where both
        outputs are in and none is recorded yet (timed_output.judge_timed_outputs), and
        recorded; a comparison that could not be made is a note, its check left open."""
        if self._plans is None or self.bundle is None:
            return  # no track was planned, so no request ran: nothing to compare
        bundle = self.bundle
        found, problems = judge_timed_outputs(self._plans, self.outcomes, bundle.checks, tracks)
        with contextlib.suppress(WriteFailed):  # a failed write is the run's failed_write status
            for line in problems:
                bundle.note(line)
            for check in found:
                bundle.add_check(check)

    def verdicts(self, checks: list[CheckResult]) -> list[TrackVerdict]:
        if self.bundle is not None and self.bundle.failures:
            # Its verdict scenarios may never have run: every selected track gets its row.
            self.ran_tracks |= self.selected_tracks
        self.judge_timed_outputs(self.ran_tracks)
        campaign = self.campaign
        caps = self.verdict_caps
        rows: list[TrackVerdict] = []
        alpha = 1 - campaign.model.protocol.confidence
        for track_id in TRACK_IDS:
            if track_id not in self.ran_tracks:
                continue
            candidates = [a.id for a in campaign.arms_for(track_id) if a.id != ArmRole.B0]
            judged: list[str | None] = [*candidates] or [None]
            track_rows = [judge(track_id, quality_class(track_id), candidate, checks, caps)
                          for candidate in judged]
            rows += [self._attempt(r) for r in family_wise(track_rows, checks, alpha)]
        return rows

    def _attempt(self, row: TrackVerdict) -> TrackVerdict:
        """The row with its attempt number and the earlier attempts' verdicts (the ledger)."""
        if self.ledger_entries is None or row.candidate is None:
            return row
        name = self.campaign.model.name
        earlier = [e for e in self.ledger_entries
                   if e.get("kind", "attempt") == "attempt" and e.get("campaign") == name
                   and e.get("track") == row.track and e.get("candidate") == row.candidate]
        said = tuple(f"{e.get('run_id')}: {e.get('verdict')}"
                     + (f" ({', '.join(e.get('reasons') or [])})" if e.get("reasons") else "")
                     for e in earlier)
        return replace(row, attempt=len(earlier) + 1, earlier=said)
