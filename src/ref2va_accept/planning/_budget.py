"""The campaign's budget: wall-hours and logical-device-hours spent, planned and left.

Spent is read from the campaign's ledger: every run appends one ``run`` entry at its end,
whatever its status, with its wall time (the session, start to end) and its device time (each
engine instance's lifetime, spawn to stopped, times the campaign's logical devices), so warm-ups,
failed instances and retried runs are charged like the rest. Planned is what the frozen protocol
asks of the selected tracks (planning/_cost.py: every engine start, stop, request and score at
the campaign's frozen prices, a candidate no faster than B0 as the upper bound; scoring on the
CPU is wall time only, holding no device), so it can only be
estimated when the campaign freezes them (``protocol.expected_request_s``,
``protocol.expected_start_s``, ``scoring.seconds_per_output`` for a lossy track's gated dimensions);
what is missing is named.

The ceilings are the campaign's ``budget`` plus every authorization recorded there (who, how
much, when). A run that would pass one, counting what earlier runs spent and what this run
plans at most, is refused before any engine starts; one whose plan cannot be estimated is
refused only once the spent hours alone are past a ceiling, and the evidence says it was not
estimated. ``ref2va-accept plan`` prints the same figures without running.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ref2va_accept.campaign import LoadedCampaign
from ref2va_accept.evidence import Authorization, Budget, Bundle, LedgerEntry, Spent
from ref2va_accept.planning._cost import campaign_costs, device_seconds, total_seconds, unpriced
from ref2va_accept.planning._prices import Prices, unpriced_text
from ref2va_accept.planning._track_plan import TrackPlan

__all__ = ["budget_entry", "budget_lines", "check_budget", "device_count"]


def device_count(campaign: LoadedCampaign) -> int:
    """The logical devices every instance of this campaign holds (0 without an accelerator)."""
    devices = campaign.model.devices
    return 0 if devices.kind == "none" else len(devices.visible)


def budget_entry(bundle: Bundle, devices: int) -> dict[str, Any]:
    """The ledger's ``run`` entry of a finished run, from its evidence (its instances' audits)."""
    lifetimes = [float(i.cleanup.lifetime_s) for i in bundle.instances
                 if i.cleanup is not None and i.cleanup.lifetime_s is not None]
    return {"kind": "run", "instances": len(bundle.instances),
            "instance_s": round(sum(lifetimes), 3),
            "device_s": round(sum(lifetimes) * devices, 3), "devices": devices}


def spent(entries: Iterable[LedgerEntry]) -> Spent:
    runs = [e for e in entries if e.kind == "run"]
    return Spent(runs=len(runs), wall_s=sum(float(e.wall_s or 0) for e in runs),
                 device_s=sum(float(e.device_s or 0) for e in runs))


def budget_lines(check: Budget) -> list[str]:
    """The budget check in words, as `ref2va-accept plan` prints it."""
    plan = check.planned_wall_s
    device = check.planned_device_s
    before = check.spent_before
    wall_left = check.wall_ceiling_h - before.wall_s / 3600
    device_left = check.device_ceiling_h - before.device_s / 3600
    return [
        f"ceilings: {check.wall_ceiling_h:g} wall-hours, {check.device_ceiling_h:g} "
        f"logical-device-hours ({len(check.authorizations)} authorization(s) included)",
        f"spent by {before.runs} earlier run(s) (ledger): "
        f"{before.wall_s / 3600:.2f} wall-h, {before.device_s / 3600:.2f} device-h",
        ("planned for this run: not estimated (the campaign freezes no "
         f"{unpriced_text(check.unpriced) or 'price'})") if plan is None or device is None else
        (f"planned for this run: {plan[0] / 3600:.2f}-{plan[1] / 3600:.2f} wall-h, "
         f"{device[0] / 3600:.2f}-{device[1] / 3600:.2f} device-h (at the target ratio - no "
         f"candidate faster than B0; {check.devices} logical devices; every engine start, "
         "stop, request and score priced)"),
        f"left before this run: {wall_left:.2f} wall-h, {device_left:.2f} device-h",
        *(f"over: {o}" for o in check.over)]


def planned_seconds(plans: Mapping[str, TrackPlan], prices: Prices
                    ) -> tuple[float, float] | None:
    """Host seconds the selected tracks' protocol asks for: (at the target ratio, upper)."""
    if not plans:
        return (0.0, 0.0)
    return total_seconds(campaign_costs(plans, prices))


def check_budget(campaign: LoadedCampaign, plans: Mapping[str, TrackPlan],
          entries: Sequence[LedgerEntry]) -> Budget:
    """This run (its selected tracks' plans) against the ceilings and what earlier runs spent,
    as the evidence's `budget` records it (its `refusal` says whether the run may start)."""
    budget = campaign.model.budget
    authorizations = budget.authorizations or []
    granted = [Authorization(**a.model_dump()) for a in authorizations]
    wall_ceiling = budget.max_wall_hours + sum(a.wall_hours for a in authorizations)
    device_ceiling = budget.max_logical_device_hours + sum(a.device_hours for a in authorizations)
    before = spent(entries)
    devices = device_count(campaign)
    prices = Prices.of(campaign)
    plan = planned_seconds(plans, prices)
    device_plan = (device_seconds(campaign_costs(plans, prices), prices, devices) if plans
                   else (0.0, 0.0)) if plan is not None else None
    upper_wall = before.wall_s + (plan[1] if plan else 0.0)
    upper_device = before.device_s + (device_plan[1] if device_plan else 0.0)
    over = []
    if upper_wall > wall_ceiling * 3600:
        over.append(f"{upper_wall / 3600:.2f} wall-hours (spent {before.wall_s / 3600:.2f}"
                    + (f" + planned at most {plan[1] / 3600:.2f}" if plan else "")
                    + f") > {wall_ceiling:g}")
    if upper_device > device_ceiling * 3600:
        over.append(f"{upper_device / 3600:.2f} logical-device-hours (spent "
                    f"{before.device_s / 3600:.2f}"
                    + (f" + planned at most {device_plan[1] / 3600:.2f}" if device_plan
                       else "")
                    + f") > {device_ceiling:g}")
    missing = list(unpriced(campaign_costs(plans, prices))) if plan is None else []
    return Budget(wall_ceiling_h=wall_ceiling, device_ceiling_h=device_ceiling,
                  authorizations=granted, spent_before=before,
                  planned_wall_s=None if plan is None else list(plan),
                  planned_device_s=None if device_plan is None else list(device_plan),
                  devices=devices, over=over, unpriced=missing)
