"""The campaign file's schema: engine, devices, arms, scoring, search, budget, and the whole file.

The tracks are in `_tracks.py` and the timing protocol in `_protocol.py`; this module adds
everything around them and the cross-field rules of the file as a whole (unique arm ids, a
timeout set per duration class, arms naming real tracks).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from ref2va_accept.campaign._fields import (
    DurationClass,
    RelPath,
    StrictModel,
    TrackId,
    duration_class,
    env_violations,
    is_env_name,
)
from ref2va_accept.campaign._files import raise_violations
from ref2va_accept.campaign._protocol import Protocol
from ref2va_accept.campaign._tracks import Track, track_violations
from ref2va_accept.campaign.identity import SourcePin, pin_violations
from ref2va_accept.core import (
    ArmRole,
)
from ref2va_accept.engines import MemoryRelease, engine_kind
from ref2va_accept.evidence import DeviceKind, EngineKindName
from ref2va_accept.quality import WEIGHT_NAMES, unknown_weight_message
from ref2va_contract.launch import DECLARED_TIME_ENV

LOCK_SCHEMA = "ref2va-lock/1"
# The prices a bring-up measures (`measured`: field -> the bring-up run that measured it), each
# field whole or one duration class (capture level) of it.
MEASURED_FIELDS = ("protocol.expected_start_s", "protocol.expected_request_s",
                   "protocol.expected_stop_s", "protocol.capture_overhead",
                   "protocol.warmup_demonstration", "scoring.seconds_per_output")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# Form fields that define the matched request; an arm overriding one would no longer be matched
# (a step-count change is a scope change, not a candidate).
_MATCHED_FIELDS = frozenset(
    {
        "prompt", "model", "seed", "seconds", "size", "width", "height", "num_frames", "fps",
        "aspect_ratio", "short_edge", "num_inference_steps", "guidance_scale", "flow_shift",
        "negative_prompt", "generate_sound", "extra_params", "input_reference",
        "input_references", "image_reference", "audio_reference", "video_reference",
    }
)  # fmt: skip


class ScorerWeights(StrictModel):
    """A model file a VBench scorer reads from the host's disk; never downloaded."""

    # Absent: where VBench's cache keeps it under `scorer_weights_dir` (weight_names.VBENCH_LAYOUT);
    # relative: under `scorer_weights_dir`, or beside the campaign file when there is none.
    path: str | None = None
    sha256: str
    # Seeded random weights in the file's official format (`ref2va-accept scorers standins`):
    # its scores are labelled stand-in in the evidence and the report, never taken for VBench's.
    stand_in: bool = False


_DEVICE = re.compile(r"^(cpu|npu:\d+|cuda:\d+)$")


class Scoring(StrictModel):
    """Where the lossy gate's scorers run, and what one output costs there."""

    # cpu, npu:N (torch_npu) or cuda:N: every model and its `made_with` record use it, and B0 and
    # the candidate are always scored on the same one.
    device: str = "cpu"
    # Seconds to score one output of a duration class on one gated dimension (its scorer id),
    # on `device` (benchmarks/vbench_cost.py measures them): `plan` prices scoring with these.
    seconds_per_output: dict[DurationClass, dict[str, Annotated[float, Field(ge=0)]]] | None = None
    # What weights those seconds were measured with: the campaign's pinned files, or the shipped
    # stand-ins (the same networks, so the same cost) while the pins are still placeholders.
    measured_with: Literal["standins", "pinned"] | None = None

    @model_validator(mode="after")
    def _device(self) -> Scoring:
        if not _DEVICE.match(self.device):
            raise_violations([(("device",), f"cpu, npu:N or cuda:N, found {self.device!r}")])
        return self

    @model_serializer(mode="wrap")
    def _absent_stays_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in ("seconds_per_output", "measured_with"):
            if getattr(self, name) is None:
                data.pop(name, None)
        return data


class SearchDirection(StrictModel):
    """One candidate direction of the campaign's search, and the tracks it is screened on."""

    id: str
    tracks: list[TrackId] = Field(min_length=1)
    note: str = ""


class OutcomeMix(StrictModel):
    """The share of directions expected to end each way (they add up to 1)."""

    gate_failed: float = Field(ge=0, le=1)
    out_of_reach: float = Field(ge=0, le=1)
    at_target: float = Field(ge=0, le=1)

    @model_validator(mode="after")
    def _whole(self) -> OutcomeMix:
        total = self.gate_failed + self.out_of_reach + self.at_target
        if abs(total - 1) > 1e-9:
            raise_violations([((), f"shares adding up to 1, found {total:g}")])
        return self


class Search(StrictModel):
    """The whole search the budget covers: every direction (a candidate may be defined later),
    priced by `ref2va-accept plan` worst case and at the outcome mix."""

    directions: list[SearchDirection] = Field(min_length=1)
    outcome_mix: OutcomeMix | None = None


class BudgetAuthorization(StrictModel):
    """More hours than the ceiling, granted by someone, recorded before the run that needs it."""

    by: str = Field(min_length=1)
    at: str = Field(min_length=1)
    wall_hours: float = Field(ge=0)
    device_hours: float = Field(ge=0)
    note: str = ""


class Budget(StrictModel):
    max_candidates: int = Field(default=12, ge=0)
    max_wall_hours: float = Field(default=16, gt=0)
    max_logical_device_hours: float = Field(default=64, gt=0)
    # Each raises the ceilings by its hours (planning/_budget.py); absent, left out of the lock.
    authorizations: list[BudgetAuthorization] | None = None

    @model_serializer(mode="wrap")
    def _absent_stays_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.authorizations is None:
            data.pop("authorizations", None)
        return data


class EngineSpec(StrictModel):
    kind: EngineKindName
    model: str
    command: list[str] | None = Field(default=None, min_length=1)
    workdir: RelPath = "."
    # Structured: which fields an engine kind needs is in engine_kinds (pin_fields); the preflight
    # compares each with the host before the first engine starts.
    source_pin: SourcePin
    startup_timeout_s: float = Field(gt=0)
    shutdown_grace_s: float = Field(default=30, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _pin_for_kind(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "source_pin" in data:
            kind = data.get("kind")
            raise_violations(
                [
                    (("source_pin", *loc), msg)
                    for loc, msg in pin_violations(
                        kind if isinstance(kind, str) else "", data["source_pin"]
                    )
                ]
            )
        return data

    def resolved_command(self) -> list[str]:
        """The executable prefix; the default stays out of the frozen file so it is host-neutral."""
        if self.command is not None:
            return list(self.command)
        return engine_kind(self.kind).default_command()


class DeviceSpec(StrictModel):
    kind: DeviceKind
    visible: list[int] = []
    visibility_env: str | None = None
    # The wait for device memory to return to idle after each instance (engines/_device_memory.py).
    memory_release: MemoryRelease = MemoryRelease()

    @model_validator(mode="after")
    def _consistent(self) -> DeviceSpec:
        violations: list[tuple[tuple[str | int, ...], str]] = []
        if self.kind == "none":
            if self.visible:
                violations.append((("visible",), f"no devices for kind none, found {self.visible}"))
        else:
            if self.visibility_env is None:
                violations.append(
                    (("visibility_env",), f"an env var name for kind {self.kind}, found none")
                )
            elif not is_env_name(self.visibility_env):
                violations.append(
                    (("visibility_env",), f"an env var name, found {self.visibility_env!r}")
                )
            if not self.visible:
                violations.append((("visible",), f"device ids for kind {self.kind}, found none"))
        for i, dev in enumerate(self.visible):
            if dev < 0 or self.visible.index(dev) != i:
                violations.append((("visible", i), f"unique non-negative ids, found {dev}"))
        raise_violations(violations)
        return self


# What kind of change a candidate is (docs/campaign.md, "The candidate record"): one that keeps
# the numerical contract, an approximation of one of three kinds, or a change of scope (another
# model, distillation, fewer steps) that only the requester may allow.
ChangeClass = Literal["implementation", "approximate_caching", "quantization", "sparsity",
                      "scope_change"]
CHANGE_CLASSES: tuple[str, ...] = ("implementation", "approximate_caching", "quantization",
                                   "sparsity", "scope_change")


class Attribution(StrictModel):
    """Where a candidate's change comes from."""

    kind: Literal["upstream_pr", "upstream_commit", "local_patch"]
    ref: str = Field(min_length=1)  # the PR or commit (URL or id), or the patch (file, summary)


class ScopeDecision(StrictModel):
    """The requester's recorded decision that allows a scope change."""

    decided_by: str = Field(min_length=1)
    decided_at: str = Field(min_length=1)
    decision: str = Field(min_length=1)


class ArmSpec(StrictModel):
    id: str
    profile: RelPath
    request: dict[str, str | int | float | bool] = {}
    tracks: list[TrackId] | None = None
    description: str = ""
    # The candidate record (absent: not declared; each left out of the lock when absent, so
    # campaigns frozen before these fields existed keep their hash).
    hypothesis: str | None = None
    attribution: Attribution | None = None
    change_class: ChangeClass | None = None
    scope_decision: ScopeDecision | None = None

    @model_validator(mode="after")
    def _shape(self) -> ArmSpec:
        violations: list[tuple[tuple[str | int, ...], str]] = []
        if not _SLUG.match(self.id):
            violations.append((("id",), f"a slug [a-z0-9][a-z0-9._-]*, found {self.id!r}"))
        if self.change_class == "scope_change" and self.scope_decision is None:
            violations.append(
                (("scope_decision",), "a recorded scope decision (decided_by, decided_at, "
                 "decision) for a scope_change candidate: another model, distillation or fewer "
                 "steps leaves the numerical contract, which only the requester may allow; "
                 "found none")
            )  # fmt: skip
        if self.scope_decision is not None and self.change_class != "scope_change":
            violations.append(
                (("scope_decision",), "no scope decision unless change_class is scope_change, "
                 f"found one with change_class {self.change_class!r}")
            )  # fmt: skip
        for key in self.request:
            if key in _MATCHED_FIELDS:
                violations.append(
                    (("request", key), "a field the matched request does not fix (the track "
                     f"sets it for every arm), found {key!r}")
                )  # fmt: skip
        raise_violations(violations)
        return self

    @model_serializer(mode="wrap")
    def _absent_stays_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in ("hypothesis", "attribution", "change_class", "scope_decision"):
            if getattr(self, name) is None:
                data.pop(name, None)
        return data


class Campaign(StrictModel):
    schema_version: Literal[1]
    name: str
    description: str = ""
    engine: EngineSpec
    devices: DeviceSpec
    environment: dict[str, str] = {}
    baseline: ArmSpec
    candidates: list[ArmSpec] = []
    tracks: dict[TrackId, Track] = Field(min_length=1)
    protocol: Protocol
    budget: Budget
    # Model files of the VBench scorers by name (dino_vitb16, clip_vitb32, ...:
    # quality/_weight_names.py), on the host's disk; a scorer whose weights are absent leaves its
    # dimension open. A name no scorer reads is refused here, not found out at B0's first score.
    scorer_weights: dict[str, ScorerWeights] = {}
    # VBench's cache folder (~/.cache/vbench, or $VBENCH_CACHE_DIR), as VBench's own downloads
    # lay it out; relative to the campaign file when relative.
    scorer_weights_dir: str | None = None
    # The scoring device and its price per output (absent: the CPU, unpriced).
    scoring: Scoring = Field(default_factory=Scoring)
    # The candidate directions the budget covers (absent: the campaign's own candidates).
    search: Search | None = None
    # Which prices a host's bring-up measured: a field of MEASURED_FIELDS (whole, or one duration
    # class or capture level of it) -> the bring-up run that measured it. The bring-up's patch
    # writes it with the values; `plan` labels every price it uses measured (and by which run),
    # estimated, a bound, or unpriced. Absent: nothing was measured by a bring-up.
    measured: dict[str, Annotated[str, Field(min_length=1)]] | None = None

    @model_serializer(mode="wrap")
    def _absent_stays_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Left out of the lock's canonical form when absent or default, so that campaigns frozen
        # before these fields existed keep their hash.
        data: dict[str, Any] = handler(self)
        if self.search is None:
            data.pop("search", None)
        if self.measured is None:
            data.pop("measured", None)
        if self.scoring == Scoring():
            data.pop("scoring", None)
        return data

    @model_validator(mode="after")
    def _rules(self) -> Campaign:
        violations = env_violations(self.environment, "environment")
        if DECLARED_TIME_ENV in self.environment and not self.protocol.declared_device_time:
            violations.append(
                (("environment", DECLARED_TIME_ENV), "no declared device time: a latency the "
                 "engine sleeps is no measurement (a campaign of the harness's own tests sets "
                 "protocol.declared_device_time: true, and every verdict is then capped)")
            )  # fmt: skip
        if self.baseline.id != ArmRole.B0:
            violations.append((("baseline", "id"),
                               f"{ArmRole.B0.value!r}, found {self.baseline.id!r}"))
        ids: set[str] = set()
        for i, arm in enumerate(self.candidates):
            if arm.id == ArmRole.B0 or arm.id in ids:
                why = "the baseline's id" if arm.id == ArmRole.B0 else "an id used earlier"
                violations.append((("candidates", i, "id"), f"a unique id, found {why} {arm.id!r}"))
            ids.add(arm.id)
        if self.search is not None:
            seen: set[str] = set()
            for i, direction in enumerate(self.search.directions):
                if direction.id in seen:
                    violations.append((("search", "directions", i, "id"),
                                       f"a unique id, found {direction.id!r} again"))
                seen.add(direction.id)
                violations.extend(
                    (("search", "directions", i, "tracks", j),
                     f"a track of this campaign ({', '.join(self.tracks)}), found {t!r}")
                    for j, t in enumerate(direction.tracks) if t not in self.tracks)
            if len(self.search.directions) > self.budget.max_candidates:
                violations.append(
                    (("search", "directions"), f"at most {self.budget.max_candidates} directions "
                     f"(budget.max_candidates), found {len(self.search.directions)}"))
        if len(self.candidates) > self.budget.max_candidates:
            violations.append(
                (("candidates",), f"at most {self.budget.max_candidates} candidates "
                 f"(budget.max_candidates), found {len(self.candidates)}")
            )  # fmt: skip
        for track_id, track in self.tracks.items():
            violations.extend(track_violations(track_id, track))
        violations.extend((("scorer_weights", name), unknown_weight_message(name))
                          for name in self.scorer_weights if name not in WEIGHT_NAMES)
        if self.scorer_weights_dir is None:
            violations.extend(
                (("scorer_weights", name, "path"), "a path, or scorer_weights_dir (VBench's cache "
                 "folder) to find it in VBench's layout; found neither")
                for name, weights in self.scorer_weights.items() if weights.path is None)
        used = sorted({duration_class(t) for t in self.tracks})
        shown = self.protocol.warmup_demonstration
        if self.protocol.warmup_steps is not None and shown is not None:
            lacking = [d for d in used if d not in shown.per_duration]
            if lacking:
                violations.append(
                    (("protocol", "warmup_demonstration", "per_duration"), "a demonstration for "
                     f"each duration class the tracks use, found none for {', '.join(lacking)}"))
        missing = [d for d in used if d not in self.protocol.timeouts]
        if missing:
            violations.append(
                (("protocol", "timeouts"), f"a timeout set for each duration class the tracks use "
                 f"({', '.join(used)}), found none for {', '.join(missing)}")
            )  # fmt: skip
        if self.baseline.tracks is not None:
            absent = [t for t in self.tracks if t not in self.baseline.tracks]
            if absent:
                violations.append(
                    (("baseline", "tracks"), "every campaign track (B0 is the matched baseline of "
                     f"each), found {self.baseline.tracks}, missing {', '.join(absent)}")
                )  # fmt: skip
        for loc, arm in [(("baseline",), self.baseline)] + [
            (("candidates", i), a) for i, a in enumerate(self.candidates)
        ]:
            for j, track_id in enumerate(arm.tracks or []):
                if track_id not in self.tracks:
                    violations.append(
                        ((*loc, "tracks", j), f"a track of this campaign ({', '.join(self.tracks)})"
                         f", found {track_id!r}")
                    )  # fmt: skip
        recorded = [name for name in ("hypothesis", "attribution", "change_class",
                                      "scope_decision") if getattr(self.baseline, name) is not None]
        if recorded:
            violations.append((("baseline",), "no candidate record on the baseline (it is what "
                               f"every candidate changes), found {', '.join(recorded)}"))
        violations.extend((("measured", key), problem) for key in self.measured or {}
                          if (problem := self._measured_problem(key)) is not None)
        raise_violations(violations)
        for track_id, track in self.tracks.items():
            track._track_id = track_id
        return self

    def _measured_problem(self, key: str) -> str | None:
        """Why `measured` may not name `key` (None: it may): a price field of MEASURED_FIELDS,
        whole or one of its duration classes (capture levels), that the campaign sets."""
        field = next((f for f in MEASURED_FIELDS if key == f or key.startswith(f + ".")), None)
        if field is None:
            return (f"one of {', '.join(MEASURED_FIELDS)} (or one duration class of it), found "
                    f"{key!r}")
        section, name = field.split(".")
        value = getattr(self.protocol if section == "protocol" else self.scoring, name)
        if value is None:
            return f"{field} is measured, but the campaign does not set it"
        part = key[len(field) + 1:]
        if part and (not isinstance(value, dict) or part not in value):
            return f"{field} has no {part!r} to be measured"
        return None

    def arms(self) -> list[ArmSpec]:
        return [self.baseline, *self.candidates]
