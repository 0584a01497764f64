"""The pytest plugin: campaign selection, per-track parametrization and marks, fixtures that
start engines, the evidence bundle, and the verdict table at the top of the report.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import pytest
from pytest_html.basereport import BaseReport

from .campaign import TRACK_IDS, LoadedCampaign, duration_class, load_campaign, quality_class
from .checks import Check, Reason
from .device_memory import MemoryGuard
from .devices import probe_for
from .errors import CampaignError, Ref2VAError
from .evidence import EvidenceBundle, new_run_id
from .identity import IdentityToolMissing, identity_checks, preflight
from .lock import FreezeStatus, canonical_campaign, verify
from .plan import TrackPlan, plan_campaign
from .progress import PLUGIN_NAME as PROGRESS_PLUGIN
from .progress import ProgressPlugin
from .report import summary_html
from .sanitize import Sanitizer
from .server import REGISTRY, CleanupAudit
from .verdicts import CheckResult, TrackVerdict, judge
from .workload import Arms, OutcomeLog

log = logging.getLogger(__name__)
T = TypeVar("T")

CAMPAIGN_ENV = "REF2VA_CAMPAIGN"
DEFAULT_CAMPAIGN = Path("fixtures/campaigns/reference.yaml")
_STATE = pytest.StashKey["RunState"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ref2va", "Ref2VA acceptance campaign")
    group.addoption("--campaign", default=None, metavar="PATH",
                    help=f"campaign file (default: ${CAMPAIGN_ENV}, else {DEFAULT_CAMPAIGN})")
    group.addoption("--evidence-dir", default="evidence", metavar="DIR",
                    help="folder under which each run writes evidence/<run-id>/ (default: "
                         "evidence, relative to the rootdir)")


@dataclass
class RunState:
    """What one pytest session knows about the campaign and its evidence."""

    config: pytest.Config
    run_id: str
    evidence_root: Path
    campaign_path: Path
    own_report: Path | None
    _campaign: LoadedCampaign | None = None
    _freeze: FreezeStatus | None = None
    bundle: EvidenceBundle | None = None
    ran_tracks: set[str] = field(default_factory=set)
    host_checked: bool = False
    memory: MemoryGuard | None = None
    _plans: Mapping[str, TrackPlan] | None = None
    # Every request's typed outcome in this run, for the gates (never read back from evidence).
    outcomes: OutcomeLog = field(default_factory=OutcomeLog)

    @property
    def campaign(self) -> LoadedCampaign:
        if self._campaign is None:
            self._campaign = load_campaign(self.campaign_path)
        return self._campaign

    @property
    def plans(self) -> Mapping[str, TrackPlan]:
        """Each track's frozen plan, made once from the loaded campaign."""
        if self._plans is None:
            self._plans = plan_campaign(self.campaign)
        return self._plans

    @property
    def freeze(self) -> FreezeStatus:
        if self._freeze is None:
            self._freeze = verify(self.campaign_path)
        return self._freeze

    def display(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.config.rootpath.resolve()).as_posix()
        except ValueError:
            return path.name

    def evidence(self) -> EvidenceBundle:
        if self.bundle is None:
            sanitizer = Sanitizer.for_this_host(repo=self.config.rootpath,
                                                evidence=self.evidence_root)
            self.bundle = EvidenceBundle.create(self.evidence_root, self.run_id, sanitizer)
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
            })
            REGISTRY.on_audit.append(self._record_audit)
        return self.bundle

    def _record_audit(self, audit: CleanupAudit) -> None:
        bundle = self.evidence()
        bundle.add_audit(audit.to_dict())
        track = audit.instance_id.split(".", 1)[0]
        bundle.add_check(CheckResult(
            track, audit.arm_id, Check.CLEANUP, "pass" if audit.clean else "fail",
            None if audit.clean else Reason.INCOMPLETE_CLEANUP, "; ".join(audit.problems),
            {"instance": audit.instance_id, "stop_s": round(audit.stop_s, 3)}))

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
        try:
            result = preflight(campaign)
        except IdentityToolMissing as exc:
            pytest.exit(f"ref2va preflight: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
        bundle.data["host_identity"] = bundle.sanitizer.value(result.to_dict())
        for check in identity_checks(result, campaign.model.tracks):
            bundle.add_check(check)
        devices = campaign.model.devices
        self.memory = MemoryGuard(devices.kind, tuple(devices.visible), devices.memory_release,
                                  probe_for(devices.kind, devices.visible))
        self.memory.read_idle()
        REGISTRY.on_audit.append(self._wait_for_memory)
        self._record_memory()

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
            self.bundle.data["device_memory"] = self.bundle.sanitizer.value(self.memory.to_dict())
            self.bundle.write()

    def verdicts(self, checks: list[CheckResult]) -> list[TrackVerdict]:
        campaign = self.campaign
        cap = self.freeze.cap_reason
        rows: list[TrackVerdict] = []
        for track_id in TRACK_IDS:
            if track_id not in self.ran_tracks:
                continue
            candidates = [a.id for a in campaign.arms_for(track_id) if a.id != "b0"]
            judged: list[str | None] = [*candidates] or [None]
            for candidate in judged:
                rows.append(judge(track_id, quality_class(track_id), candidate, checks, cap))
        return rows


def _resolve_campaign_path(config: pytest.Config) -> Path:
    given = config.getoption("campaign")
    if given:
        return Path(given).resolve()
    from_env = os.environ.get(CAMPAIGN_ENV)
    if from_env:
        # A relative path in the environment is taken from the rootdir, so a host's shell
        # profile works from any folder of the checkout.
        path = Path(from_env)
        return path if path.is_absolute() else (config.rootpath / path)
    return config.rootpath / DEFAULT_CAMPAIGN


def _interrupt_on_sigterm(signum: int, frame: FrameType | None) -> None:
    # A SIGTERM to the harness (CI cancelling, a scheduler) must tear engines down like Ctrl-C.
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    run_id = new_run_id()
    evidence_root = Path(config.getoption("evidence_dir"))
    if not evidence_root.is_absolute():
        evidence_root = config.rootpath / evidence_root
    own_report = None
    if config.pluginmanager.hasplugin("html") and not config.getoption("htmlpath", None):
        own_report = evidence_root / run_id / "report.html"
        config.option.htmlpath = str(own_report)
        config.option.self_contained_html = True
    state = RunState(config, run_id, evidence_root, _resolve_campaign_path(config), own_report)
    config.stash[_STATE] = state
    # Live progress of the requests (progress.py); silent unless a campaign scenario is collected.
    config.pluginmanager.register(ProgressPlugin(config, lambda: state.campaign), PROGRESS_PLUGIN)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt_on_sigterm)


def _state(config: pytest.Config) -> RunState:
    return config.stash[_STATE]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Campaign tests run once per track (and per candidate entering it), with its marks.

    A test module may set `TRACK_CLASS = "lossless"` (or "lossy") to run on those tracks only.
    """
    if "track_id" not in metafunc.fixturenames:
        return
    state = _state(metafunc.config)
    try:
        campaign = state.campaign
    except Ref2VAError as exc:
        pytest.fail(f"cannot load the campaign: {exc}", pytrace=False)
    wanted = getattr(metafunc.module, "TRACK_CLASS", None)
    track_ids = [t for t in TRACK_IDS if t in campaign.model.tracks
                 and (wanted is None or quality_class(t) == wanted)]

    def marks(track_id: str) -> list[pytest.MarkDecorator]:
        return [getattr(pytest.mark, duration_class(track_id)),
                getattr(pytest.mark, quality_class(track_id))]

    if "candidate_id" in metafunc.fixturenames:
        metafunc.parametrize(("track_id", "candidate_id"), [
            pytest.param(t, arm.id, id=f"{t}:{arm.id}", marks=marks(t))
            for t in track_ids for arm in campaign.arms_for(t) if arm.id != "b0"
        ])
    else:
        metafunc.parametrize("track_id", [pytest.param(t, id=t, marks=marks(t))
                                          for t in track_ids])


def pytest_collection_finish(session: pytest.Session) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is None or state.own_report is None:
        return
    if any("track_id" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    # No campaign test in this run (unit tests only): no evidence run, so no report of ours.
    for plugin in session.config.pluginmanager.get_plugins():
        if isinstance(plugin, BaseReport):
            session.config.pluginmanager.unregister(plugin)
    with contextlib.suppress(OSError):
        state.own_report.parent.rmdir()  # pytest-html made it at configure; empty here
        state.evidence_root.rmdir()
    state.own_report = None


# -- fixtures ------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def campaign(pytestconfig: pytest.Config) -> LoadedCampaign:
    """The campaign this run judges (--campaign, $REF2VA_CAMPAIGN, or the reference campaign)."""
    try:
        return _state(pytestconfig).campaign
    except CampaignError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def evidence(pytestconfig: pytest.Config) -> EvidenceBundle:
    """The run's evidence bundle, created on first use under evidence/<run-id>/."""
    return _state(pytestconfig).evidence()


@pytest.fixture
def arms(pytestconfig: pytest.Config, campaign: LoadedCampaign, evidence: EvidenceBundle,
         track_id: str) -> Iterator[Arms]:
    """Starts engine instances for this track's arms; each is stopped and audited at teardown.

    An instance that does not stop cleanly fails the test's teardown, after the audit is in the
    evidence: a leaked worker or a held port is a finding, not noise.
    """
    state = _state(pytestconfig)
    state.ran_tracks.add(track_id)
    state.before_first_engine()
    runner = Arms(campaign, state.plans[track_id], evidence, outcomes=state.outcomes)
    progress = pytestconfig.pluginmanager.get_plugin(PROGRESS_PLUGIN)
    runner.observer = progress.observer if isinstance(progress, ProgressPlugin) else None
    yield runner
    dirty = [audit for audit in (REGISTRY.stop(i) for i in runner.started) if not audit.clean]
    if dirty:
        pytest.fail("engine cleanup incomplete: " + "; ".join(
            f"{a.instance_id}: {', '.join(a.problems)}" for a in dirty), pytrace=False)


class Baselines:
    """B0's reference runs, made once per track and gate and shared by the track's candidates."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, str], Any] = {}

    def get_or_make(self, gate: str, track_id: str, make: Callable[[], T]) -> T:
        key = (gate, track_id)
        if key not in self._made:
            self._made[key] = make()
        made: T = self._made[key]
        return made


@pytest.fixture(scope="session")
def baselines() -> Baselines:
    """The session's B0 reference runs (see Baselines)."""
    return Baselines()


@pytest.fixture
def track_verdict(pytestconfig: pytest.Config, evidence: EvidenceBundle
                  ) -> Callable[[str, str], TrackVerdict]:
    """The verdict of a candidate in a track from every check recorded so far in this run."""
    state = _state(pytestconfig)

    def verdict(track_id: str, candidate: str) -> TrackVerdict:
        state.ran_tracks.add(track_id)
        return judge(track_id, quality_class(track_id), candidate, evidence.checks,
                     state.freeze.cap_reason)

    return verdict


@pytest.fixture
def track(pytestconfig: pytest.Config, track_id: str) -> TrackPlan:
    """This test's track, as its frozen plan."""
    return _state(pytestconfig).plans[track_id]


# -- end of run ----------------------------------------------------------------------------------
@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is None:
        return
    # Last resort: anything still running (Ctrl-C mid-request) is stopped and audited before the
    # report is written; the fixtures' own teardown then finds the audit already done.
    REGISTRY.stop_all()
    if state.bundle is not None:
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        state.bundle.finish("interrupted" if interrupted else "complete", state.verdicts)


def pytest_html_report_title(report: Any) -> None:
    report.title = "Ref2VA acceptance report"


def pytest_html_results_summary(prefix: list[str], summary: list[str], postfix: list[str],
                                session: pytest.Session) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is None or state.bundle is None:
        return
    prefix.insert(0, summary_html(state.bundle))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or state.bundle is None:
        return
    tr = terminalreporter
    tr.write_sep("=", "Ref2VA verdicts per track")
    for v in state.bundle.verdicts:
        reasons = ", ".join(v.reasons)
        opened = f" open: {', '.join(v.open_checks)}" if v.open_checks else ""
        tr.write_line(f"{v.track:13} {v.candidate or '(none)':20} {v.verdict.upper():13} "
                      f"{reasons}{opened}")
    tr.write_line(f"evidence: {state.display(state.bundle.folder)}/evidence.json")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None:
        return
    REGISTRY.stop_all()
    if state.bundle is not None:
        state.bundle.sanitize_files()
        latest = state.evidence_root / "latest"
        if latest.is_symlink() or not latest.exists():
            latest.unlink(missing_ok=True)
            latest.symlink_to(state.run_id)
