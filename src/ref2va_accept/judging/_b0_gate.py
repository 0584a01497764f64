"""B0's quality-gate instances, made once for every track that asks B0 the same gate request.

Alone, the lossless gate starts two B0 instances (a watched request with the comparison points
on each, and an unobserved one on the first) and the lossy gate two more (the track's seeds on
each). Where a lossless and a lossy track of one duration class send B0 the same request
(plan.gate_groups: the same launch line, model, shape, frames, inputs, first seed and timeouts),
one pair of B0 instances serves both gates: each instance answers every lossless track's watched
request, then the plain requests (no comparison points) every track needs, each seed once. The
lossless unobserved request and the lossy first-seed request of the first instance are the same
request, made once (by the lossy track, so it is recorded and scored there). That is two engine
starts and one request fewer per pair of tracks; run_plan and planning/_cost.py count it so.

Each track still judges its own B0 (lossless.judge_baseline, lossy's spread) from these
outcomes, and each check says which tracks the instances served.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ref2va_accept.core import ArmRole, Check
from ref2va_accept.planning import TrackPlan, needs

if TYPE_CHECKING:
    from ref2va_accept.arms import Arms, Outcome
    from ref2va_accept.evidence import AnyCheck
    from ref2va_accept.judging._latency import LatencySchedules

T = TypeVar("T")


@dataclass
class GateRuns:
    """What a pair of B0 gate instances answered: per lossless track its two watched requests,
    and per instance each plain seed's output (who made it is in its sample)."""

    tracks: tuple[str, ...]
    watched: dict[str, list[Outcome]] = field(default_factory=dict)
    plain: list[dict[int, Outcome]] = field(default_factory=lambda: [{}, {}])

    @property
    def shared(self) -> bool:
        return len(self.tracks) > 1


def run_gate_instances(runners: Mapping[str, Arms]) -> GateRuns:
    """The group's two B0 gate instances, one after the other, each stopped before the next
    starts (and when a request raises); every request lands in its own track's evidence."""
    tracks = tuple(runners)
    need = needs({t: a.plan for t, a in runners.items()})
    first = runners[tracks[0]]
    runs = GateRuns(tracks, {t: [] for t in need.watched})
    for instance, plain in enumerate(need.plain):
        engine = first.start(ArmRole.B0)
        try:
            for track in need.watched:
                arms = runners[track]
                runs.watched[track].append(arms.request(
                    engine, ArmRole.B0, kind="quality", index=instance,
                    diagnostics_points=arms.plan.lossless.diagnostics,
                    record_check=Check.B0_MEDIA if instance == 0 else None))
            for seed, track, kind, index, record in plain:
                runs.plain[instance][seed] = runners[track].request(
                    engine, ArmRole.B0, kind=kind, index=index, seed=seed,
                    record_check=Check.B0_MEDIA if record else None)
        finally:
            first.registry.stop(engine)
    return runs


# B0's checks that are not about its gate instances: which weights files made its scores says
# nothing of the instances that made the outputs, and its record has no field to say they were
# shared.
_NOT_OF_THE_INSTANCES = frozenset({Check.SCORER_WEIGHTS})


def mark_shared(checks: Sequence[AnyCheck], runs: GateRuns, **data: object
                ) -> tuple[AnyCheck, ...]:
    """A track's B0 checks, saying (in the detail, and `gate_instances_served` with `data` in
    the data) that their instances served other tracks too; as they are when they did not, and
    the checks that are not about the instances (`_NOT_OF_THE_INSTANCES`) always."""
    if not runs.shared:
        return tuple(checks)
    said = f"B0's gate instances served {'+'.join(runs.tracks)}"
    return tuple(check if check.name in _NOT_OF_THE_INSTANCES else
                 check.revised(detail=f"{check.detail} ({said})",
                               gate_instances_served=list(runs.tracks), **data)
                 for check in checks)


class GateInstances:
    """The session's B0 gate instances: per gate group of the tracks whose quality scenarios
    the session runs (set by the plugin with `share`), made once, by whichever of those
    scenarios runs first. Without `share` every track is its own group."""

    def __init__(self) -> None:
        self._groups: Mapping[str, tuple[str, ...]] = {}
        self._plans: Mapping[str, TrackPlan] = {}
        self._made: dict[tuple[str, ...], GateRuns] = {}

    def share(self, groups: Mapping[str, tuple[str, ...]], plans: Mapping[str, TrackPlan],
              tracks: Sequence[str]) -> None:
        """plan.gate_groups, restricted to `tracks` (those with a quality scenario here)."""
        self._groups = {t: tuple(m for m in g if m in tracks) for t, g in groups.items()
                        if t in tracks}
        self._plans = plans

    def group(self, track_id: str) -> tuple[str, ...]:
        return self._groups.get(track_id) or (track_id,)

    def runs(self, arms: Arms) -> GateRuns:
        track_id = arms.plan.track_id
        group = self.group(track_id)
        if group not in self._made:
            runners = {t: arms if t == track_id else arms.for_track(self._plans[t])
                       for t in group}
            self._made[group] = run_gate_instances(runners)
        return self._made[group]


class Baselines:
    """B0's reference runs, made once per track and gate and shared by the track's candidates
    (gates.BaselineCache); their B0 instances made once per gate group (`instances`); with the
    session's latency `schedules`, a candidate's gate hosted by its first latency instance."""

    def __init__(self, instances: GateInstances | None = None,
                 schedules: LatencySchedules | None = None) -> None:
        self._made: dict[tuple[str, str], Any] = {}
        self._failed: dict[tuple[str, str], Exception] = {}
        self.instances = instances if instances is not None else GateInstances()
        self.schedules = schedules
        # The localization pass after a lossless candidate's bit-exact failure (localize/);
        # pytest's --no-localize turns it off. B0's captures, kept for the session's passes.
        self.localize = True
        self.localize_b0: dict[tuple[Any, ...], Any] = {}

    def gate_runs(self, arms: Arms) -> GateRuns:
        return self.instances.runs(arms)

    def hosted_gate(self, arms: Arms, candidate: str) -> list[AnyCheck] | None:
        if self.schedules is None:
            return None
        return self.schedules.hosted_gate(arms, candidate)

    def get_or_make(self, gate: str, track_id: str, make: Callable[[], T]) -> T:
        """The track's reference run for the gate, made by the first scenario that needs it. One
        that failed is not made again: every later scenario fails with the same error (making it
        again would repeat the same judging of the same outputs, B0's scoring included)."""
        key = (gate, track_id)
        if key in self._failed:
            raise self._failed[key]
        if key not in self._made:
            try:
                self._made[key] = make()
            except Exception as exc:
                self._failed[key] = exc
                raise
        made: T = self._made[key]
        return made
