"""Where a campaign run stands in its plan (planning/_request_plan.py): what has run, what is
left, and the run's remaining time, as text. No I/O; live progress (arms/_progress.py) shows it.

Expected seconds per request: the campaign's frozen preflight medians
(`protocol.expected_request_s`) when given, else the median of the run's own finished requests
of that duration class. Each scenario's engine starts and scored outputs are counted too, and
priced at the campaign's frozen start time (`protocol.expected_start_s`) and scoring time
(`scoring.seconds_per_output`, summed over the gated dimensions), as `plan` prices them; one
the campaign does not freeze is named as not in the estimate. Comparisons are not priced
(seconds, against minutes for a request).

The estimate is "~", never a bound: a latency schedule is counted as scheduled (every instance,
its least warm-ups), and a run decided early sends fewer requests while an unsettled instance
sends more warm-ups; what is not priced would add to it. (The reference campaign's 15 s lane
once read ">=10m19s" after its 5th request of 81 and ended about four minutes later, having sent
48.)
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ref2va_accept.planning._request_plan import Plan, WorkUnit

PREFIX = "[ref2va]"  # every live-progress line starts with it


def _tally(units: Iterable[WorkUnit], what: str, by: str) -> dict[str, int]:
    """Of `what` (a WorkUnit count: requests, starts, scored), the sum per `by` (duration, track),
    keys with none left out."""
    counts: dict[str, int] = {}
    for unit in units:
        n = getattr(unit, what)
        if n:
            key = getattr(unit, by)
            counts[key] = counts.get(key, 0) + n
    return counts


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def fmt_duration(seconds: float) -> str:
    s = max(0, round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


@dataclass
class Progress:
    """The plan, what has run of it, and the remaining time; no I/O.

    `start_s` (per duration class) and `score_s` (per track: one output on every gated
    dimension) are the campaign's frozen prices; without them starts and scoring are named as
    not in the estimate, never silently left out."""

    plan: Plan
    medians: Mapping[str, float] | None = None
    start_s: Mapping[str, float] | None = None
    score_s: Mapping[str, float] | None = None
    started: int = 0
    finished: dict[str, list[float]] = field(default_factory=dict)  # duration -> seconds (ok)
    done_units: set[str] = field(default_factory=set)
    done_items: set[str] = field(default_factory=set)
    current_item: str | None = None
    sent_in_item: int = 0
    starts_in_item: int = 0

    def item_started(self, nodeid: str) -> None:
        self.current_item, self.sent_in_item, self.starts_in_item = nodeid, 0, 0

    def item_finished(self, nodeid: str) -> None:
        # Whatever it sent, its units are over (a failed B0 makes its candidates send nothing).
        self.done_items.add(nodeid)
        self.done_units |= {u.key for u in self.plan.items.get(nodeid, ())}
        if self.current_item == nodeid:
            self.current_item, self.sent_in_item, self.starts_in_item = None, 0, 0

    def request_started(self) -> int:
        self.started += 1
        self.sent_in_item += 1
        return self.started

    def engine_started(self) -> None:
        self.starts_in_item += 1

    def request_finished(self, duration: str, seconds: float, ok: bool) -> None:
        if ok:  # a fast failure says nothing about how long a request takes
            self.finished.setdefault(duration, []).append(seconds)

    def _pending(self) -> dict[str, WorkUnit]:
        pending: dict[str, WorkUnit] = {}
        for nodeid, units in self.plan.items.items():
            if nodeid in self.done_items:
                continue
            for unit in units:
                if unit.key not in self.done_units:
                    pending.setdefault(unit.key, unit)
        return pending

    def _remaining(self, what: str, done_in_item: int, by: str = "duration") -> dict[str, int]:
        """Of `what` (a WorkUnit count), how many are still to come, per duration class (or track);
        `done_in_item`: how many the running scenario has done already."""
        pending = self._pending()
        counts = _tally(pending.values(), what, by)
        current = self.plan.items.get(self.current_item or "", ())
        if current and done_in_item:
            # Every unit of one scenario is of its track, so of one duration class.
            key = getattr(current[0], by)
            own = sum(getattr(u, what) for u in current if u.key in pending)
            counts[key] = counts.get(key, 0) - min(done_in_item, own)
        return {k: n for k, n in counts.items() if n > 0}

    def remaining_requests(self) -> dict[str, int]:
        """Requests still to start, per duration class (the running one excluded)."""
        return self._remaining("requests", self.sent_in_item)

    def remaining_starts(self) -> dict[str, int]:
        """Engine starts still to come, per duration class."""
        return self._remaining("starts", self.starts_in_item)

    def remaining_scored(self) -> dict[str, int]:
        """Outputs still to score, per track (the running scenario's until it ends)."""
        return self._remaining("scored", 0, by="track")

    @property
    def total(self) -> int:
        """N of "request n of N": what started plus what is still planned."""
        return self.started + sum(self.remaining_requests().values())

    def expected_s(self, duration: str) -> float | None:
        if self.medians and duration in self.medians:
            return float(self.medians[duration])
        seen = self.finished.get(duration)
        return statistics.median(seen) if seen else None

    def source(self) -> str:
        if self.medians:
            return "from the frozen preflight medians"
        n = sum(len(v) for v in self.finished.values())
        if not n:
            return "no finished request yet"
        return f"estimate from {_count(n, 'finished request')}"

    def eta(self, running: str | None = None, elapsed: float = 0.0) -> str:
        """The run's remaining time as text, e.g. "~3h10m (from the frozen ...)": requests,
        engine starts and scoring, each at its frozen price; what has none is named."""
        total, unknown, unpriced = 0.0, [], []
        remaining = self.remaining_requests()
        for duration, count in sorted(remaining.items()):
            expected = self.expected_s(duration)
            if expected is None:
                unknown.append(f"{count} x {duration}")
            else:
                total += count * expected
        if running is not None:
            expected = self.expected_s(running)
            if expected is None:
                unknown.append(f"the running {running} request")
            else:
                total += max(0.0, expected - elapsed)
        starts, scored = self.remaining_starts(), self.remaining_scored()
        for counts, prices, verb, noun in ((starts, self.start_s, "", "engine start"),
                                           (scored, self.score_s, "scoring ", "output")):
            for key, count in sorted(counts.items()):
                price = (prices or {}).get(key)
                if price is None:
                    unpriced.append(f"{verb}{_count(count, noun)} ({key})")
                else:
                    total += count * price
        if not remaining and running is None and not starts and not scored:
            return "none left"
        if (unknown or unpriced) and not total:
            return f"unknown ({self.source()})"
        text = f"~{fmt_duration(total)} ({self.source()}"
        if unknown:
            text += f"; not yet timed: {', '.join(unknown)}"
        if unpriced:
            text += f"; not priced: {', '.join(unpriced)}"
        return text + ")"

    def summary(self) -> str:
        counts = self.plan.per_duration()
        parts = ", ".join(f"{d}: {counts[d]}" for d in ("5s", "15s") if d in counts)
        scenarios = sum(1 for u in self.plan.items.values() if u)
        text = f"{PREFIX} plan: {_count(self.plan.total, 'request')} ({parts}) in " \
               f"{_count(scenarios, 'scenario')}"
        if self.plan.as_scheduled:
            text += (" (latency runs as scheduled: one decided early, or whose candidate fails "
                     "a gate, sends fewer; an unsettled instance more warm-ups)")
        if self.medians:
            medians = ", ".join(f"{d} {self.medians[d]:.1f} s" for d in ("5s", "15s")
                                if d in self.medians)
            text += f"; expected per request {medians} from the frozen preflight medians"
        else:
            text += "; expected time per request estimated from this run's finished requests"
        return text + "; " + self._priced_text()

    def _priced_text(self) -> str:
        """What the starts and the scoring of the plan add, and at what price."""
        units = self.plan.units().values()
        said = []
        for what, by, prices, noun, shown in (
                ("starts", "duration", self.start_s, "engine start", "g"),
                ("scored", "track", self.score_s, "scored output", ".0f")):
            for key, count in _tally(units, what, by).items():
                price = (prices or {}).get(key)
                said.append(f"{_count(count, noun)} ({key}) "
                            + (f"at {price:{shown}} s" if price is not None else "not priced"))
        return ", ".join(said) or "no engine start or scoring planned"
