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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ref2va_accept.campaign import DurationClass, LoadedCampaign, duration_class, quality_class
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


@dataclass(frozen=True)
class CacheSteps:
    """The denoising steps of the Cache-DiT server's two identical requests."""

    warmup: int  # the profile's cache-config max_warmup_steps
    track: int  # the 5 s track's num_inference_steps
    requested: int  # what the two requests run: at least warmup + CACHE_STEPS_PAST_WARMUP

    @property
    def raised(self) -> bool:
        return self.requested > self.track

    def line(self) -> str:
        said = (f"{self.requested} steps, raised from the track's {self.track}," if self.raised
                else f"the track's {self.track} steps")
        return f"the Cache-DiT requests run {said} past the cache's {self.warmup}-step warm-up"

    def to_dict(self) -> dict[str, Any]:
        return {"warmup_steps": self.warmup, "track_steps": self.track,
                "requested_steps": self.requested, "raised": self.raised}


@dataclass(frozen=True)
class Demonstration:
    """The warm-up demonstration on one duration class's track."""

    track: str
    duration: DurationClass
    pairs: int  # pairs of fresh B0 instances: one warmed up in full, one cheaply
    warmups: int
    max_warmups: int
    steps: int  # the cheap warm-ups' denoising steps
    track_steps: int

    @property
    def starts(self) -> int:
        return 2 * self.pairs

    def to_dict(self) -> dict[str, Any]:
        return {"track": self.track, "duration": self.duration, "pairs": self.pairs,
                "starts": self.starts, "warmups": [self.warmups, self.max_warmups],
                "warmup_steps": self.steps, "track_steps": self.track_steps}


@dataclass(frozen=True)
class ScoringStep:
    """B0's output of one duration class scored on the gated dimensions of that class's lossy
    track (the output of `source`: the track whose request the bring-up sends)."""

    duration: DurationClass
    track: str
    source: str
    dimensions: tuple[str, ...]
    device: str
    same_shape: bool  # the two tracks' frames and size agree: else nothing is scored

    def to_dict(self) -> dict[str, Any]:
        return {"duration": self.duration, "track": self.track, "output_of": self.source,
                "dimensions": list(self.dimensions), "device": self.device,
                "same_shape": self.same_shape}


@dataclass(frozen=True)
class BringupSchedule:
    """The starts and requests of one bring-up of a campaign."""

    policies: tuple[Path, ...]  # B0 memory-policy profiles, the campaign's own first
    cache_dit: str | None  # the candidate whose profile runs Cache-DiT, if any
    track_5s: str | None  # the 5 s track whose request it sends (a lossless one first)
    track_15s: str | None  # the 15 s track of the untimed long request (lossless first)
    cache_steps: CacheSteps | None = None  # the Cache-DiT requests' steps
    capture: bool = False  # the two capture requests (a lossless track can start a pass)
    demonstrations: tuple[Demonstration, ...] = ()
    scorings: tuple[ScoringStep, ...] = ()

    @property
    def starts(self) -> int:
        return (len(self.policies) + (1 if self.cache_dit else 0)
                + sum(d.starts for d in self.demonstrations))

    @property
    def requests_5s(self) -> int:
        """Plain 5 s requests (the capture requests and the demonstration's apart)."""
        if self.track_5s is None:
            return 0
        return len(self.policies) + (3 if self.cache_dit else 0)

    @property
    def requests_15s(self) -> int:
        return 1 if self.track_15s is not None and self.policies else 0

    @property
    def capture_requests(self) -> int:
        return 2 if self.capture and self.track_5s is not None and self.policies else 0

    def to_dict(self, campaign: LoadedCampaign) -> dict[str, Any]:
        return {"policies": [display(campaign, p) for p in self.policies],
                "cache_dit": self.cache_dit, "track_5s": self.track_5s,
                "track_15s": self.track_15s, "starts": self.starts,
                "requests_5s": self.requests_5s, "requests_15s": self.requests_15s,
                "capture_requests": self.capture_requests,
                "bad_audio_requests": 1 if self.policies and self.track_5s else 0,
                "cache_dit_steps": None if self.cache_steps is None
                else self.cache_steps.to_dict(),
                "warmup_demonstration": [d.to_dict() for d in self.demonstrations],
                "scoring": [s.to_dict() for s in self.scorings]}

    def lines(self, campaign: LoadedCampaign) -> list[str]:
        """What it starts and sends, step by step (`bringup --dry-run`)."""
        names = ", ".join(display(campaign, p) for p in self.policies)
        out = [f"B0 per memory policy ({names}): a start, one 5 s request with comparison "
               "points, a stop and the wait for device memory, each"]
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
                       + (f"; {self.cache_steps.line()}" if self.cache_steps is not None
                          and self.cache_steps.raised else ""))
        for demo in self.demonstrations:
            out.append(f"the warm-up demonstration on {demo.track}: {demo.pairs} pairs of fresh "
                       f"B0 instances, one warmed up in full and one with {demo.steps}-step "
                       f"warm-ups ({demo.warmups}-{demo.max_warmups} each), then one measured "
                       "request each")
        for step in self.scorings:
            out.append(f"scoring: B0's {step.duration} output on the "
                       f"{len(step.dimensions)} gated dimension(s) of {step.track}, on "
                       f"{step.device}, once per model"
                       + ("" if step.same_shape else f" - not scored: {step.source}'s frames "
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
    return CacheSteps(warmup, steps, max(steps, warmup + CACHE_STEPS_PAST_WARMUP))


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
        found.append(Demonstration(
            track, duration, DEFAULT_PAIRS, protocol.warmups,
            protocol.warmups if protocol.max_warmups is None else protocol.max_warmups, steps,
            campaign.model.tracks[track].request.num_inference_steps))  # type: ignore[index]
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
        found.append(ScoringStep(duration, lossy, source,
                                 tuple(gate.gated) if gate is not None else (),
                                 campaign.model.scoring.device, same))
    return tuple(found)


def step_schedule(campaign: LoadedCampaign, policies: tuple[Path, ...] | None = None, *,
                  demonstrate: bool = True) -> BringupSchedule:
    candidate, track_5s = cache_dit_candidate(campaign), _track(campaign, "5s")
    track_15s = _track(campaign, "15s")
    lossless = any(quality_class(t) == "lossless" for t in campaign.model.tracks)
    return BringupSchedule(
        policies=memory_policies(campaign) if policies is None else policies,
        cache_dit=candidate, track_5s=track_5s, track_15s=track_15s,
        cache_steps=cache_steps(campaign, candidate, track_5s), capture=lossless,
        demonstrations=demonstrations(campaign) if demonstrate else (),
        scorings=scorings(campaign, track_5s, track_15s))
