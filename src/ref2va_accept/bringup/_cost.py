"""What a bring-up costs at the campaign's prices (planning/_prices.py), step by step as
`step_schedule` lists it: `plan` and `bringup --dry-run` print it, the bring-up's page too.

Every start is followed by its stop (at `protocol.expected_stop_s`, else at its bound: the whole
grace and the whole memory wait). The capture requests cost a plain request times the capture
overhead; while that is unpriced they are taken at a plain request's price and the figure is
"at least", never a worst case. Without a start or request price there is no figure at all: the
bring-up is what measures them. Scoring on the CPU holds no device.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeAlias

from pydantic import ConfigDict

from ref2va_accept.bringup._step_schedule import BringupSchedule
from ref2va_accept.campaign import LoadedCampaign
from ref2va_accept.evidence import Number, Record, written_rounded
from ref2va_accept.planning import Prices, unpriced_text

# Figures kept as priced and written rounded (bringup.json, `--json`).
Seconds: TypeAlias = Annotated[Number, written_rounded(1)]
Hours: TypeAlias = Annotated[Number, written_rounded(3)]


class BringupCost(Record):
    """The bring-up priced at the campaign's prices (worst case where all are there: every
    warm-up the demonstration may send, every stop at its price or bound): bringup.json's
    `cost`, its seconds written to the tenth and its hours to the thousandth. `price` builds it."""

    model_config = ConfigDict(frozen=True)

    wall_s: Seconds | None  # None while a start or request price is missing (`unpriced`)
    starts_s: Seconds
    requests_s: Seconds
    stops_s: Seconds
    warmup_demonstration_s: Seconds  # the warm-up demonstration: its starts, stops and requests
    scoring_s: Seconds
    # The device hours: every device the campaign assigns while an engine runs, and the logical
    # devices scoring holds (none on the CPU) while it scores; None as wall_s is.
    logical_device_h: Hours | None
    devices: int
    unpriced: tuple[str, ...]
    at_least: bool  # the capture overhead is unpriced: its requests at a plain price

    @property
    def priced(self) -> bool:
        """Every start and request price is there (the capture overhead aside)."""
        return not self.unpriced

    def line(self, plan: BringupSchedule) -> str:
        parts = [f"{plan.starts} starts", f"{plan.requests_5s} x 5 s + {plan.requests_15s} x "
                 "15 s requests"]
        if plan.capture_requests:
            parts.append(f"{plan.capture_requests} capture requests")
        if plan.warmup_demonstration:
            parts.append("the warm-up demonstration ("
                         + ", ".join(d.duration for d in plan.warmup_demonstration) + ")")
        if plan.scoring:
            parts.append("scoring B0's " + ", ".join(s.duration for s in plan.scoring)
                         + " outputs")
        text = "bring-up (once per host, before freezing: `ref2va-accept bringup`): " \
               + ", ".join(parts) + ": "
        if self.wall_s is None or self.logical_device_h is None:
            text += (f"not priced: the campaign freezes no {unpriced_text(self.unpriced)} (the "
                     "bring-up measures them)")
        else:
            least = "at least " if self.at_least else ""
            text += (f"{least}{self.wall_s / 3600:.2f} wall-h, {least}"
                     f"{self.logical_device_h:.2f} "
                     "logical-device-h " + ("worst case" if not self.at_least else
                                            "(the capture overhead unpriced: its requests at a "
                                            "plain request's price)"))
            if plan.warmup_demonstration:
                text += (f"; the warm-up demonstration "
                         f"{self.warmup_demonstration_s / 3600:.2f} wall-h "
                         "of it (--no-warmup-demonstration leaves it out)")
        if plan.cache_dit_steps is not None and plan.cache_dit_steps.raised:
            text += f"; {plan.cache_dit_steps.line()}"
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

    start = get(prices.start_s, "5s", "expected_start_s") if plan.starts else 0.0
    # The Cache-DiT server's two identical requests at their (maybe raised) steps.
    steps = plan.cache_dit_steps
    longer = 2 * (steps.requested_steps / steps.track_steps - 1) if steps is not None else 0.0
    five = get(prices.request_s, "5s", "expected_request_s") \
        if plan.requests_5s or plan.capture_requests else 0.0
    overhead = prices.overhead()
    requests = ((plan.requests_5s + longer) * five
                + plan.requests_15s * (get(prices.request_s, "15s", "expected_request_s")
                                       if plan.requests_15s else 0.0)
                + plan.capture_requests * five * (overhead if overhead is not None else 1.0))
    own = len(plan.profiles) + (1 if plan.cache_dit else 0)
    demo = 0.0
    for step in plan.warmup_demonstration:
        request = get(prices.request_s, step.duration, "expected_request_s")
        share = min(1.0, step.warmup_steps / step.track_steps)
        per_pair = (step.max_warmups + 1) + (step.max_warmups * share + 1)
        demo += (step.starts * (get(prices.start_s, step.duration, "expected_start_s")
                                + prices.stop(step.duration))
                 + step.pairs * per_pair * request)
    scoring = 0.0
    for scored in plan.scoring:
        if not scored.same_shape:
            continue
        seconds, missing = prices.scoring(scored.duration, scored.dimensions)
        unpriced += missing
        scoring += seconds
    devices = max(len(campaign.model.devices.visible), 1) \
        if campaign.model.devices.kind != "none" else 1
    stops = own * prices.stop("5s")
    wall = own * start + requests + stops + demo + scoring
    priced = not unpriced
    return BringupCost(
        wall_s=wall if priced else None, starts_s=own * start, requests_s=requests,
        stops_s=stops, warmup_demonstration_s=demo, scoring_s=scoring,
        logical_device_h=((wall - scoring) * devices + scoring * prices.scoring_devices) / 3600
        if priced else None, devices=devices, unpriced=tuple(dict.fromkeys(unpriced)),
        at_least=bool(plan.capture_requests) and overhead is None)
