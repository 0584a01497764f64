"""`ref2va-accept plan`: a run's hours against the campaign's budget before it starts, every
price it uses with where it comes from, the declared search with its what-if table, the
localization pass a lossless failure adds and the host's bring-up. cli/_runs.py registers it.

The localization pass is priced by judging/localize/_price.py (`pass_cost`); planning sits below
judging, so the search is handed a pricer that calls it (`pass_pricer`)."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import Any

from ref2va_accept.bringup import price as bringup_price
from ref2va_accept.bringup import step_schedule
from ref2va_accept.campaign import LoadedCampaign, load_campaign
from ref2va_accept.core import EXIT_OK, EXIT_PROBLEM, CampaignError
from ref2va_accept.history import read_ledger
from ref2va_accept.judging.localize import pass_cost
from ref2va_accept.planning import (
    Arm,
    PassFigures,
    Prices,
    SearchCost,
    TrackPlan,
    budget_lines,
    check_budget,
    pass_seconds,
    plan_campaign,
    price_lines,
    search_cost,
    search_lines,
    what_if,
)

__all__ = ["WHAT_IF_WARMUP_STEPS", "pass_pricer", "run_plan"]

# The cheap warm-up `plan` shows the effect of while none is demonstrated.
WHAT_IF_WARMUP_STEPS = 4


def pass_pricer(devices: int) -> Any:
    """One localization pass of a track, as judging/localize/_price.py prices it (its starts and
    plain requests; the search adds the stops and the capture overhead)."""

    def price(plan: TrackPlan, prices: Prices) -> PassFigures:
        b0 = plan.arms[0]
        one = replace(plan, arms=(b0, Arm("direction", b0.spec)))
        found = pass_cost({plan.track_id: one}, prices, devices)
        return PassFigures(found.starts, found.requests, found.wall_s)

    return price


def _localization(plans: dict[str, TrackPlan], prices: Prices, devices: int
                  ) -> tuple[str, dict[str, Any]]:
    """The passes the campaign's lossless candidates may start, with their stops and capture
    overhead: the line under localize's own, and its JSON."""
    pricer = pass_pricer(devices)
    wall, passes, missing = 0.0, 0, False
    for plan in plans.values():
        if plan.quality != "lossless" or not plan.candidates:
            continue
        one = pass_seconds(pricer(plan, prices), plan, prices)
        passes += len(plan.candidates)
        if one is None:
            missing = True
            continue
        wall += len(plan.candidates) * one
    found = {"passes": passes, "wall_s": None if missing else wall,
             "device_s": None if missing else wall * devices,
             "capture_overhead_priced": prices.overhead() is not None}
    if not passes:
        return "", found
    if missing:
        return "  with its stops and capture overhead: not priced", found
    least = "" if prices.overhead() is not None else "at least "
    said = ("its capture overhead priced" if not least else
            "its capture overhead unpriced (protocol.capture_overhead: its requests at a plain "
            "request's price)")
    return (f"  with the stop after each start and {said}: {least}{wall / 3600:.2f} wall-h / "
            f"{least}{wall * devices / 3600:.2f} logical-device-h"
            + (" worst case" if not least else "")), found


def _bringup_line(campaign: LoadedCampaign) -> tuple[str, dict[str, Any]]:
    plan = step_schedule(campaign)
    cost = bringup_price(campaign, plan)
    return cost.line(plan), plan.json_dict() | {"cost": cost.json_dict()}


def run_plan(args: argparse.Namespace) -> int:
    campaign = load_campaign(args.campaign)
    plans = plan_campaign(campaign)
    if args.tracks:
        unknown = [t for t in args.tracks if t not in plans]
        if unknown:
            raise CampaignError(f"{args.campaign}: no track {', '.join(unknown)} "
                                f"(tracks: {', '.join(plans)})")
        plans = {t: p for t, p in plans.items() if t in args.tracks}
    result = check_budget(campaign, plans, read_ledger(args.ledger).entries)
    prices = Prices.of(campaign)
    devices = result.devices
    pricer = pass_pricer(devices)
    # The whole search the budget covers (priced on every track, whatever --track selects).
    everything = dict(plan_campaign(campaign))
    searched = search_cost(campaign, everything, prices, pricer, devices)
    table = [] if searched is None or searched.worst_s is None else what_if(
        campaign, everything, searched, pricer, result.wall_ceiling_h, result.device_ceiling_h)
    # What a demonstrated cheap warm-up would make of it (a what-if, said as one).
    cheap = None
    if searched is not None and campaign.model.protocol.warmup_steps is None:
        steps = {t: replace(p, latency=replace(p.latency, warmup_steps=WHAT_IF_WARMUP_STEPS))
                 for t, p in everything.items()}
        cheap = search_cost(campaign, steps, prices, pricer, devices)
    localizing = pass_cost(everything, prices, devices)
    passes_line, passes = _localization(everything, prices, devices)
    bring_line, bring = _bringup_line(campaign)
    localized = any(p.quality == "lossless" and p.candidates for p in everything.values()) \
        or bool(searched is not None and searched.lossless_directions)
    durations = list(dict.fromkeys(p.duration for p in everything.values()))
    scored = list(dict.fromkeys(p.duration for p in everything.values() if p.quality == "lossy"))
    shown_prices = price_lines(prices, durations, scored, everything, localized)
    if args.json:
        print(json.dumps({**result.json_dict(), "refused": result.refusal(),
                          "prices": shown_prices[1:],
                          "search": None if searched is None else searched.json_dict() | {
                              "what_if": [{"price": k.label, "now": k.now,
                                           "worst_case_fits_up_to": _num(w),
                                           "mix_fits_up_to": _num(m)} for k, w, m in table]},
                          "bringup": bring,
                          "localization": localizing.json_dict() | {"with_stops": passes}},
                         indent=2))
        return EXIT_PROBLEM if result.refusal() else EXIT_OK
    print(f"{args.campaign}: {', '.join(plans)}")
    print("\n".join(shown_prices))
    print("\n".join(budget_lines(result)))
    if searched is not None:
        print("\n".join(search_lines(searched, result.wall_ceiling_h, result.device_ceiling_h,
                                     table)))
    if cheap is not None and cheap.worst_s is not None:
        print(_cheap_line(cheap, result.wall_ceiling_h, result.device_ceiling_h))
    print(localizing.line())
    if passes_line:
        print(passes_line)
    print(bring_line)
    if result.refusal() is None:
        print("a run of these tracks would be allowed")
    return EXIT_PROBLEM if result.refusal() else EXIT_OK


def _num(value: float | None) -> float | str | None:
    return "any" if value == float("inf") else value


def _cheap_line(cheap: SearchCost, wall_h: float, device_h: float) -> str:
    """The search with warm-ups of WHAT_IF_WARMUP_STEPS steps, worst case and at the mix."""
    least = "at least " if cheap.at_least else ""

    def said(wall_s: float | None, device_s: float | None) -> str:
        wall, device = (wall_s or 0.0) / 3600, (device_s or 0.0) / 3600
        fits = wall <= wall_h and device <= device_h
        return (f"{least}{wall:.2f} wall-h, {least}{device:.2f} device-h "
                f"({'within' if fits else 'OVER'})")

    return (f"  with warm-ups of {WHAT_IF_WARMUP_STEPS} steps, once the host has demonstrated "
            "them (`ref2va-accept bringup` runs the demonstration; alone: pytest -m "
            f"warmup_demonstration --warmup-steps {WHAT_IF_WARMUP_STEPS}): "
            + ("each direction at its costliest outcome " if cheap.at_least else "worst case ")
            + said(cheap.worst_s, cheap.worst_device_s)
            + (f"; at the mix {said(cheap.mix_s, cheap.mix_device_s)}"
               if cheap.mix_s is not None else ""))
