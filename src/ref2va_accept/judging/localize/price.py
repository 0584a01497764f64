"""What the localization pass costs on the host, priced as ``plan`` prices everything else.

It runs only after a lossless candidate fails on bit-exactness, so its cost is a worst case:
every candidate of every lossless track failing, each pass taking its three starts and four
requests (runner.STARTS, runner.REQUESTS: the most it takes whatever it finds, since it never
goes a stage back, judgement.py) at the campaign's frozen prices
(``protocol.expected_start_s`` / ``expected_request_s``). A request of the pass dumps one point
and, at level 2, the tensors of one block: its time is taken as a plain request's, which the
bring-up's measured dump time (``dump_seconds``) says how far to trust.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ref2va_accept.judging.localize.runner import REQUESTS, STARTS
from ref2va_accept.planning import Prices, TrackPlan


@dataclass(frozen=True)
class PassCost:
    passes: int  # lossless candidates that could fail, summed over the tracks
    starts: int
    requests: int
    wall_s: float | None  # None: a track's prices are not frozen
    devices: int
    unpriced: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"passes": self.passes, "starts": self.starts, "requests": self.requests,
                "wall_s": self.wall_s, "device_h": None if self.wall_s is None else
                round(self.wall_s * self.devices / 3600, 3), "unpriced": list(self.unpriced)}

    def line(self) -> str:
        head = (f"localization pass (after a lossless bit-exact failure; pytest --no-localize "
                f"turns it off): worst case {self.passes} passes, {self.starts} starts, "
                f"{self.requests} requests")
        if self.wall_s is None:
            return head + f", not priced ({', '.join(self.unpriced)} unfrozen)"
        return (head + f", {self.wall_s / 3600:.2f} wall-h / "
                f"{self.wall_s * self.devices / 3600:.2f} logical-device-h")


def pass_cost(plans: Mapping[str, TrackPlan], prices: Prices, devices: int) -> PassCost:
    passes = starts = requests = 0
    wall = 0.0
    unpriced: list[str] = []
    for plan in plans.values():
        if plan.quality != "lossless":
            continue
        candidates = [arm for arm in plan.arms if not arm.is_baseline]
        n = len(candidates)
        passes += n
        starts += STARTS * n
        requests += REQUESTS * n
        start, request = prices.start_s.get(plan.duration), prices.request_s.get(plan.duration)
        if start is None or request is None:
            unpriced += [f for f in prices.unpriced(plan) if "scoring" not in f]
            continue
        wall += n * (STARTS * start + REQUESTS * request)
    return PassCost(passes, starts, requests, None if unpriced else wall, devices,
                    tuple(dict.fromkeys(unpriced)))
