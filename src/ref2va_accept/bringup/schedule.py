"""What a bring-up does on the host, and what that costs at the campaign's prices.

Every start and request is listed here before the runner makes it, so that `plan` and
`bringup --dry-run` price exactly what a bring-up spends:

- per B0 memory-policy profile: one start, one 5 s request with comparison points, one stop and
  the wait for device memory; on the first policy that serves, also one bad-audio request
  (refused before any compute) and one untimed 15 s request (with the 15 s points, when a 15 s
  lossless track has them: its dump is written inside the same server bound as on a real run);
- the Cache-DiT server (the first candidate whose profile sets `cache-backend: cache_dit`): one
  start, two identical 5 s requests and one with quality=lossless, one stop and a wait. Cache-DiT
  caches nothing in its warm-up steps (cache-dit 1.5.0 tests a step for caching, with its
  averaging all_reduce, only after them), so the two identical requests run at least the warm-up
  plus CACHE_STEPS_PAST_WARMUP steps: when the track's are fewer they are raised, and the
  schedule says so (the lossless request keeps the track's, to equal B0's bytes).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ref2va_accept.campaign import LoadedCampaign, duration_class
from ref2va_accept.planning import Prices

CACHE_DIT_BACKEND = "cache_dit"
# vLLM-Omni 0.30.0's DiffusionCacheConfig.max_warmup_steps, for a cache-config that sets none.
DEFAULT_WARMUP_STEPS = 4
# Steps past the warm-up the Cache-DiT requests run at least: with at most one cached step in a
# row (H3's conservative profile) that leaves room for two.
CACHE_STEPS_PAST_WARMUP = 4


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
class BringupSchedule:
    """The starts and requests of one bring-up of a campaign."""

    policies: tuple[Path, ...]  # B0 memory-policy profiles, the campaign's own first
    cache_dit: str | None  # the candidate whose profile runs Cache-DiT, if any
    track_5s: str | None  # the 5 s track whose request it sends (a lossless one first)
    track_15s: str | None  # the 15 s track of the untimed long request (lossless first)
    cache_steps: CacheSteps | None = None  # the Cache-DiT requests' steps

    @property
    def starts(self) -> int:
        return len(self.policies) + (1 if self.cache_dit else 0)

    @property
    def requests_5s(self) -> int:
        if self.track_5s is None:
            return 0
        return len(self.policies) + (3 if self.cache_dit else 0)

    @property
    def requests_15s(self) -> int:
        return 1 if self.track_15s is not None and self.policies else 0

    def to_dict(self, campaign: LoadedCampaign) -> dict[str, Any]:
        return {"policies": [display(campaign, p) for p in self.policies],
                "cache_dit": self.cache_dit, "track_5s": self.track_5s,
                "track_15s": self.track_15s, "starts": self.starts,
                "requests_5s": self.requests_5s, "requests_15s": self.requests_15s,
                "bad_audio_requests": 1 if self.policies and self.track_5s else 0,
                "cache_dit_steps": None if self.cache_steps is None
                else self.cache_steps.to_dict()}


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


def schedule(campaign: LoadedCampaign, policies: tuple[Path, ...] | None = None
             ) -> BringupSchedule:
    candidate, track_5s = cache_dit_candidate(campaign), _track(campaign, "5s")
    return BringupSchedule(
        policies=memory_policies(campaign) if policies is None else policies,
        cache_dit=candidate, track_5s=track_5s, track_15s=_track(campaign, "15s"),
        cache_steps=cache_steps(campaign, candidate, track_5s))


@dataclass(frozen=True)
class BringupCost:
    """The bring-up priced at the campaign's start and request prices (worst case: every stop
    takes its whole grace and every memory wait its whole timeout)."""

    starts_s: float
    requests_s: float
    stops_s: float
    devices: int
    unpriced: tuple[str, ...]

    @property
    def wall_s(self) -> float:
        return self.starts_s + self.requests_s + self.stops_s

    @property
    def device_h(self) -> float:
        return self.wall_s * self.devices / 3600

    def to_dict(self) -> dict[str, Any]:
        return {"wall_s": round(self.wall_s, 1), "starts_s": round(self.starts_s, 1),
                "requests_s": round(self.requests_s, 1), "stops_s": round(self.stops_s, 1),
                "logical_device_h": round(self.device_h, 3), "devices": self.devices,
                "unpriced": list(self.unpriced)}

    def line(self, plan: BringupSchedule) -> str:
        text = (f"bring-up (once per host, before freezing: `ref2va-accept bringup`): "
                f"{plan.starts} starts, {plan.requests_5s} x 5 s + {plan.requests_15s} x 15 s "
                f"requests: {self.wall_s / 3600:.2f} wall-h, {self.device_h:.2f} "
                f"logical-device-h worst case")
        if self.unpriced:
            text += f" (unpriced: {', '.join(self.unpriced)})"
        if plan.cache_steps is not None and plan.cache_steps.raised:
            text += f"; {plan.cache_steps.line()}"
        return text


def price(campaign: LoadedCampaign, plan: BringupSchedule,
          prices: Prices | None = None) -> BringupCost:
    prices = prices if prices is not None else Prices.of(campaign)
    unpriced: list[str] = []

    def get(table: Any, key: str, name: str) -> float:
        if key in table:
            return float(table[key])
        unpriced.append(f"protocol.{name}.{key}")
        return 0.0

    start = get(prices.start_s, "5s", "expected_start_s")
    # The Cache-DiT server's two identical requests at their (maybe raised) steps.
    steps = plan.cache_steps
    longer = 2 * (steps.requested / steps.track - 1) if steps is not None else 0.0
    requests = ((plan.requests_5s + longer) * (get(prices.request_s, "5s", "expected_request_s")
                                               if plan.requests_5s else 0.0)
                + plan.requests_15s * (get(prices.request_s, "15s", "expected_request_s")
                                       if plan.requests_15s else 0.0))
    engine = campaign.model.engine
    release = campaign.model.devices.memory_release
    waits = release.timeout_s if campaign.model.devices.kind != "none" else 0.0
    stops = plan.starts * (engine.shutdown_grace_s + waits)
    devices = max(len(campaign.model.devices.visible), 1) \
        if campaign.model.devices.kind != "none" else 1
    return BringupCost(plan.starts * start, requests, stops, devices,
                       tuple(dict.fromkeys(unpriced)))

