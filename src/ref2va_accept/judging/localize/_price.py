"""What the localization pass costs on the host, priced as ``plan`` prices everything else.

It runs only after a lossless candidate fails on bit-exactness, so its cost is a worst case:
every candidate of every lossless track failing, each pass taking its three starts and four
requests (runner.STARTS, runner.REQUESTS: the most it takes whatever it finds, since it never
goes a stage back, _judgement.py) at the campaign's frozen prices
(``protocol.expected_start_s`` / ``expected_request_s``).

Each request stops once its capture is written (_runner.py, ``capture.stop``): it runs the
denoise up to the step of the gate's first divergence (a ``dit.stepNNN`` point; level 2 to the
step level 1 found, never later), none of it for a ``cond.*`` point, and a later point (latents,
decoded output, MP4) takes no request at all. A request is priced, as ``plan`` prices a cheap
warm-up, at its share of the track's steps (:func:`request_share`):

- the worst case is a divergence first seen at the track's last frozen DiT point; on the shipped
  campaigns that is the last step (``dit.step049`` of 50), so every step still runs and a request
  is priced whole (the stop saves the decode, which no price separates);
- at the first frozen DiT point (``dit.step000``, where a changed kernel shows) a request runs
  one step of the track's: the line gives that figure too, the encoders and the request's own
  overhead on top and not priced apart (measured on the reference campaign: docs/quality.md).

A capture also costs the engine time (level 1 hashes each hooked block's inputs and outputs at
the steps it captures, level 2 writes one block's tensors): the campaign's
``protocol.capture_overhead`` (a capture request over a plain one, per level: the bring-up's
capture requests measure it; ``Prices.overhead``, half the pass's requests at each level)
multiplies each request; without it the figure is not a worst case and the line says what it
leaves out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import ConfigDict, Field

from ref2va_accept.evidence import Record
from ref2va_accept.judging.localize._runner import REQUESTS, STARTS
from ref2va_accept.planning import Prices, TrackPlan
from ref2va_accept.tensors import dit_step


class TrackPass(Record):
    """One lossless track's pass: how much of a request it runs where it may stop (plan --json's
    `localization.tracks`)."""

    model_config = ConfigDict(frozen=True)

    track: str
    steps: int  # the track's denoising steps
    last_point: str | None  # its last frozen DiT point (None: none frozen)
    worst_share: float  # of a whole request, at the last frozen DiT point
    first_point: str | None  # its first frozen DiT point
    first_share: float | None  # of a whole request, at the first frozen DiT point

    def runs(self, point: str | None) -> str:
        """``dit.step049 it runs 50 of 50 steps``: what a request parting there runs."""
        step = None if point is None else dit_step(point)
        if step is None:
            return "no frozen DiT point it runs up to a whole request"
        return f"dit.step{step:03d} it runs {min(step + 1, self.steps)} of {self.steps} steps"


def _device_hours(seconds: float | None, devices: int) -> float | None:
    """Logical-device hours of `seconds` on `devices`, to the thousandth as --json writes them."""
    return None if seconds is None else round(seconds * devices / 3600, 3)


class PassCost(Record):
    """Every lossless candidate's pass, priced (plan --json's `localization`); `pass_cost` builds
    it, its device hours computed then."""

    model_config = ConfigDict(frozen=True)

    passes: int  # lossless candidates that could fail, summed over the tracks
    starts: int
    requests: int
    wall_s: float | None  # every pass at its worst; None: a track's prices are not frozen
    device_h: float | None  # its logical-device hours, to the thousandth
    # every pass parting at its track's first frozen DiT point (None: not priced)
    first_point_wall_s: float | None
    first_point_device_h: float | None  # (the same, at the first point)
    stops_after_capture: Literal[True]  # each request stops once its capture is written
    # False: the capture's own overhead is in no figure (not measured)
    capture_overhead_priced: bool
    tracks: tuple[TrackPass, ...]
    unpriced: tuple[str, ...]
    devices: int = Field(exclude=True)

    def _hours(self, seconds: float) -> str:
        return f"{seconds / 3600:.2f} wall-h / {seconds * self.devices / 3600:.2f} logical-device-h"

    def line(self) -> str:
        head = (f"localization pass (after a lossless bit-exact failure; pytest --no-localize "
                f"turns it off): {self.passes} passes, {self.starts} starts, "
                f"{self.requests} requests")
        if self.wall_s is None:
            return head + f", not priced ({', '.join(self.unpriced)} unfrozen)" + self._stops()
        worst = (f", worst case {self._hours(self.wall_s)}" if self.capture_overhead_priced else
                 f", {self._hours(self.wall_s)} with its requests at a plain request's price "
                 "(the captures' own cost unpriced: protocol.capture_overhead, which the "
                 "bring-up's capture requests measure)")
        return head + worst + self._stops()

    def _stops(self) -> str:
        """What the stop after the capture makes of a request, in the line's words."""
        if not self.tracks:
            return ""
        worst = "/".join(dict.fromkeys(t.runs(t.last_point) for t in self.tracks))
        said = f"; each request stops once its capture is written: parting at {worst}"
        firsts = [t for t in self.tracks if t.first_point is not None]
        if firsts:
            said += f", at {'/'.join(dict.fromkeys(t.runs(t.first_point) for t in firsts))}"
            if self.first_point_wall_s is not None:
                said += f": {self._hours(self.first_point_wall_s)}"
            said += " (the encoders and each request's own overhead on top)"
        return said


def request_share(plan: TrackPlan, point: str | None = None) -> float:
    """The share of a whole request that one of the pass's requests runs when the gate's first
    divergence is at ``point`` (None: the worst case, the track's last frozen DiT point): the
    steps up to the point's, over the track's. No DiT point (a ``cond.*`` one, or a track that
    freezes none) is priced as a whole request, an upper bound of a request stopped before the
    denoise."""
    steps = plan.shape.num_inference_steps
    if point is None:
        found = [s for s in map(dit_step, plan.lossless.order) if s is not None]
        step = max(found) if found else None
    else:
        step = dit_step(point)
    if step is None or steps <= 0:
        return 1.0
    return min(1.0, (step + 1) / steps)


def _track_pass(plan: TrackPlan) -> TrackPass:
    dits = [p for p in plan.lossless.order if dit_step(p) is not None]
    first = dits[0] if dits else None
    return TrackPass(track=plan.track_id, steps=plan.shape.num_inference_steps,
                     last_point=dits[-1] if dits else None, worst_share=request_share(plan),
                     first_point=first,
                     first_share=request_share(plan, first) if first else None)


def pass_cost(plans: Mapping[str, TrackPlan], prices: Prices, devices: int) -> PassCost:
    """Every lossless candidate's pass, priced (see the module doc), its requests at the
    campaign's capture overhead (at a plain request's price while it is not measured)."""
    passes = starts = requests = 0
    wall = first_wall = 0.0
    unpriced: list[str] = []
    tracks: list[TrackPass] = []
    factor = prices.overhead()
    for plan in plans.values():
        if plan.quality != "lossless":
            continue
        candidates = [arm for arm in plan.arms if not arm.is_baseline]
        n = len(candidates)
        passes += n
        starts += STARTS * n
        requests += REQUESTS * n
        track = _track_pass(plan)
        tracks.append(track)
        start, request = prices.start_s.get(plan.duration), prices.request_s.get(plan.duration)
        if start is None or request is None:
            unpriced += [f for f in prices.unpriced(plan) if "scoring" not in f]
            continue
        request *= factor if factor is not None else 1.0
        wall += n * (STARTS * start + REQUESTS * request * track.worst_share)
        first_share = track.worst_share if track.first_share is None else track.first_share
        first_wall += n * (STARTS * start + REQUESTS * request * first_share)
    worst, first = (None, None) if unpriced else (wall, first_wall)
    return PassCost(passes=passes, starts=starts, requests=requests, wall_s=worst,
                    device_h=_device_hours(worst, devices), first_point_wall_s=first,
                    first_point_device_h=_device_hours(first, devices), stops_after_capture=True,
                    capture_overhead_priced=factor is not None and not unpriced,
                    tracks=tuple(tracks), unpriced=tuple(dict.fromkeys(unpriced)),
                    devices=devices)
