"""A bring-up's state: what each step saw (policies, requests, imports), its rows so far,
and the helpers the steps (_steps.py) and the judgements (_judge.py, _readings.py) share."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ref2va_accept.arms import Arms, Outcome
from ref2va_accept.bringup._records import (
    SYNC_TIMEOUT,
    WAVE_TIMEOUT,
    Bound,
    BringupData,
    CacheUse,
    PolicyRecord,
    RequestSummary,
    ServerBounds,
    StopRecord,
)
from ref2va_accept.bringup._scoring import ScoringPrice
from ref2va_accept.bringup._step_schedule import BringupSchedule
from ref2va_accept.campaign import ArmSpec, LoadedCampaign
from ref2va_accept.engines import InstanceRegistry, Release, probe_for
from ref2va_accept.evidence import (
    BringupRow,
    Cleanup,
    EvidenceBundle,
    IdleLevel,
    WarmupDemonstrationCheck,
)
from ref2va_accept.planning import Arm, TrackPlan, plan_track
from ref2va_contract.diagnostics import ENABLED_PATH_FILE, TEXT_ENCODER_TP_KEY
from ref2va_contract.launch import PROJECT_ENV_PREFIX

log = logging.getLogger(__name__)

START_TOLERANCE = 0.25  # a measured start within 25% of the estimate confirms it
POINT_FOR_PATH = "latent.video"  # one small point: enough for enabled_path.json
TRACK_LABEL = "bringup"


@dataclass
class PatchInputs:
    """What the judgements measured for the campaign patch (Judging.make_patch)."""

    start_s: float | None = None  # the median start of the memory-policy profiles
    chosen: PolicyRun | None = None  # the first profile that started, served and released
    release_worst_s: float | None = None  # the slowest memory release after a stop
    # (track, dump folder, MP4) of B0's lossless requests: their points' shapes and dtypes
    dumps: list[tuple[str, Path, Path | None]] = field(default_factory=list)


@dataclass
class PolicyRun:
    """One B0 memory-policy profile: its start, request, dumps, stop and memory release."""

    profile: str
    path: Path | None = None
    started: bool = False
    start_s: float | None = None
    start_error: str | None = None
    hbm_loaded_mb: dict[str, float] | None = None
    hbm_problem: str | None = None
    server_env: dict[str, str] | None = None
    request: Outcome | None = None
    enabled_path: dict[str, Any] | None = None
    dump_folders: int = 0
    stop: Cleanup | None = None  # the stop's audit
    release: Release | None = None
    tp_expected: int | None = None  # the profile's text-encoder-tp-size (None: it sets none)

    @property
    def served(self) -> bool:
        return self.request is not None and self.request.complete

    @property
    def tp_seen(self) -> int | None:
        """The text-encoder TP size the server reports in enabled_path.json (None: unread)."""
        value = (self.enabled_path or {}).get(TEXT_ENCODER_TP_KEY)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def record(self) -> PolicyRecord:
        """As bringup.json records it, typed (the page reads it)."""
        outcome = self.request
        return PolicyRecord(
            profile=self.profile, started=self.started,
            start_s=None if self.start_s is None else round(self.start_s, 3),
            start_error=self.start_error, hbm_loaded_mb=self.hbm_loaded_mb,
            hbm_problem=self.hbm_problem,
            request=None if outcome is None else RequestSummary(
                ok=outcome.sample.ok, complete=outcome.complete,
                latency_s=outcome.sample.latency_s, sha256=outcome.sample.sha256,
                explain=outcome.explain(), sample_id=outcome.sample.sample_id),
            enabled_path=self.enabled_path, dump_folders=self.dump_folders,
            text_encoder_tp={"profile": self.tp_expected, "server": self.tp_seen},
            stop=self.stop,
            release=None if self.release is None else self.release.record())



def enabled_path_of(outcome: Outcome | None) -> dict[str, Any] | None:
    if outcome is None or outcome.dump_dir is None:
        return None
    try:
        return dict(json.loads((outcome.dump_dir / ENABLED_PATH_FILE).read_text("utf-8")))
    except (OSError, ValueError):
        return None


def cache_of(path: dict[str, Any] | None) -> CacheUse:
    """What a request's enabled_path.json says its cache did."""
    cache = (path or {}).get("cache") or {}
    return CacheUse(backend=str(cache.get("backend", "unknown")),
                    reused_steps=list(cache.get("reused_steps") or []))



@dataclass
class BringupState:
    """What one bring-up has seen so far, and the helpers every step and judgement use."""

    campaign: LoadedCampaign
    bundle: EvidenceBundle
    plan: BringupSchedule
    registry: InstanceRegistry = field(default_factory=InstanceRegistry)
    rows: dict[str, BringupRow] = field(default_factory=dict)
    data: BringupData = field(default_factory=BringupData)  # what bringup.json will hold
    policies: list[PolicyRun] = field(default_factory=list)
    idle: IdleLevel | None = None
    imports: dict[str, str] = field(default_factory=dict)
    cache_runs: dict[str, Outcome] = field(default_factory=dict)
    long_request: Outcome | None = None
    long_path: dict[str, Any] | None = None
    long_timeout_s: float | None = None  # the client's timeout of the 15 s request
    long_run: PolicyRun | None = None  # the B0 server that served the 15 s request
    preflight_error: str | None = None  # the identity preflight could not finish
    bad_audio_seen: tuple[int | None, str, str | None] | None = None  # status, detail, failure
    cache_paths: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    cache_log: str = ""  # the Cache-DiT server's log tail, read before its stop
    step: str = "the start"  # the step under way: where a bring-up that stopped, stopped
    launch_env: dict[str, str] | None = None  # B0's launch environment (Steps.launch_environment)
    stops: list[StopRecord] = field(default_factory=list)
    patch_inputs: PatchInputs = field(default_factory=PatchInputs)
    # the prices (_pricing.py): the capture requests (by level) and the server that sent them,
    # why a level was not measured, the demonstration per duration class (its check, or why it
    # did not run) and the scoring prices (and, per duration class, why none)
    capture_runs: dict[str, Outcome] = field(default_factory=dict)
    capture_server: PolicyRun | None = None
    capture_problems: dict[str, str] = field(default_factory=dict)
    demos: dict[str, WarmupDemonstrationCheck | str] = field(default_factory=dict)
    scoring_prices: list[ScoringPrice] = field(default_factory=list)
    scoring_missing: dict[str, str] = field(default_factory=dict)

    # -- helpers ---------------------------------------------------------------------------------
    @property
    def model(self) -> Any:
        return self.campaign.model

    def put(self, row: BringupRow) -> None:
        self.rows[row.id] = row
        log.info("bring-up: %s", row.line())

    def track_plan(self, track: str, arm_spec: ArmSpec) -> TrackPlan:
        plan = plan_track(self.campaign, track, order_seed=0)
        return replace(plan, arms=(Arm(arm_spec.id, arm_spec),))

    def arms(self, track: str, arm_spec: ArmSpec) -> Arms:
        return Arms(self.campaign, self.track_plan(track, arm_spec), self.bundle, self.registry)

    def policy_spec(self, profile: Path) -> ArmSpec:
        rel = os.path.relpath(profile, self.campaign.folder)
        spec: ArmSpec = self.model.baseline.model_copy(update={"profile": rel})
        return spec

    def server_bounds(self, run: PolicyRun | None) -> ServerBounds:
        """The time bounds as `run`'s server sees them: from its own environment when it was
        read, else composed as the launch composes it (engines.engine_environment: the
        judge's environment, then the campaign's `environment`, then the profile's `env:`,
        the later winning)."""
        if run is not None and run.server_env is not None:
            layers: list[tuple[str, dict[str, str]]] = [("the server's environment",
                                                         run.server_env)]
        else:
            profile_env: dict[str, str] = {}
            if run is not None and run.path is not None:
                profile_env = dict(self.campaign.profile(self.policy_spec(run.path)).env)
            inherited = {k: v for k, v in os.environ.items()
                         if not k.startswith(PROJECT_ENV_PREFIX)}
            layers = [("the profile's env", profile_env),
                      ("the campaign's environment", dict(self.model.environment)),
                      ("the judge's environment, inherited", inherited)]

        def bound(name: str) -> Bound:
            source, value = next(((where, env[name]) for where, env in layers if name in env),
                                 ("unset", None))
            return Bound.read(value, source)

        return ServerBounds(wave=bound(WAVE_TIMEOUT), sync=bound(SYNC_TIMEOUT))

    def probe(self) -> Any:
        devices = self.model.devices
        return probe_for(devices.kind, devices.visible)

