"""What a bring-up does on the host, and what that costs at the campaign's prices.

Every start and request is listed here before the runner makes it, so that `plan` and
`bringup --dry-run` price exactly what a bring-up spends:

- per B0 memory-policy profile: one start, one 5 s request with comparison points, one stop and
  the wait for device memory; on the first policy that serves, also one bad-audio request
  (refused before any compute), two capture requests where the campaign has a lossless track
  (level 1: every block of the DiT hooked at one step; level 2: the first block's modules, their
  tensors written: what a localization pass's requests cost) and one untimed 15 s request (with
  the 15 s points, when a 15 s lossless track has them: its dump is written inside the same
  server bound as on a real run);
- the Cache-DiT server (the first candidate whose profile sets `cache-backend: cache_dit`): one
  start, two identical 5 s requests and one with quality=lossless, one stop and a wait. Cache-DiT
  caches nothing in its warm-up steps (cache-dit 1.5.0 tests a step for caching, with its
  averaging all_reduce, only after them), so the two identical requests run at least the warm-up
  plus CACHE_STEPS_PAST_WARMUP steps: when the track's are fewer they are raised, and the
  schedule says so (the lossless request keeps the track's, to equal B0's bytes);
- the warm-up demonstration (judging's `demonstrate`, as `pytest -m warmup_demonstration` runs
  it), once per duration class on its track (a lossless one first): DEFAULT_PAIRS pairs of fresh
  B0 instances, one warmed up in full and one with WARMUP_STEPS-step warm-ups, each then one
  measured request (`--no-warmup-demonstration` leaves it out);
- scoring: B0's 5 s and 15 s outputs scored on the gated dimensions of the lossy track of their
  duration class, on `scoring.device`, once per model (bringup/_scoring.py), after every engine
  has stopped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from ref2va_accept.campaign import DurationClass, LoadedCampaign, duration_class, quality_class
from ref2va_accept.evidence import Record
from ref2va_accept.planning import DEFAULT_PAIRS

CACHE_DIT_BACKEND = "cache_dit"
# vLLM-Omni 0.30.0's DiffusionCacheConfig.max_warmup_steps, for a cache-config that sets none.
DEFAULT_WARMUP_STEPS = 4
# Steps past the warm-up the Cache-DiT requests run at least: with at most one cached step in a
# row (H3's conservative profile) that leaves room for two.
CACHE_STEPS_PAST_WARMUP = 4
DURATIONS: tuple[DurationClass, ...] = ("5s", "15s")
# The cheap warm-up the bring-up demonstrates (unless the campaign already names one).
WARMUP_STEPS = 4


class CacheSteps(Record):
    """The denoising steps of the Cache-DiT server's two identical requests (bringup.json's
    `schedule.cache_dit_steps`; `of` builds it)."""

    model_config = ConfigDict(frozen=True)

    warmup_steps: int  # the profile's cache-config max_warmup_steps
    track_steps: int  # the 5 s track's num_inference_steps
    requested_steps: int  # what the two requests run: at least warmup + CACHE_STEPS_PAST_WARMUP
    raised: bool  # requested_steps > track_steps: the requests run more steps than the track's

    @classmethod
    def of(cls, warmup_steps: int, track_steps: int) -> CacheSteps:
        """The track's steps, raised where they leave no room past the cache's warm-up."""
        requested = max(track_steps, warmup_steps + CACHE_STEPS_PAST_WARMUP)
        return cls(warmup_steps=warmup_steps, track_steps=track_steps,
                   requested_steps=requested, raised=requested > track_steps)

    def line(self) -> str:
        said = (f"{self.requested_steps} steps, raised from the track's {self.track_steps},"
                if self.raised else f"the track's {self.track_steps} steps")
        return (f"the Cache-DiT requests run {said} past the cache's {self.warmup_steps}-step "
                "warm-up")


class Demonstration(Record):
    """The warm-up demonstration on one duration class's track (bringup.json's
    `schedule.warmup_demonstration`)."""

    model_config = ConfigDict(frozen=True)

    track: str
    duration: DurationClass
    pairs: int  # pairs of fresh B0 instances: one warmed up in full, one cheaply
    starts: int  # two per pair
    warmups: tuple[int, int]  # the warm-ups each instance sends: fewest, most
    warmup_steps: int  # the cheap warm-ups' denoising steps
    track_steps: int

    @property
    def max_warmups(self) -> int:
        return self.warmups[1]


class ScoringStep(Record):
    """B0's output of one duration class scored on the gated dimensions of that class's lossy
    track (the output of `output_of`: the track whose request the bring-up sends; bringup.json's
    `schedule.scoring`)."""

    model_config = ConfigDict(frozen=True)

    duration: DurationClass
    track: str
    output_of: str
    dimensions: tuple[str, ...]
    device: str
    same_shape: bool  # the two tracks' frames and size agree: else nothing is scored


class BringupSchedule(Record):
    """The starts and requests of one bring-up of a campaign, counted when it is listed
    (step_schedule): bringup.json's `schedule`, `bringup --dry-run --json` and `plan --json`
    write it."""

    model_config = ConfigDict(frozen=True)

    # The B0 memory-policy profiles, the campaign's own first, as the steps start them (this
    # host's paths, not written: `policies` names them as an operator finds them).
    profiles: tuple[Path, ...] = Field(exclude=True)
    policies: tuple[str, ...]
    cache_dit: str | None  # the candidate whose profile runs Cache-DiT, if any
    track_5s: str | None  # the 5 s track whose request it sends (a lossless one first)
    track_15s: str | None  # the 15 s track of the untimed long request (lossless first)
    starts: int
    requests_5s: int  # plain 5 s requests (the capture requests and the demonstration's apart)
    requests_15s: int
    capture_requests: int  # two where a lossless track can start a localization pass
    bad_audio_requests: int
    cache_dit_steps: CacheSteps | None  # the Cache-DiT requests' steps
    warmup_demonstration: tuple[Demonstration, ...]
    scoring: tuple[ScoringStep, ...]

    def lines(self) -> list[str]:
        """What it starts and sends, step by step (`bringup --dry-run`)."""
        out = [f"B0 per memory policy ({', '.join(self.policies)}): a start, one 5 s request "
               "with comparison points, a stop and the wait for device memory, each"]
        first = ["a too-short reference audio (refused before any compute)"]
        if self.capture_requests:
            first.append("two capture requests (level 1: every DiT block hooked at step 0; "
                         "level 2: the first block's modules, their tensors written)")
        if self.requests_15s:
            first.append(f"one untimed 15 s request ({self.track_15s})")
        out.append("on the first policy that serves: " + "; ".join(first))
        if self.cache_dit:
            out.append(f"the Cache-DiT server ({self.cache_dit}): a start, two identical 5 s "
                       "requests and one with quality=lossless, a stop"
                       + (f"; {self.cache_dit_steps.line()}" if self.cache_dit_steps is not None
                          and self.cache_dit_steps.raised else ""))
        for demo in self.warmup_demonstration:
            fewest, most = demo.warmups
            out.append(f"the warm-up demonstration on {demo.track}: {demo.pairs} pairs of fresh "
                       f"B0 instances, one warmed up in full and one with {demo.warmup_steps}-step "
                       f"warm-ups ({fewest}-{most} each), then one measured request each")
        for step in self.scoring:
            out.append(f"scoring: B0's {step.duration} output on the "
                       f"{len(step.dimensions)} gated dimension(s) of {step.track}, on "
                       f"{step.device}, once per model"
                       + ("" if step.same_shape else f" - not scored: {step.output_of}'s frames "
                          f"or size differ from {step.track}'s"))
        return out


def display(campaign: LoadedCampaign, path: Path) -> str:
    """A profile path as an operator finds it: relative to the checkout (the engine workdir)
    when it is in it, else relative to the campaign's folder."""
    for base in (campaign.engine_workdir(), campaign.folder):
        try:
            return Path(path).relative_to(base).as_posix()
        except ValueError:
            continue
    return os.path.relpath(path, campaign.folder).replace(os.sep, "/")


def memory_policies(campaign: LoadedCampaign) -> tuple[Path, ...]:
    """The baseline's profile, then every other `b0*.yaml` beside it (on the host: b0.yaml and
    b0-legacy-dlo.yaml, the two memory policies the campaign must choose between)."""
    own = campaign.resolve(campaign.model.baseline.profile)
    siblings = sorted(p for p in own.parent.glob("b0*.yaml") if p != own)
    return (own, *siblings)


def cache_dit_candidate(campaign: LoadedCampaign) -> str | None:
    for spec in campaign.model.candidates:
        if spec.request.get("quality") == "lossless":
            continue  # the lossless guard: the same server, but asked for no cache
        try:
            profile = campaign.profile(spec)
        except Exception:
            continue
        if profile.args.get("cache-backend") == CACHE_DIT_BACKEND:
            return spec.id
    return None


def warmup_steps(cache_config: Any) -> int:
    """The warm-up of a profile's `cache-config` (a mapping, or JSON text as on the command
    line); vLLM-Omni's default when it sets none."""
    if isinstance(cache_config, str):
        try:
            cache_config = json.loads(cache_config)
        except ValueError:
            cache_config = {}
    value = (cache_config or {}).get("max_warmup_steps") if isinstance(
        cache_config, dict) else None
    return value if isinstance(value, int) and value >= 0 else DEFAULT_WARMUP_STEPS


def cache_steps(campaign: LoadedCampaign, candidate: str | None, track: str | None
                ) -> CacheSteps | None:
    if candidate is None or track is None:
        return None
    spec = next(c for c in campaign.model.candidates if c.id == candidate)
    warmup = warmup_steps(campaign.profile(spec).args.get("cache-config"))
    steps = next(t.request.num_inference_steps for name, t in campaign.model.tracks.items()
                 if name == track)
    return CacheSteps.of(warmup, steps)


def _track(campaign: LoadedCampaign, duration: str) -> str | None:
    tracks = [t for t in campaign.model.tracks if duration_class(t) == duration]
    lossless = [t for t in tracks if t.endswith("lossless")]
    chosen = lossless or tracks
    return str(chosen[0]) if chosen else None


def demonstrations(campaign: LoadedCampaign) -> tuple[Demonstration, ...]:
    """One per duration class the tracks use (the campaign may warm up cheaply only where
    every one is demonstrated), on its track (a lossless one first)."""
    protocol = campaign.model.protocol
    steps = protocol.warmup_steps or WARMUP_STEPS
    found = []
    for duration in DURATIONS:
        track = _track(campaign, duration)
        if track is None:
            continue
        most = protocol.warmups if protocol.max_warmups is None else protocol.max_warmups
        track_steps = campaign.model.tracks[track].request.num_inference_steps  # type: ignore[index]
        found.append(Demonstration(
            track=track, duration=duration, pairs=DEFAULT_PAIRS, starts=2 * DEFAULT_PAIRS,
            warmups=(protocol.warmups, most), warmup_steps=steps, track_steps=track_steps))
    return tuple(found)


def _shape(track: Any) -> tuple[Any, ...]:
    request = track.request
    return track.num_frames, request.width, request.height, request.fps


def scorings(campaign: LoadedCampaign, track_5s: str | None, track_15s: str | None
             ) -> tuple[ScoringStep, ...]:
    """B0's output of each duration class the bring-up requests, on the gated dimensions of
    that class's lossy track."""
    tracks = campaign.model.tracks
    found = []
    for duration, source in zip(DURATIONS, (track_5s, track_15s), strict=True):
        lossy = next((t for t in tracks if duration_class(t) == duration
                      and quality_class(t) == "lossy"), None)
        if lossy is None or source is None:
            continue
        gate = tracks[lossy].lossy_gate
        same = _shape(tracks[lossy]) == _shape(tracks[source])  # type: ignore[index]
        found.append(ScoringStep(duration=duration, track=lossy, output_of=source,
                                 dimensions=tuple(gate.gated) if gate is not None else (),
                                 device=campaign.model.scoring.device, same_shape=same))
    return tuple(found)


def step_schedule(campaign: LoadedCampaign, policies: tuple[Path, ...] | None = None, *,
                  demonstrate: bool = True) -> BringupSchedule:
    """What a bring-up of `campaign` starts and sends (`policies`: the memory-policy profiles
    to try instead of the baseline's and its siblings), counted."""
    candidate, track_5s = cache_dit_candidate(campaign), _track(campaign, "5s")
    track_15s = _track(campaign, "15s")
    lossless = any(quality_class(t) == "lossless" for t in campaign.model.tracks)
    profiles = memory_policies(campaign) if policies is None else policies
    demos = demonstrations(campaign) if demonstrate else ()
    return BringupSchedule(
        profiles=profiles, policies=tuple(display(campaign, p) for p in profiles),
        cache_dit=candidate, track_5s=track_5s, track_15s=track_15s,
        starts=len(profiles) + (1 if candidate else 0) + sum(d.starts for d in demos),
        requests_5s=0 if track_5s is None else len(profiles) + (3 if candidate else 0),
        requests_15s=1 if track_15s is not None and profiles else 0,
        capture_requests=2 if lossless and track_5s is not None and profiles else 0,
        bad_audio_requests=1 if profiles and track_5s else 0,
        cache_dit_steps=cache_steps(campaign, candidate, track_5s),
        warmup_demonstration=demos, scoring=scorings(campaign, track_5s, track_15s))
