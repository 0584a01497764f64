"""The frozen plan of one track: everything the arm runner, the gates and the latency protocol
read of the campaign, taken out of it once, typed.

This is the one place that turns a track id back into campaign objects. The arm runner
(workload.Arms), the lossless and lossy gates, the latency protocol and the run's request plan
(planning/_request_plan.py) take a `TrackPlan` instead of `(campaign, track_id)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from ref2va_accept.campaign import (
    ArmSpec,
    ComparisonPoint,
    DurationClass,
    LoadedCampaign,
    LossyGate,
    PinnedFile,
    RequestShape,
    Track,
    duration_class,
    load_campaign,
    quality_class,
)
from ref2va_accept.core import ArmRole, CampaignError, QualityClass
from ref2va_accept.media import MediaExpectation
from ref2va_accept.quality import WEIGHT_DIMENSIONS
from ref2va_accept.timing import ClientTimeouts, LatencySettings


@dataclass(frozen=True)
class InputFile:
    """A pinned input, its path made absolute against the campaign's folder."""

    path: Path
    mime: str


@dataclass(frozen=True)
class Inputs:
    prompt: Path
    reference_image: InputFile
    reference_audio: InputFile | None


@dataclass(frozen=True)
class Arm:
    """One arm entering the track: B0 or a candidate, with its campaign spec (profile, fields)."""

    id: str
    spec: ArmSpec

    @property
    def is_baseline(self) -> bool:
        return self.id == ArmRole.B0


@dataclass(frozen=True)
class LosslessContract:
    """A lossless track's frozen comparison points, in pipeline order (docs/quality.md)."""

    points: tuple[ComparisonPoint, ...]

    @property
    def diagnostics(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.points if p.source == "diagnostics")

    @property
    def mp4(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.points if p.source == "mp4")

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.points)


@dataclass(frozen=True)
class LossyScoring:
    """A lossy track's frozen gate and what its scorers read: weights and their pins."""

    gate: LossyGate
    weights: Mapping[str, Path]
    weight_pins: Mapping[str, str]  # only filled pins: a placeholder pins nothing
    stand_ins: frozenset[str] = frozenset()  # names whose files are seeded stand-ins
    device: str = "cpu"  # campaign.scoring.device: every model of B0's and the candidate's scores


@dataclass(frozen=True)
class TrackPlan:
    """One track of the loaded campaign, frozen: shape, seeds, inputs, arms, gate, timeouts."""

    track_id: str
    duration: DurationClass
    quality: QualityClass
    duration_s: float
    num_frames: int
    model: str  # the engine's model name, as every request names it
    shape: RequestShape
    seeds: tuple[int, ...]
    inputs: Inputs
    arms: tuple[Arm, ...]  # B0 first, then every candidate entering the track
    gate: LosslessContract | LossyScoring
    timeouts: ClientTimeouts
    latency: LatencySettings

    @property
    def candidates(self) -> tuple[Arm, ...]:
        return tuple(a for a in self.arms if not a.is_baseline)

    def arm(self, arm_id: str) -> Arm:
        for arm in self.arms:
            if arm.id == arm_id:
                return arm
        raise CampaignError(f"track {self.track_id}: no arm {arm_id!r}; its arms are "
                            f"{[a.id for a in self.arms]}")

    @property
    def lossless(self) -> LosslessContract:
        if not isinstance(self.gate, LosslessContract):
            raise CampaignError(f"track {self.track_id}: a lossy track has no lossless contract")
        return self.gate

    @property
    def lossy(self) -> LossyScoring:
        if not isinstance(self.gate, LossyScoring):
            raise CampaignError(f"track {self.track_id}: a lossless track has no lossy gate")
        return self.gate

    @property
    def expectation(self) -> MediaExpectation:
        """What every complete MP4 of this track looks like."""
        return MediaExpectation(num_frames=self.num_frames, fps=float(self.shape.fps),
                                width=self.shape.width, height=self.shape.height,
                                audio=self.shape.generate_sound)


def _input(campaign: LoadedCampaign, pinned: PinnedFile) -> InputFile:
    # The campaign infers the MIME type from the suffix when it is not given.
    return InputFile(campaign.resolve(pinned.path), pinned.mime or "application/octet-stream")


def _track(campaign: LoadedCampaign, track_id: str) -> Track:
    """The one way from a track id to the campaign's track (typed: the ids are a Literal)."""
    for known, track in campaign.model.tracks.items():
        if known == track_id:
            return track
    raise CampaignError(f"{campaign.path}: tracks: a track of this campaign "
                        f"({', '.join(campaign.model.tracks)}), found {track_id!r}")


def _gate(campaign: LoadedCampaign, track: Track) -> LosslessContract | LossyScoring:
    track_id = track.track_id
    if quality_class(track_id) == "lossless":
        return LosslessContract(tuple(track.comparison_points))
    if track.lossy_gate is None:  # the campaign refuses a lossy track without one
        raise CampaignError(f"{campaign.path}: tracks.{track_id}.lossy_gate: missing")
    # A track runs the models of the VBench dimensions it gates, no others: an ungated model-
    # based score would cost model time (a CPU minute per 15 s clip) for a number nobody froze.
    gated = {g.removeprefix("vbench.") for g in track.lossy_gate.gated if g.startswith("vbench.")}
    weights = {name: path for name, path in campaign.scorer_weight_paths().items()
               if gated & set(WEIGHT_DIMENSIONS.get(name, ()))}
    return LossyScoring(
        gate=track.lossy_gate,
        weights=MappingProxyType(weights),
        weight_pins=MappingProxyType(campaign.scorer_weight_pins()),
        stand_ins=campaign.scorer_stand_ins(), device=campaign.model.scoring.device)


def plan_track(campaign: LoadedCampaign, track_id: str, order_seed: int | None = None
               ) -> TrackPlan:
    """The frozen plan of one track of the campaign (CampaignError for a track it lacks).

    `order_seed`: the run's drawn seed when the campaign draws one per run (a plan made outside
    a run, to price or simulate it, takes 0: counts and costs do not depend on the order)."""
    track = _track(campaign, track_id)
    arms = tuple(Arm(spec.id, spec) for spec in campaign.arms_for(track_id))
    model = campaign.model
    protocol = model.protocol
    timeouts = protocol.timeouts[duration_class(track_id)]
    return TrackPlan(
        track_id=track_id,
        duration=duration_class(track_id),
        quality=quality_class(track_id),
        duration_s=track.duration_s,
        num_frames=track.num_frames,
        model=model.engine.model,
        shape=track.request,
        seeds=tuple(track.request.seeds),
        inputs=Inputs(
            prompt=campaign.resolve(track.inputs.prompt.path),
            reference_image=_input(campaign, track.inputs.reference_image),
            reference_audio=(None if track.inputs.reference_audio is None
                             else _input(campaign, track.inputs.reference_audio))),
        arms=arms,
        gate=_gate(campaign, track),
        timeouts=ClientTimeouts(request_s=timeouts.request_s, connect_s=timeouts.connect_s),
        latency=LatencySettings(
            replication=protocol.replication, instances_per_arm=protocol.instances_per_arm,
            baseline_instances=protocol.baseline_instances or "per_candidate",
            warmups=protocol.warmups,
            max_warmups=(protocol.warmups if protocol.max_warmups is None
                         else protocol.max_warmups),
            steady_fraction=protocol.steady_fraction,
            repeats=protocol.repeats, ordering=protocol.ordering,
            order_seed=(protocol.order_seed if isinstance(protocol.order_seed, int)
                        else order_seed or 0),
            order_drawn=protocol.order_seed == "per_run", pause_s=protocol.pause_s,
            warmup_steps=protocol.warmup_steps,
            drift_tolerance=protocol.drift_tolerance, target_ratio=protocol.target_ratio,
            confidence=protocol.confidence, decision_rule=protocol.decision_rule,
            caching_probe_requests=protocol.caching_probe_requests,
            caching_margin=protocol.caching_margin,
            device_kind=model.devices.kind, devices=tuple(model.devices.visible)),
    )


def plan_campaign(campaign: LoadedCampaign, order_seed: int | None = None
                  ) -> Mapping[str, TrackPlan]:
    """Every track of the campaign, planned once, in the campaign's order."""
    return MappingProxyType({track_id: plan_track(campaign, track_id, order_seed)
                             for track_id in campaign.model.tracks})


def plan_option(campaign: Path | None, track_id: str | None) -> TrackPlan | None:
    """The track a command names with ``--campaign CAMPAIGN --track T``; None when neither is
    given (CampaignError for one without the other, or a track the campaign lacks)."""
    if campaign is None and track_id is None:
        return None
    if campaign is None or track_id is None:
        raise CampaignError("--campaign and --track go together: a campaign file and one of "
                            "its tracks")
    return plan_track(load_campaign(campaign), track_id)


def _request_identity(plan: TrackPlan) -> tuple[object, ...]:
    """What B0 is asked at the track's first seed, on which launch line: the duration class,
    B0's profile and request overrides, the model, shape (seeds aside), frames, inputs, that
    seed and the timeouts."""
    b0 = plan.arm(ArmRole.B0).spec
    shape = {k: v for k, v in plan.shape.model_dump().items() if k != "seeds"}
    return (plan.duration, plan.model, b0.profile, sorted(b0.request.items()), shape,
            plan.num_frames, plan.inputs, plan.seeds[0], plan.timeouts)


def _groups(keys: Mapping[str, str | None]) -> dict[str, tuple[str, ...]]:
    """Per track, the tracks (itself among them, in campaign order) of the same key; a track
    whose key is None is its own group."""
    return {track_id: (track_id,) if key is None else
            tuple(t for t, k in keys.items() if k == key) for track_id, key in keys.items()}


def baseline_key(plan: TrackPlan) -> str | None:
    """What makes B0's latency instances of this track interchangeable with another track's:
    the measured request on its launch line (`_request_identity`) and the protocol itself.
    None when the track's B0 is not shared (per-candidate pairs or the request design)."""
    latency = plan.latency
    if latency.replication != "instance" or latency.baseline_instances != "shared":
        return None
    return repr((*_request_identity(plan), latency))


def baseline_groups(plans: Mapping[str, TrackPlan]) -> dict[str, tuple[str, ...]]:
    """Per track, the tracks (itself among them, in campaign order) whose candidates one
    set of B0 latency instances may serve: same duration class, same B0 launch line and the
    same measured request under the same protocol (`baseline_key`). A track alone is its own
    group. The lossless and lossy tracks of one duration class usually are one group: their
    B0 is the same server asked the same timed request."""
    return _groups({track_id: baseline_key(plan) for track_id, plan in plans.items()})


def gate_key(plan: TrackPlan) -> str:
    """What makes B0's quality-gate requests of this track the same as another track's: the
    request at its first seed on its launch line (`_request_identity`). The latency protocol
    plays no part: the gates' requests are not timed."""
    return repr(_request_identity(plan))


def gate_groups(plans: Mapping[str, TrackPlan]) -> dict[str, tuple[str, ...]]:
    """Per track, the tracks (itself among them, in campaign order) whose B0 quality gates one
    pair of B0 instances may serve (`gate_key`; judging/_b0_gate.py runs them). A track alone is its
    own group; the lossless and lossy tracks of one duration class usually are one."""
    return _groups({track_id: gate_key(plan) for track_id, plan in plans.items()})


@dataclass(frozen=True)
class Need:
    """What one pair of B0 gate instances answers: the lossless tracks' watched requests and,
    per instance, the plain seeds and which track makes each (kind, index, whether it records
    the B0 media check)."""

    watched: tuple[str, ...]  # lossless tracks, in group order
    plain: tuple[tuple[tuple[int, str, str, int, bool], ...], ...]  # per instance


def needs(plans: Mapping[str, TrackPlan]) -> Need:
    """The requests of a group's B0 gate instances (judging/_b0_gate.py runs them), from its tracks'
    plans in group order."""
    lossless = tuple(t for t, p in plans.items() if p.quality == "lossless")
    lossy = [t for t, p in plans.items() if p.quality == "lossy"]
    per_instance = []
    for instance in (0, 1):
        made: dict[int, tuple[int, str, str, int, bool]] = {}
        for track in lossy:
            for n, seed in enumerate(plans[track].seeds):
                if seed not in made:
                    made[seed] = (seed, track, "quality", instance * 100 + n,
                                  instance == 0 and n == 0)
        if instance == 0:
            for track in lossless:
                seed = plans[track].seeds[0]
                made.setdefault(seed, (seed, track, "unobserved", 0, False))
        per_instance.append(tuple(made.values()))
    return Need(lossless, tuple(per_instance))
