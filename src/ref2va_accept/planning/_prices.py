"""The price of each thing a run does on the host, and where each price comes from.

A campaign freezes its prices per duration class: B0's complete-request latency
(`protocol.expected_request_s`), an engine start (`protocol.expected_start_s`), an engine stop
(`protocol.expected_stop_s`: SIGTERM to gone plus the wait for device memory), what a
localization pass's capture request costs over a plain one (`protocol.capture_overhead`, per
capture level) and the seconds one output costs per scored dimension on the scoring device
(`scoring.seconds_per_output`). The host's bring-up measures them all and its patch records which
under `measured` (field -> the bring-up run). So every price `plan` uses is one of:

- measured: by the bring-up run `measured` names (scoring: with the pinned weights or the
  shipped stand-ins, `scoring.measured_with`);
- an estimate: frozen, but no bring-up measured it on this host;
- a bound: a stop the campaign does not price, at engine.shutdown_grace_s plus
  devices.memory_release.timeout_s (where devices are assigned): the most a stop may take;
- unpriced: missing. A figure that needs it is not given, or is given as "at least" with the
  missing price named, never as a worst case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ref2va_accept.campaign import DurationClass, LoadedCampaign
from ref2va_accept.planning._track_plan import TrackPlan

Source = Literal["measured", "estimate", "bound", "unpriced"]
CAPTURE_LEVELS = ("level1", "level2")


@dataclass(frozen=True)
class Prices:
    """The campaign's frozen price of each thing a run does on the host, per duration class."""

    request_s: Mapping[DurationClass, float] = field(default_factory=dict)
    start_s: Mapping[DurationClass, float] = field(default_factory=dict)
    # seconds per output and scored dimension (gated scorer ids), on the scoring device
    scoring_s: Mapping[DurationClass, Mapping[str, float]] = field(default_factory=dict)
    scoring_device: str = "cpu"
    stop_s: Mapping[DurationClass, float] = field(default_factory=dict)  # expected_stop_s
    stop_bound_s: float = 0.0  # a stop the campaign does not price: its grace and memory wait
    stop_bound_text: str = ""  # the bound in words (what it adds up)
    capture_overhead: Mapping[str, float] = field(default_factory=dict)  # level -> factor >= 1
    measured: Mapping[str, str] = field(default_factory=dict)  # field path -> bring-up run
    scoring_measured_with: str | None = None  # "standins" or "pinned"

    @classmethod
    def of(cls, campaign: LoadedCampaign) -> Prices:
        model = campaign.model
        protocol, scoring = model.protocol, model.scoring
        grace = model.engine.shutdown_grace_s
        devices = model.devices.kind != "none"
        wait = model.devices.memory_release.timeout_s if devices else 0.0
        text = (f"engine.shutdown_grace_s {grace:g} s"
                + (f" + devices.memory_release.timeout_s {wait:g} s" if devices else ""))
        return cls(dict(protocol.expected_request_s or {}), dict(protocol.expected_start_s or {}),
                   {d: dict(v) for d, v in (scoring.seconds_per_output or {}).items()},
                   scoring.device, dict(protocol.expected_stop_s or {}), grace + wait, text,
                   {str(k): v for k, v in (protocol.capture_overhead or {}).items()},
                   dict(model.measured or {}),
                   scoring.measured_with)

    # -- prices ------------------------------------------------------------------------------------
    def stop(self, duration: DurationClass) -> float:
        """One engine stop: its frozen price, else its bound."""
        return self.stop_s.get(duration, self.stop_bound_s)

    @property
    def scoring_devices(self) -> int:
        """The logical devices scoring occupies while it runs: none on the CPU (it costs wall
        time only), the one it names on an accelerator."""
        return 0 if self.scoring_device == "cpu" else 1

    def overhead(self) -> float | None:
        """A localization pass's request over a plain one: half its requests at level 1, half
        at level 2 (B0 and the candidate at each); None while either level is unpriced."""
        if any(level not in self.capture_overhead for level in CAPTURE_LEVELS):
            return None
        return sum(self.capture_overhead[level] for level in CAPTURE_LEVELS) / 2

    def unpriced(self, plan: TrackPlan) -> list[str]:
        """The campaign fields a price of this track is missing from."""
        missing = []
        if plan.duration not in self.request_s:
            missing.append(f"protocol.expected_request_s.{plan.duration}")
        if plan.duration not in self.start_s:
            missing.append(f"protocol.expected_start_s.{plan.duration}")
        return missing + self.unscored(plan)

    def scoring(self, duration: DurationClass, dimensions: Sequence[str]
                ) -> tuple[float, list[str]]:
        """Scoring one output of `duration` on `dimensions`: the seconds the campaign prices
        (0 for a dimension it does not), and the price fields it lacks."""
        known = self.scoring_s.get(duration, {})
        return (sum(known.get(dim, 0.0) for dim in dimensions),
                [f"scoring.seconds_per_output.{duration}.{dim}"
                 for dim in dimensions if dim not in known])

    def unscored(self, plan: TrackPlan) -> list[str]:
        """The scoring prices of this track's gated dimensions the campaign does not freeze."""
        if plan.quality != "lossy":
            return []
        return self.scoring(plan.duration, plan.lossy.gate.gated)[1]

    def score_s(self, plan: TrackPlan) -> float:
        """Scoring one output of this track on every gated dimension (0 on a lossless track)."""
        if plan.quality != "lossy":
            return 0.0
        return self.scoring(plan.duration, plan.lossy.gate.gated)[0]

    # -- where each comes from ---------------------------------------------------------------------
    def source(self, name: str, part: str) -> tuple[Source, str | None]:
        """(measured / estimate / bound / unpriced, the bring-up run that measured it) of one
        price: `name` a field of campaign._schema.MEASURED_FIELDS, `part` its duration class or
        capture level."""
        tables: dict[str, Mapping[Any, Any]] = {
            "protocol.expected_start_s": self.start_s,
            "protocol.expected_request_s": self.request_s,
            "protocol.expected_stop_s": self.stop_s,
            "protocol.capture_overhead": self.capture_overhead,
            "scoring.seconds_per_output": self.scoring_s}
        present = tables[name]
        if part not in present:
            return ("bound" if name == "protocol.expected_stop_s" else "unpriced"), None
        run = self.measured.get(f"{name}.{part}") or self.measured.get(name)
        return ("measured", run) if run else ("estimate", None)


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 100 else f"{value:.3g} s"


def _said(source: Source, run: str | None, prices: Prices, name: str) -> str:
    if source == "measured":
        with_what = ""
        if name == "scoring.seconds_per_output":
            with_what = {"standins": " with the shipped stand-in weights (the same networks)",
                         "pinned": " with the pinned weights"}.get(
                prices.scoring_measured_with or "", "")
        return f"measured by {run}{with_what}"
    if source == "bound":
        return f"a bound: {prices.stop_bound_text}"
    return source


# What measures each price on the host: the one command.
MEASURES = {
    "protocol.expected_start_s": "`ref2va-accept bringup` measures it",
    "protocol.expected_request_s": "`ref2va-accept bringup` measures it",
    "protocol.expected_stop_s": "`ref2va-accept bringup` measures it",
    "protocol.capture_overhead": "`ref2va-accept bringup`'s capture requests measure it",
    "scoring.seconds_per_output": "`ref2va-accept bringup` measures it on scoring.device",
}


def price_lines(prices: Prices, durations: Sequence[DurationClass], scored: Sequence[
        DurationClass], plans: Mapping[str, TrackPlan], localized: bool) -> list[str]:
    """The prices `plan` uses, each with where it comes from: the durations the tracks use,
    scoring for the lossy ones, the capture overhead where a pass may run (`localized`)."""
    rows: list[tuple[str, str, list[tuple[str, Source, str | None]]]] = []

    def row(label: str, name: str, parts: Sequence[str], value: Mapping[Any, str]) -> None:
        # (a stop is shown for every duration: its price, else its bound, as source says)
        found = [(p, *prices.source(name, p)) if p in value else (p, "unpriced", None)
                 for p in parts]
        rows.append((label, name, [(f"{p} {value[p]}" if p in value else p, s, r)
                                   for p, s, r in found]))

    row("engine start", "protocol.expected_start_s", durations,
        {d: _seconds(v) for d, v in prices.start_s.items()})
    row("engine stop", "protocol.expected_stop_s", durations,
        {d: _seconds(prices.stop(d)) for d in durations})
    row("request (B0, complete)", "protocol.expected_request_s", durations,
        {d: _seconds(v) for d, v in prices.request_s.items()})
    if scored:
        per = {d: _seconds(one) for d in scored
               if (one := _score(prices, plans, d)) is not None}
        row(f"scoring one output on {prices.scoring_device}", "scoring.seconds_per_output",
            scored, per)
    if localized:
        row("capture overhead (x a plain request)", "protocol.capture_overhead", CAPTURE_LEVELS,
            {k: f"x{v:.3g}" for k, v in prices.capture_overhead.items()})
    legend = {"measured": "measured: by the bring-up run named",
              "estimate": "estimate: frozen, not measured on this host",
              "bound": "bound: the most it may take",
              "unpriced": "unpriced: missing"}
    used = {s for _, _, found in rows for _, s, _ in found}
    lines = ["prices (" + "; ".join(text for key, text in legend.items() if key in used) + "):"]
    for label, name, found in rows:
        sources = {(s, r) for _, s, r in found}
        if len(sources) == 1:
            source, run = next(iter(sources))
            shown = ", ".join(text for text, _, _ in found)
            said = _said(source, run, prices, name)
        else:
            shown = ", ".join(f"{text} ({_said(s, r, prices, name)})" for text, s, r in found)
            said = "mixed"
        missing = any(s != "measured" for _, s, _ in found)
        lines.append(f"  {label}: {shown} - {said} ({name}"
                     + (f"; {MEASURES[name]})" if missing else ")"))
    return lines


def _score(prices: Prices, plans: Mapping[str, TrackPlan], duration: str) -> float | None:
    """Scoring one output of the lossy track of `duration` (None while a dimension is
    unpriced)."""
    plan = next((p for p in plans.values() if p.duration == duration and p.quality == "lossy"),
                None)
    if plan is None or prices.unscored(plan):
        return None
    return prices.score_s(plan)


def unpriced_text(names: Sequence[str]) -> str:
    """The missing prices in brief: each field once, with the duration classes (and, for
    scoring, how many gated dimensions) it lacks."""
    grouped: dict[str, dict[str, int]] = {}
    for name in names:
        parts = name.split(".")
        field_name, duration = ".".join(parts[:2]), parts[2] if len(parts) > 2 else ""
        per = grouped.setdefault(field_name, {})
        per[duration] = per.get(duration, 0) + 1
    said = []
    for field_name, per in grouped.items():
        if field_name == "scoring.seconds_per_output":
            counts = ", ".join(f"{d}: {n} gated dimension(s)" for d, n in per.items())
            said.append(f"{field_name} ({counts})")
        else:
            said.append(f"{field_name} ({', '.join(per)})")
    return "; ".join(said)
