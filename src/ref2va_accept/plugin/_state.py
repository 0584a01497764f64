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

import pytest

from ref2va_accept.arms import OutcomeLog, say_now
from ref2va_accept.campaign import (
    TRACK_IDS,
    FreezeStatus,
    LoadedCampaign,
    canonical_campaign,
    input_checks,
    input_problems,
    load_campaign,
    problem_lines,
    quality_class,
    verify,
)
from ref2va_accept.campaign.identity import IdentityToolMissing, identity_checks, preflight
from ref2va_accept.core import ArmRole, Reason, WriteFailed, os_error_text
from ref2va_accept.engines import (
    DONE,
    MemoryGuard,
    start_reaper,
    stop_leftovers,
    stopped_line,
)
from ref2va_accept.evidence import (
    WRITE_FAILED,
    AnyCheck,
    Cleanup,
    EvidenceBundle,
    LedgerEntry,
    TrackVerdict,
)
from ref2va_accept.evidence.sanitize import Sanitizer
from ref2va_accept.history import LedgerError, read_ledger, with_attempt
from ref2va_accept.judging import (
    Baselines,
    GateInstances,
    LatencySchedules,
    judge_timed_outputs,
    judge_tracks,
)
from ref2va_accept.planning import (
    LossyScoring,
    ScenarioItem,
    TrackPlan,
    check_budget,
    check_disk,
    disk_refusal,
    disk_skipped_line,
    plan_campaign,
    plan_run,
)

STATE = pytest.StashKey["RunState"]()


def run_state(config: pytest.Config) -> RunState:
    """The session's RunState (made at configure by the evidence module). A pytest-xdist worker
    has none: the run's engines, evidence and verdicts live in one process, so a campaign
    scenario collected in a worker is refused in one line rather than as a KeyError."""
    try:
        return config.stash[STATE]
    except KeyError:
        if hasattr(config, "workerinput"):
            raise pytest.UsageError(
                "ref2va: the campaign's scenarios (tests/acceptance, quality, perf, verdicts) "
                "run in one pytest process, which starts and judges every engine: run them "
                "without -n (pytest-xdist); the harness's own tests may be spread") from None
        raise


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
    ledger_entries: tuple[LedgerEntry, ...] | None = None
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
                # The seed every latency schedule of this run was ordered by
                # (timing/_replication.py).
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
        return f"cannot write {where}: {os_error_text(failure.error)}"

    def say_failure(self, failure: WriteFailed) -> None:
        """The run's first failed write: one line on the terminal, now."""
        say_now(self.config,
                f"ref2va: {self.failure_line(failure)}; the run stops, status {WRITE_FAILED}")

    # -- engine stops (the session registry's one audit subscriber) ------------------------------
    def after_stop(self, audit: Cleanup) -> None:
        """Each stopped instance: its audit, then the device-memory wait, then a checkpoint.
        A write that fails here is the bundle's (said once, status failed_write), not the stop's:
        the next instance is still stopped and audited."""
        with contextlib.suppress(WriteFailed):
            self._record_audit(audit)
        with contextlib.suppress(WriteFailed):
            self._wait_for_memory(audit)
        with contextlib.suppress(WriteFailed):
            self.evidence().checkpoint()

    def _record_audit(self, audit: Cleanup) -> None:
        bundle = self.evidence()
        bundle.add_audit(audit.json_dict())
        bundle.add_check(audit.check())

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
        say_now(self.config, line)

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
        for check in input_checks(problems):
            bundle.add_check(check)
        self.ran_tracks.update(tracks)
        self.stopped = "\n".join(lines)
        bundle.checkpoint()
        return self.stopped

    def check_disk(self, items: Sequence[ScenarioItem], tracks: Iterable[str], *,
                   skip: bool) -> str | None:
        """The run's estimated evidence size against the free space of the evidence folder,
        before any engine starts (planning/_disk.py). Recorded in `disk`; when it does not fit, a
        note and the line to stop the run with (unless `skip`: then a note that the check was
        skipped). The line names the folder as given (the evidence's copy is sanitized)."""
        result = check_disk(plan_run(items, self.plans), self.plans, self.evidence_root,
                            skipped=skip)
        bundle = self.evidence()
        bundle.set_section("disk", result.json_dict())
        if result.fits:
            bundle.checkpoint()
            return None
        line = disk_refusal(result, str(self.evidence_root))
        if skip:
            said = disk_skipped_line(result, str(self.evidence_root))
            bundle.note(said)
            say_now(self.config, said)
            bundle.checkpoint()
            return None
        self._stop_with(line, tracks)
        return line

    def check_budget(self, tracks: Iterable[str], ledger_file: Path) -> str | None:
        """This run's planned hours, with what earlier runs spent (the ledger), against the
        campaign's ceilings and authorizations (planning/_budget.py), before any engine starts.
        Recorded in `budget`; past a ceiling, a note and the line to stop the run with."""
        wanted = set(tracks)
        plans = {t: p for t, p in self.plans.items() if t in wanted}
        try:
            earlier = read_ledger(ledger_file).entries
        except LedgerError as exc:
            line = f"ref2va: the campaign's ledger cannot be read, so its budget cannot be: {exc}"
            self._stop_with(line, tracks)
            return line
        self.ledger_entries = tuple(earlier)
        result = check_budget(self.campaign, plans, earlier)
        bundle = self.evidence()
        bundle.set_section("budget", result.json_dict())
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
        bundle.set_section("host_identity", result.json_dict())
        for check in identity_checks(result, campaign.model.tracks):
            bundle.add_check(check)
        devices = campaign.model.devices
        self.memory = MemoryGuard.for_devices(devices.kind, devices.visible,
                                              devices.memory_release)
        self.memory.read_idle()
        self._record_memory()
        bundle.checkpoint()

    def _stop_leftovers(self, bundle: EvidenceBundle, grace_s: float) -> None:
        """Engines of a dead run are stopped (by pid) before ours start, and recorded; then the
        reaper that stops ours if this judge dies outright (within half the frozen grace, so
        that they are gone within the grace)."""
        found = stop_leftovers(grace_s / 2)
        if found:
            bundle.set_section("leftovers", [f.json_dict() for f in found])
            bundle.note(stopped_line(found))
            say_now(self.config, f"ref2va: {stopped_line(found)}")
        if self.reaper is None:
            self.reaper = start_reaper(self.run_id, grace_s / 2, self.run_folder,
                                       self.config.rootpath, self.evidence_root)

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

    def _wait_for_memory(self, audit: Cleanup) -> None:
        if self.memory is None:
            return
        track = audit.instance.split(".", 1)[0]
        check = self.memory.after_stop(track, audit.arm, audit.instance)
        if check is not None:
            self.evidence().add_check(check)
        self._record_memory()

    def _record_memory(self) -> None:
        if self.memory is not None and self.bundle is not None:
            self.bundle.set_section("device_memory", self.memory.record().json_dict())

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

    def verdicts(self, checks: list[AnyCheck]) -> list[TrackVerdict]:
        if self.bundle is not None and self.bundle.failures:
            # Its verdict scenarios may never have run: every selected track gets its row.
            self.ran_tracks |= self.selected_tracks
        self.judge_timed_outputs(self.ran_tracks)
        campaign = self.campaign
        tracks = [(t, quality_class(t), [a.id for a in campaign.arms_for(t) if a.id != ArmRole.B0])
                  for t in TRACK_IDS if t in self.ran_tracks]
        rows = judge_tracks(tracks, checks, self.verdict_caps,
                            1 - campaign.model.protocol.confidence)
        if self.ledger_entries is None:  # the run read no ledger: no attempts to number
            return rows
        return [with_attempt(row, campaign.model.name, self.ledger_entries)
                for row in rows]
