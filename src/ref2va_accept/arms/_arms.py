"""From a track's plan to requests, engine instances and recorded outcomes.

This is the one place where the plan, server, client, media and evidence meet, so that the test
scenarios stay thin: start an arm's engine, send a track's request, keep what came back (in the
evidence, sanitized, and as typed outcomes in the run's `OutcomeLog` for the gates to read).
"""

from __future__ import annotations

import json
import logging
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ref2va_accept.campaign import LoadedCampaign, unfilled_fields
from ref2va_accept.core import (
    ArmRole,
    CampaignError,
    Check,
    CheckStatus,
    EngineStartError,
    ForeignServerError,
    MediaError,
    Reason,
)
from ref2va_accept.engines import (
    LOOPBACK,
    EngineInstance,
    InstanceRegistry,
    LaunchSpec,
    engine_kind,
    free_port,
    new_nonce,
    start_instance,
)
from ref2va_accept.evidence import AnyCheck, Sample, new_check
from ref2va_accept.media import MediaProblem, check_media, probe
from ref2va_accept.planning import Arm, InputFile, TrackPlan
from ref2va_accept.timing import GenerationRequest, ReferenceFile, TimedClient
from ref2va_contract.diagnostics import (
    ACCEPTANCE_FIELD,
    CAPTURE_KEY,
    CAPTURE_STOPPED_MARKER,
    CAPTURE_STOPPED_STATUS,
    DUMP_DIR_KEY,
    POINTS_KEY,
)
from ref2va_contract.launch import DIAGNOSTICS_ROOT_ENV, WORKDIR_TOKEN

# Placeholders that only a run on the host can fill, so they must not stop engines from starting:
# comparison-point shapes (from B0's first dump: `ref2va-accept fill-points`), the engine's source
# identity (shown by `ref2va-accept preflight`) and scorer weights (their dimensions stay open).
# The run is still not frozen, so every verdict stays capped.
_FILLED_FROM_A_RUN = re.compile(
    r"^(tracks\.[^.]+\.comparison_points\[\d+\]\.shape|engine\.source_pin(\..+)?|scorer_weights\..+|scorer_weights_dir)$"
)

if TYPE_CHECKING:
    from ref2va_accept.evidence import EvidenceBundle

log = logging.getLogger(__name__)
# How long a lost connection waits for the engine's process to be seen exiting (a crashing
# server closes its sockets a moment before its exit status can be read).
_EXIT_WAIT_S = 2.0


def describe_exit(code: int) -> str:
    """`exit code 70`, or `signal 9 (SIGKILL)` for a process a signal ended (Popen: -9)."""
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"signal {-code} ({signal.Signals(-code).name})"
    except ValueError:
        return f"signal {-code}"

def _reference(pinned: InputFile) -> ReferenceFile:
    return ReferenceFile(filename=pinned.path.name, content=pinned.path.read_bytes(),
                         mime=pinned.mime)


def build_request(
    plan: TrackPlan,
    arm: Arm,
    seed: int,
    diagnostics: Diagnostics | None = None,
    steps: int | None = None,
) -> GenerationRequest:
    """The multipart request of one track for one arm: same inputs and seeds in every arm.

    With `diagnostics`, the request owns a dump: `extra_params.acceptance` names the folder and
    the comparison points the engine must write there. Without, nothing is asked and nothing paid.
    """
    shape, inputs = plan.shape, plan.inputs
    prompt = inputs.prompt.read_text(encoding="utf-8").strip()
    references = [_reference(inputs.reference_image)]
    if inputs.reference_audio is not None:
        references.append(_reference(inputs.reference_audio))
    values: dict[str, Any] = {
        "prompt": prompt,
        "model": plan.model,
        "width": shape.width,
        "height": shape.height,
        "num_frames": plan.num_frames,
        "fps": shape.fps,
        # A demonstrated cheap warm-up (protocol.warmup_steps) runs fewer steps, same shape.
        "num_inference_steps": shape.num_inference_steps if steps is None else steps,
        "flow_shift": shape.flow_shift,
        "guidance_scale": shape.guidance_scale,
        "negative_prompt": shape.negative_prompt,
        "seed": seed,
        "generate_sound": shape.generate_sound,
        "extra_params": shape.extra_params if diagnostics is None else {
            **shape.extra_params,
            ACCEPTANCE_FIELD: {DUMP_DIR_KEY: str(diagnostics.dump_dir),
                               POINTS_KEY: list(diagnostics.points),
                               **({CAPTURE_KEY: dict(diagnostics.capture)}
                                  if diagnostics.capture else {})},
        },
    }
    # Per-arm fields (e.g. quality=lossless); the campaign refuses any that the track fixes.
    values.update(arm.spec.request)
    return GenerationRequest.from_values(values, tuple(references))


@dataclass(frozen=True)
class Diagnostics:
    """Where one request's comparison points go, and which."""

    dump_dir: Path
    points: tuple[str, ...]
    # The localization pass's module capture (localize/), or None: the acceptance block's
    # ``capture`` object as the engine reads it.
    capture: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Outcome:
    """One request's sample and, when media came back, its probe and problems."""

    sample: Sample
    media: dict[str, Any] | None
    problems: tuple[MediaProblem, ...]
    media_path: Path | None = None
    dump_dir: Path | None = None

    @property
    def complete(self) -> bool:
        return self.sample.ok and self.media is not None and not self.problems

    @property
    def says_capture_stopped(self) -> bool:
        """The engine's answer "stopped once the capture was whole" to a request that asked for
        it (ref2va_contract.diagnostics: its status, its message opening with the marker). Only
        what the engine says: whether the capture really is whole, the localization pass checks
        (judging.localize._judgement.stopped_whole)."""
        return (not self.sample.ok and self.sample.status == CAPTURE_STOPPED_STATUS
                and f"{CAPTURE_STOPPED_MARKER}: " in (self.sample.detail or ""))

    def explain(self) -> str:
        if not self.sample.ok:
            return f"request failed ({self.sample.failure}): {self.sample.detail}"
        return "; ".join(f"{p.code}: {p.message}" for p in self.problems) or "complete"


@dataclass(frozen=True)
class RequestStart:
    """Which request is about to be sent, as an observer (live progress) is told."""

    track: str
    arm: str
    kind: str
    index: int
    seed: int


class RequestObserver(Protocol):
    """Told as each engine instance starts, and as each request starts and ends (outcome None
    when the request raised)."""

    def on_engine_start(self, track: str, arm: str) -> None: ...

    def on_request_start(self, request: RequestStart) -> None: ...

    def on_request_end(self, request: RequestStart, outcome: Outcome | None) -> None: ...


class OutcomeLog:
    """Every request's typed outcome in one run, in the order taken.

    The gates read what came back from here, never from the sanitized evidence: one log lives as
    long as the run, so that a check comparing requests of two scenarios (the timed outputs
    against the watched one) finds both whichever scenario ran first.
    """

    def __init__(self) -> None:
        self._outcomes: list[Outcome] = []

    def add(self, outcome: Outcome) -> None:
        self._outcomes.append(outcome)

    def of(self, track: str, arm: str, kind: str) -> list[Outcome]:
        return [o for o in self._outcomes
                if (o.sample.track, o.sample.arm, o.sample.kind) == (track, arm, kind)]


class Arms:
    """Starts engine instances for the arms of one track's plan and records what they do."""

    def __init__(
        self,
        campaign: LoadedCampaign,
        plan: TrackPlan,
        evidence: EvidenceBundle,
        registry: InstanceRegistry | None = None,
        outcomes: OutcomeLog | None = None,
    ) -> None:
        self.campaign = campaign  # the engine, devices and profiles every launch reads
        self.plan = plan
        self.evidence = evidence
        # The pytest plugin passes its session's registry; alone, the runner keeps its own.
        self.registry = registry if registry is not None else InstanceRegistry()
        self.outcomes = outcomes if outcomes is not None else OutcomeLog()
        self.started: list[EngineInstance] = []
        # Set by whoever shows progress (the pytest plugin); the judge itself never needs one.
        self.observer: RequestObserver | None = None

    def for_track(self, plan: TrackPlan) -> Arms:
        """Arms for another track of this run, sharing its evidence, registry, outcome log,
        observer and list of started instances (so this scenario's teardown audits what it
        starts): a B0 shared across tracks runs one schedule for both tracks' candidates."""
        other = Arms(self.campaign, plan, self.evidence, self.registry, self.outcomes)
        other.started = self.started
        other.observer = self.observer
        return other

    def launch_spec(self, arm: Arm, profiler_config: Mapping[str, Any] | None = None
                    ) -> LaunchSpec:
        """How one instance of ``arm`` starts; with ``profiler_config``, with vLLM's torch
        profiler configured (``--profiler-config``: the profiling scenario, never a timed arm)."""
        campaign = self.campaign
        engine = campaign.model.engine
        profile = campaign.profile(arm.spec)
        port = free_port()
        # The number is run-wide (the registry's): one id, log, tag and audit per lifetime.
        instance_id = f"{self.plan.track_id}.{arm.id}.{self.registry.next_serial()}"
        workdir = str(campaign.engine_workdir())
        env: dict[str, str] = {"PYTHONUNBUFFERED": "1", **campaign.model.environment,
                               **{name: value.replace(WORKDIR_TOKEN, workdir)
                                  for name, value in profile.env.items()}}
        devices = campaign.model.devices
        if devices.visibility_env:
            env[devices.visibility_env] = ",".join(str(d) for d in devices.visible)
        # Request-owned dumps may only land inside this run's evidence (the engine refuses others).
        env[DIAGNOSTICS_ROOT_ENV] = str(self.evidence.dumps_root)
        kind = engine_kind(engine.kind)
        for name, value in kind.env_defaults.items():
            env.setdefault(name, value)
        extra = (() if profiler_config is None else
                 ("--profiler-config", json.dumps(dict(profiler_config), sort_keys=True)))
        argv = kind.argv(engine.resolved_command(), engine.model,
                         campaign.resolve(arm.spec.profile), profile.cli_args(), LOOPBACK, port,
                         extra)
        return LaunchSpec(
            arm_id=arm.id,
            instance_id=instance_id,
            argv=argv,
            env=env,
            cwd=campaign.engine_workdir(),
            port=port,
            startup_timeout_s=engine.startup_timeout_s,
            shutdown_grace_s=engine.shutdown_grace_s,
            log_path=self.evidence.log_path(instance_id),
            tag=f"{self.evidence.run_id}/{instance_id}",
            nonce=new_nonce() if kind.echoes_nonce else None,
        )

    def start(self, arm_id: str = ArmRole.B0,
              profiler_config: Mapping[str, Any] | None = None) -> EngineInstance:
        track_id = self.plan.track_id
        unfilled = [f for f in unfilled_fields(self.campaign) if not _FILLED_FROM_A_RUN.match(f)]
        if unfilled:
            # A placeholder model path, input or flag cannot start anything meaningful.
            raise CampaignError(f"{self.campaign.path}: cannot start an engine while fields are "
                                f"unfilled: {', '.join(unfilled)}")
        spec = self.launch_spec(self.plan.arm(arm_id), profiler_config)
        if self.observer is not None:
            self.observer.on_engine_start(track_id, arm_id)
        self.evidence.add_instance(spec.instance_record(track_id, self.evidence.run_id).json_dict())
        try:
            instance = start_instance(spec, self.registry)
        except ForeignServerError as exc:
            # Another server on the port is not the engine failing: its own reason, never judged.
            self.evidence.add_check(new_check(
                track_id, arm_id, Check.ENGINE_START, CheckStatus.FAIL, Reason.FOREIGN_SERVER,
                str(exc).splitlines()[0], {"instance": spec.instance_id}))
            raise
        except EngineStartError as exc:
            # The evidence keeps the engine's last log lines (sanitized as every record is); the
            # error that rises is one line naming the log, relative to the run's folder.
            log_file = self.evidence.relative(spec.log_path)
            self.evidence.add_check(new_check(
                track_id, arm_id, Check.ENGINE_START, CheckStatus.FAIL, Reason.ENGINE_START_FAILED,
                f"{exc}; last log lines ({log_file}):\n{exc.log_tail}",
                {"instance": spec.instance_id, "log": log_file, "exit_code": exc.exit_code}))
            raise EngineStartError(f"{exc}; log: {log_file}", exit_code=exc.exit_code,
                                   log_tail=exc.log_tail) from None
        except Exception as exc:
            self.evidence.add_check(new_check(
                track_id, arm_id, Check.ENGINE_START, CheckStatus.FAIL, Reason.ENGINE_START_FAILED,
                str(exc).splitlines()[0], {"instance": spec.instance_id}))
            raise
        self.started.append(instance)
        return instance

    def request(
        self,
        engine: EngineInstance,
        arm_id: str,
        *,
        kind: str,
        index: int,
        seed: int | None = None,
        record_check: Check | None = None,
        diagnostics_points: Sequence[str] = (),
        steps: int | None = None,
        capture: Mapping[str, Any] | None = None,
    ) -> Outcome:
        """One timed request (see `_request`), with the observer told as it starts and ends;
        `steps`: fewer denoising steps than the track's (a cheap warm-up)."""
        if seed is None:
            seed = self.plan.seeds[0]
        started = RequestStart(self.plan.track_id, arm_id, kind, index, seed)
        if self.observer is not None:
            self.observer.on_request_start(started)
        outcome: Outcome | None = None
        try:
            outcome = self._request(engine, started, record_check, diagnostics_points, steps,
                                    capture)
        finally:
            if self.observer is not None:
                self.observer.on_request_end(started, outcome)
        return outcome

    def _request(self, engine: EngineInstance, started: RequestStart, record_check: Check | None,
                 diagnostics_points: Sequence[str], steps: int | None = None,
                 capture: Mapping[str, Any] | None = None) -> Outcome:
        """One timed request; the sample, the MP4 and its probe land in the evidence at once.

        With `diagnostics_points`, the engine dumps them under the run's evidence (a quality
        request); timed requests carry none, since dumping perturbs timing.
        """
        plan = self.plan
        track_id, arm_id, kind, index, seed = (started.track, started.arm, started.kind,
                                               started.index, started.seed)
        arm = plan.arm(arm_id)
        diagnostics = None
        if diagnostics_points:
            diagnostics = Diagnostics(
                self.evidence.dump_dir(track_id, engine.spec.instance_id, f"{kind}-{index}"),
                tuple(diagnostics_points), capture,
            )
        request = build_request(plan, arm, seed, diagnostics, steps)
        with TimedClient(engine.base_url, plan.timeouts) as client:
            sample, body = client.generate(request, arm=arm_id, track=track_id, kind=kind,
                                           index=index, seed=seed)
        if sample.failure == "connection_lost":
            # A lost connection is most often the engine dying: say how, if it did.
            code = engine.exit_code(wait_s=_EXIT_WAIT_S)
            if code is not None:
                sample = sample.model_copy(update={
                    "detail": f"engine exited with {describe_exit(code)} during the request; "
                              f"{sample.detail}"})
        engine.snapshot_tree()
        media: dict[str, Any] | None = None
        problems: list[MediaProblem] = []
        path: Path | None = None
        if body and sample.ok:
            # A full disk: nothing of the MP4 is kept, and WriteFailed ends the test.
            path = self.evidence.write_media(track_id, arm_id,
                                             f"{kind}-{index}-seed{seed}-{sample.sample_id}.mp4",
                                             body)
            sample = sample.model_copy(update={"media_file": self.evidence.relative(path)})
            try:
                probed = probe(path)
                media = probed.json_dict()
                problems = check_media(probed, plan.expectation)
            except MediaError as exc:
                problems = [MediaProblem(code="unreadable", message=str(exc))]
            self.evidence.add_media({
                "sample_id": sample.sample_id, "file": sample.media_file, "probe": media,
                "problems": [{"code": p.code, "message": p.message} for p in problems],
            })
        if diagnostics is not None:
            sample = sample.model_copy(
                update={"dump_dir": self.evidence.relative(diagnostics.dump_dir)})
        self.evidence.add_sample(sample.json_dict())
        outcome = Outcome(sample, media, tuple(problems), path,
                          diagnostics.dump_dir if diagnostics else None)
        self.outcomes.add(outcome)
        if record_check:
            self.evidence.add_check(media_check(record_check, track_id, arm_id, outcome))
        return outcome


def media_check(name: Check, track_id: str, arm_id: str, outcome: Outcome) -> AnyCheck:
    """A completeness check of one arm's output, with the reason code its failure means."""
    baseline = arm_id == ArmRole.B0
    data = {"sample_id": outcome.sample.sample_id, "latency_s": outcome.sample.latency_s,
            "sha256": outcome.sample.sha256}
    if not outcome.sample.ok:
        reason = Reason.BASELINE_REQUEST_FAILED if baseline else Reason.CANDIDATE_REQUEST_FAILED
        return new_check(track_id, arm_id, name, CheckStatus.FAIL, reason, outcome.explain(),
                         data)
    if not outcome.complete:
        reason = Reason.BASELINE_INVALID_MEDIA if baseline else Reason.INVALID_MEDIA
        return new_check(track_id, arm_id, name, CheckStatus.FAIL, reason, outcome.explain(),
                         data)
    return new_check(track_id, arm_id, name, CheckStatus.PASS, None, "complete MP4", data)

