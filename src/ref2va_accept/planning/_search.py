"""The campaign's declared search (its candidate directions and the tracks each is screened on)
priced as a whole against the budget, worst case and at the stated outcome mix, with the
four-track confirmation of one final configuration per track as a figure of its own.

Each direction ends one of three ways: its gate fails (it costs its gate, and on a lossless
track the localization pass the failure starts: pytest --no-localize turns it off), it is out of
reach (its gate and all but one of its latency instances, where the futility stop ends it) or it
sits at the target (its whole protocol). The worst case takes each direction at its costliest
outcome; the mix weighs the three by the campaign's `outcome_mix`, so the expected number of
localization passes is gate_failed times the lossless directions. A pass is priced by
judging/localize/_price.py (handed in by the caller: planning sits below judging), plus the stop
after each of its starts and its capture overhead (`protocol.capture_overhead`): while that is
unpriced the pass's requests are taken at a plain request's price and every figure that includes
one is said as "at least", never as a worst case.

The what-if table gives, for each price the search uses, the value at which it stops fitting
the ceilings (worst case and at the mix), the other prices as they are: the levers an operator
has when the search does not fit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ConfigDict, Field

from ref2va_accept.campaign import DurationClass, LoadedCampaign, OutcomeMix
from ref2va_accept.evidence import Number, Record
from ref2va_accept.planning._cost import (
    CandidateCost,
    Part,
    Requests,
    _grouped,
    total_seconds,
    unpriced,
)
from ref2va_accept.planning._prices import Prices, unpriced_text
from ref2va_accept.planning._request_plan import (
    hosted_gate_warmups,
    hosted_warmup_requests,
    hosts_gate,
)
from ref2va_accept.planning._track_plan import TrackPlan


@dataclass(frozen=True)
class PassFigures:
    """One localization pass on one track, as judging/localize/_price.py prices it: its starts,
    its requests and their seconds (starts at the start price, requests at a plain request's;
    None while a price is missing)."""

    starts: int
    requests: int
    wall_s: float | None


# One track's pass, priced at these prices (judging/localize/_price.py, through the caller).
PassPricer = Callable[[TrackPlan, Prices], PassFigures]


@dataclass(frozen=True)
class Spend:
    """Host seconds and, of them, scoring's (device time only on an accelerator)."""

    wall: float = 0.0
    scoring: float = 0.0

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.wall + other.wall, self.scoring + other.scoring)

    def __mul__(self, share: float) -> Spend:
        return Spend(self.wall * share, self.scoring * share)

    def device(self, prices: Prices, devices: int) -> float:
        return (self.wall - self.scoring) * devices + self.scoring * prices.scoring_devices


def _spend(part: Part, plan: TrackPlan, prices: Prices, speed: float) -> Spend:
    return Spend(part.seconds(plan, prices, speed), part.scoring_seconds(plan, prices))


def pass_seconds(figures: PassFigures, plan: TrackPlan, prices: Prices) -> float | None:
    """One pass with the stop after each start (its requests already at the capture overhead,
    or at a plain request's price while that is unpriced: localize.price.pass_cost); None while
    the pass itself is unpriced."""
    if figures.wall_s is None:
        return None
    return figures.wall_s + figures.starts * prices.stop(plan.duration)


@dataclass(frozen=True)
class Term:
    """One direction: B0's share on it and its cost per outcome."""

    b0: Spend
    outcomes: Mapping[str, Spend]


class SearchCost(Record):
    """The campaign's declared search priced against its budget (plan --json's `search`), its
    figures computed when search_cost builds it; what the what-if table prices it again from
    (the prices, each direction's terms, the outcome mix) is kept, not written."""

    model_config = ConfigDict(frozen=True)

    directions: int
    screened: dict[str, int]  # track -> directions screened on it
    # Wall and logical-device seconds; None while a price is missing (and the mix without one).
    worst_s: Number | None  # each direction at its costliest outcome
    mix_s: Number | None  # at the campaign's outcome mix
    worst_device_s: Number | None
    mix_device_s: Number | None
    confirmation_s: Number | None  # one final configuration per track, all four tracks
    confirmation_device_s: Number | None
    unpriced: tuple[str, ...]
    lossless_directions: int  # directions on lossless tracks: each gate failure starts a pass
    localization_passes_expected: Number  # at the mix
    localization_pass_s: Number | None  # one pass (the last lossless track's), stops in
    at_least: bool  # a pass's capture overhead is unpriced: the figures are lower bounds
    worst_outcomes: dict[str, int]  # worst case: directions per costliest outcome
    devices: int = Field(exclude=True)
    prices: Prices = Field(exclude=True)
    terms: tuple[Term, ...] = Field(exclude=True)
    shares: dict[str, float] | None = Field(exclude=True)  # the outcome mix, by outcome


def _outcomes(cost: CandidateCost, plan: TrackPlan, prices: Prices, pass_s: float | None
              ) -> tuple[Spend, dict[str, Spend]]:
    """B0's share and this direction's cost per outcome: a gate failure costs its gate (no
    faster than B0), and on a lossless track the pass it starts; a candidate out of reach its
    gate and all but one of its own latency instances (the futility stop ends a candidate no
    faster than B0, replication.supported_reachable); one at the target its whole protocol."""
    n = plan.latency.instances_per_arm or 1
    # A gate hosted by the candidate's first latency instance costs that instance's start, and
    # a lossy one its remaining warm-ups and measured requests too: it is scored once that
    # instance has stopped.
    settings = plan.latency
    waits = plan.quality == "lossy" and hosts_gate(plan)
    ran = hosted_warmup_requests(settings, hosted_gate_warmups(plan))[1] + settings.repeats \
        if waits else 0
    hosting = Part(starts=1 if hosts_gate(plan) else 0, requests=Requests.exactly(ran),
                   scored_outputs=0)
    b0 = _spend(cost.b0_gate + cost.b0_latency, plan, prices, 1.0)
    gate = _spend(cost.gate + hosting, plan, prices, 1.0)
    slow = _spend(cost.latency, plan, prices, 1.0) * ((n - 1) / n)
    localized = Spend(pass_s or 0.0) if plan.quality == "lossless" else Spend()
    return b0, {"gate failed": gate + localized, "out of reach": gate + slow,
                "at the target": _spend(cost.gate + cost.latency, plan, prices,
                                        plan.latency.target_ratio)}


def _shares(mix: OutcomeMix) -> dict[str, float]:
    return {"gate failed": mix.gate_failed, "out of reach": mix.out_of_reach,
            "at the target": mix.at_target}


def search_cost(campaign: LoadedCampaign, plans: Mapping[str, TrackPlan], prices: Prices,
                pricer: PassPricer, devices: int = 0) -> SearchCost | None:
    """The declared search (None when the campaign declares none), each track's directions
    sharing its B0 as the run does; `pricer` prices one localization pass of a track."""
    search = campaign.model.search
    if search is None:
        return None
    screened: dict[str, list[str]] = {}
    for direction in search.directions:
        for track in direction.tracks:
            screened.setdefault(track, []).append(direction.id)
    worst, mix = Spend(), Spend()
    missing: list[str] = []
    dominant: dict[str, int] = {}
    terms: list[Term] = []
    lossless = 0
    pass_s: float | None = None
    for track_id, costs in zip(screened, _grouped(plans, screened, prices, True), strict=True):
        plan = plans[track_id]
        missing += unpriced(costs)
        if total_seconds(costs) is None:
            continue
        if plan.quality == "lossless":
            lossless += len(costs)
            pass_s = pass_seconds(pricer(plan, prices), plan, prices)
            if pass_s is None:
                missing.append(f"the localization pass of {track_id}")
        for cost in costs:
            b0, outcomes = _outcomes(cost, plan, prices, pass_s)
            terms.append(Term(b0, outcomes))
            costliest = max(outcomes, key=lambda k: outcomes[k].wall)
            dominant[costliest] = dominant.get(costliest, 0) + 1
            worst = worst + b0 + outcomes[costliest]
            if search.outcome_mix is not None:
                shares = _shares(search.outcome_mix)
                mix = mix + b0
                for name, spend in outcomes.items():
                    mix = mix + spend * shares[name]
    confirm = [c for costs in _grouped(plans, {t: ["final"] for t in plans}, prices, True)
               for c in costs]
    missing += unpriced(confirm)
    confirmed = total_seconds(confirm)
    confirmation = None if confirmed is None else Spend(confirmed[0],
                                                        sum(c.scoring_s for c in confirm))
    priced = not missing
    gate_failed = search.outcome_mix.gate_failed if search.outcome_mix is not None else 0.0
    mixed = mix if priced and search.outcome_mix is not None else None

    def wall(spend: Spend | None) -> float | None:
        return None if spend is None else spend.wall

    def device(spend: Spend | None) -> float | None:
        return None if spend is None else spend.device(prices, devices)

    return SearchCost(
        directions=len(search.directions), screened={t: len(i) for t, i in screened.items()},
        worst_s=wall(worst if priced else None), mix_s=wall(mixed),
        worst_device_s=device(worst if priced else None), mix_device_s=device(mixed),
        confirmation_s=wall(confirmation), confirmation_device_s=device(confirmation),
        unpriced=tuple(dict.fromkeys(missing)), lossless_directions=lossless,
        localization_passes_expected=gate_failed * lossless, localization_pass_s=pass_s,
        at_least=bool(lossless) and prices.overhead() is None, worst_outcomes=dominant,
        devices=devices, prices=prices, terms=tuple(terms),
        shares=None if search.outcome_mix is None else _shares(search.outcome_mix))


# -- what-if -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Knob:
    """One price the search uses, and how to set it."""

    label: str
    now: float | None  # None: unpriced (taken at `floor` in the figures)
    unit: str
    set: Callable[[Prices, float], Prices]
    floor: float = 0.0  # the least it can be (a capture overhead is at least 1)


def _scaled(prices: Prices, plans: Mapping[str, TrackPlan], duration: DurationClass,
            value: float) -> Prices:
    """Scoring one output of `duration`'s lossy track at `value` seconds, its dimensions in
    their proportions (equal shares where they are all 0)."""
    plan = next(p for p in plans.values() if p.duration == duration and p.quality == "lossy")
    gated = plan.lossy.gate.gated
    now = prices.score_s(plan)
    known = dict(prices.scoring_s.get(duration, {}))
    for dim in gated:
        known[dim] = (known.get(dim, 0.0) * value / now) if now else value / len(gated)
    return replace(prices, scoring_s={**prices.scoring_s, duration: known})


def _setter(name: str, key: str) -> Callable[[Prices, float], Prices]:
    """Sets one entry of the Prices mapping `name`."""

    def set_(prices: Prices, value: float) -> Prices:
        changed: dict[str, Any] = {name: {**getattr(prices, name), key: value}}
        return replace(prices, **changed)

    return set_


def _scorer(plans: Mapping[str, TrackPlan], duration: DurationClass
            ) -> Callable[[Prices, float], Prices]:
    def set_(prices: Prices, value: float) -> Prices:
        return _scaled(prices, plans, duration, value)

    return set_


def knobs(found: SearchCost, plans: Mapping[str, TrackPlan]) -> list[Knob]:
    """The prices of the screened tracks' duration classes, in `plan`'s order."""
    prices = found.prices
    durations = list(dict.fromkeys(plans[t].duration for t in found.screened))
    out: list[Knob] = []
    for d in durations:
        out.append(Knob(f"engine start ({d})", prices.start_s.get(d), "s", _setter("start_s", d)))
        out.append(Knob(f"engine stop ({d})", prices.stop(d), "s", _setter("stop_s", d)))
        out.append(Knob(f"request ({d})", prices.request_s.get(d), "s",
                        _setter("request_s", d)))
        lossy = next((p for t, p in plans.items() if t in found.screened and p.duration == d
                      and p.quality == "lossy"), None)
        if lossy is not None:
            out.append(Knob(f"scoring one output ({d}, {prices.scoring_device})",
                            prices.score_s(lossy), "s", _scorer(plans, d)))
    if found.lossless_directions:
        for level in ("level1", "level2"):
            out.append(Knob(f"capture overhead {level.replace('level', 'level ')}",
                            prices.capture_overhead.get(level), "x",
                            _setter("capture_overhead", level), floor=1.0))
    return out


def _figures(terms: Sequence[Term], shares: Mapping[str, float] | None, prices: Prices,
             devices: int, pick: str) -> tuple[float, float]:
    """(wall, logical-device) seconds of the worst case (each direction at its costliest
    outcome) or the mix."""
    wall = device = 0.0
    for term in terms:
        wall += term.b0.wall
        device += term.b0.device(prices, devices)
        if pick == "worst":
            costliest = max(term.outcomes.values(), key=lambda o: o.wall)
            wall += costliest.wall
            device += costliest.device(prices, devices)
        else:
            for name, spend in term.outcomes.items():
                wall += (shares or {}).get(name, 0.0) * spend.wall
                device += (shares or {}).get(name, 0.0) * spend.device(prices, devices)
    return wall, device


def _line(zero: Spend, one: Spend, value: float) -> Spend:
    return Spend(zero.wall + value * (one.wall - zero.wall),
                 zero.scoring + value * (one.scoring - zero.scoring))


def _at(zero: SearchCost, one: SearchCost, value: float) -> list[Term]:
    """The search's terms with the knob at `value`: each outcome is linear in one price."""
    return [Term(_line(a.b0, b.b0, value),
                 {k: _line(a.outcomes[k], b.outcomes[k], value) for k in a.outcomes})
            for a, b in zip(zero.terms, one.terms, strict=True)]


def _threshold(zero: SearchCost, one: SearchCost, pick: str, prices: Prices, devices: int,
               wall_s: float, device_s: float) -> float | None:
    """The largest value at which the worst case (each direction at its costliest outcome: a
    maximum of lines, so rising in the value) or the mix fits both ceilings; None: none does
    (over even at 0); inf: any does."""

    def fits(value: float) -> bool:
        wall, device = _figures(_at(zero, one, value), zero.shares, prices, devices, pick)
        return wall <= wall_s * (1 + 1e-12) and device <= device_s * (1 + 1e-12)

    if not fits(0.0):
        return None
    low, high = 0.0, 1.0
    while fits(high):
        low, high = high, high * 2
        if high > 1e9:
            return float("inf")
    for _ in range(200):
        middle = (low + high) / 2
        if fits(middle):
            low = middle
        else:
            high = middle
        if high - low <= 1e-9 * max(high, 1.0):
            break
    return low


def what_if(campaign: LoadedCampaign, plans: Mapping[str, TrackPlan], found: SearchCost,
            pricer: PassPricer, wall_h: float, device_h: float
            ) -> list[tuple[Knob, float | None, float | None]]:
    """Per price: the value up to which the worst case, and the mix, fit the ceilings."""
    prices = found.prices
    rows = []
    for knob in knobs(found, plans):
        base = prices if knob.now is not None else knob.set(prices, knob.floor)
        zero, one = (search_cost(campaign, plans, knob.set(base, v), pricer, found.devices)
                     for v in (0.0, 1.0))
        limits: list[float | None] = []
        for pick in ("worst", "mix"):
            missing = zero is None or one is None or zero.worst_s is None or one.worst_s is None \
                or (pick == "mix" and zero.shares is None)
            limits.append(None if missing else _threshold(
                zero, one, pick, prices, found.devices,  # type: ignore[arg-type]
                wall_h * 3600, device_h * 3600))
        rows.append((knob, limits[0], limits[1]))
    return rows


def _limit(value: float | None, knob: Knob) -> str:
    if value is None or value < knob.floor:
        return "- (none fits)"
    if value == float("inf"):
        return "any"
    return f"x{value:.2f}" if knob.unit == "x" else f"{value:.0f} s"


def search_lines(found: SearchCost, wall_ceiling_h: float, device_ceiling_h: float,
                 table: Sequence[tuple[Knob, float | None, float | None]] = ()
                 ) -> list[str]:
    """The search against the ceilings, as `plan` prints it."""
    per_track = ", ".join(f"{t} {n}" for t, n in found.screened.items())
    lines = [f"search: {found.directions} candidate directions ({per_track})"]
    if found.worst_s is None:
        return [*lines, "search: not priced: the campaign freezes no "
                + unpriced_text(found.unpriced)]
    least = "at least " if found.at_least else ""

    def against(label: str, wall_s: float, device_s: float | None) -> str:
        wall, device = wall_s / 3600, (device_s or 0.0) / 3600
        fits = wall <= wall_ceiling_h and device <= device_ceiling_h
        verdict = "OVER" if not fits else "within"
        tail = ", before the capture overhead" if fits and found.at_least else ""
        return (f"  {label}: {least}{wall:.2f} wall-h, {least}{device:.2f} device-h "
                f"({verdict} {wall_ceiling_h:g} wall-h / {device_ceiling_h:g} device-h{tail})")

    ways = ", ".join(f"{n} {way}" for way, n in found.worst_outcomes.items())
    lines.append(against("worst case (each direction at its costliest outcome)"
                         if not found.at_least else "each direction at its costliest outcome",
                         found.worst_s, found.worst_device_s)
                 + f"; costliest outcome: {ways}")
    if found.mix_s is not None:
        lines.append(against("at the campaign's outcome mix", found.mix_s, found.mix_device_s))
    if found.lossless_directions:
        pass_s = found.localization_pass_s
        pass_text = "not priced" if pass_s is None else f"{pass_s / 3600:.2f} wall-h each"
        lines.append(f"  localization in the outcome mix: each of the "
                     f"{found.lossless_directions} lossless directions that fails its gate "
                     f"starts a pass ({pass_text}, its stops in): "
                     f"{found.localization_passes_expected:g} expected at the mix, "
                     + ("its capture overhead unpriced (protocol.capture_overhead: its requests "
                        "taken at a plain request's price, so the figures above are at least "
                        "what the search costs; `ref2va-accept bringup` measures it)"
                        if found.at_least else "its capture overhead priced"))
    if table:
        lines.append("  what-if, each price alone (the others as priced): the search fits up to")
        width = max(len(k.label) for k, _, _ in table)
        lines.append(f"    {'price':<{width}}  {'now':>9}  {'worst case':>14}  {'at the mix':>14}")
        for knob, worst, mix in table:
            now = ("unpriced" if knob.now is None else
                   f"x{knob.now:.2f}" if knob.unit == "x" else f"{knob.now:.0f} s")
            lines.append(f"    {knob.label:<{width}}  {now:>9}  {_limit(worst, knob):>14}  "
                         f"{_limit(mix, knob) if found.mix_s is not None else '-':>14}")
    if found.confirmation_s is not None:
        lines.append(f"  four-track confirmation of one final configuration per track: "
                     f"{found.confirmation_s / 3600:.2f} wall-h, "
                     f"{(found.confirmation_device_s or 0.0) / 3600:.2f} device-h (a "
                     "budget of its own)")
    return lines
