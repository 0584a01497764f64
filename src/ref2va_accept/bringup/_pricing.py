"""The bring-up's prices: the steps that measure what `plan` prices a run with and no earlier
step measures (the capture overhead, the warm-up demonstration, scoring), their rows, and the
patch's edits for every price, each recorded under `measured` with the bring-up's run id.

- stops: every engine the bring-up stops (the policies' B0s, the Cache-DiT server, the
  demonstration's instances), SIGTERM to gone plus the wait for device memory back to idle; the
  patch sets `protocol.expected_stop_s` to the slowest (a stop's time is mostly the memory wait,
  whose spread is one-sided: the slowest is what a run should plan for);
- the capture overhead: on the first B0 server that serves, a level-1 capture request (every DiT
  block hooked at step 0, digests only) and a level-2 one (the first block's modules, their
  tensors written), each against that server's plain 5 s request less its dump;
- the warm-up demonstration (judging's `demonstrate`) per duration class, on the chosen memory
  policy: where every class shows cheap warm-ups within steady_fraction, the patch sets
  `protocol.warmup_steps` and its `warmup_demonstration`;
- scoring (bringup/_scoring.py), once every engine has stopped.

Anything not measured is a row not checked, naming the one command that measures it.
"""

from __future__ import annotations

import math
import shutil
import statistics
from typing import Any

from ref2va_accept.arms import Arms, Outcome
from ref2va_accept.bringup._patch import ScalarEdit
from ref2va_accept.bringup._records import Prices, StopPrice, StopRecord
from ref2va_accept.bringup._rows import confirmed, contradicted, measured, not_checked
from ref2va_accept.bringup._scoring import measure
from ref2va_accept.bringup._state import (
    POINT_FOR_PATH,
    START_TOLERANCE,
    TRACK_LABEL,
    BringupState,
    PolicyRun,
)
from ref2va_accept.core import ArmRole, CheckStatus, Ref2VAError
from ref2va_accept.engines import EngineInstance, Release, wait_for_release
from ref2va_accept.evidence import BringupRow, Cleanup, WarmupDemonstrationData
from ref2va_accept.judging import demonstrate
from ref2va_accept.judging.localize import read_log
from ref2va_accept.planning import fmt_bytes
from ref2va_contract.diagnostics import (
    CAPTURE_DIT,
    CAPTURE_STAGE_KEY,
    CAPTURE_STEP_KEY,
    CAPTURE_TENSORS_KEY,
    CAPTURE_WITHIN_KEY,
)

# Level 2 writes every module inside the block: a bound of many times the block's own inputs and
# outputs (as the localization pass bounds it), times a margin.
LEVEL2_BOUND = 32 * 1.25
_DTYPE_BYTES = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2, "I64": 8, "I32": 4, "U8": 1, "BOOL": 1}


def _campaign_arg(state: BringupState) -> str:
    return f"--campaign {state.campaign.path.name}"


class Pricing(BringupState):
    """The steps, rows and edits of the prices (see the module doc)."""

    # -- the capture overhead ----------------------------------------------------------------------
    def capture(self, arms: Arms, engine: EngineInstance, run: PolicyRun) -> None:
        """The two capture requests on the first B0 server that serves."""
        if not self.plan.capture_requests:
            return
        one = self._capture(arms, engine, 1, None)
        calls = []
        if one.complete and one.dump_dir is not None:
            try:
                calls = [c for c in read_log(one.dump_dir) if c.step == 0]
            except Ref2VAError as exc:
                self.capture_problems["level2"] = f"level 1's capture log: {exc}"
        if not calls:
            self.capture_problems.setdefault(
                "level2", "level 1 captured no call of a DiT block: no block to look inside")
            return
        block = calls[0]
        need = int(LEVEL2_BOUND * sum(math.prod(d.shape) * _DTYPE_BYTES.get(d.dtype, 8)
                                      for d in (*block.inputs, *block.outputs)))
        free = shutil.disk_usage(self.bundle.folder).free
        if free < need:
            self.capture_problems["level2"] = (f"not enough disk for level 2 inside "
                                               f"{block.module}: up to {fmt_bytes(need)}, "
                                               f"{fmt_bytes(free)} free")
            return
        self._capture(arms, engine, 2, block.module)

    def _capture(self, arms: Arms, engine: EngineInstance, level: int, within: str | None
                 ) -> Outcome:
        capture = {CAPTURE_STAGE_KEY: CAPTURE_DIT, CAPTURE_STEP_KEY: 0,
                   CAPTURE_WITHIN_KEY: within, CAPTURE_TENSORS_KEY: within is not None}
        outcome = arms.request(engine, ArmRole.B0, kind=f"{TRACK_LABEL}-capture", index=level,
                               diagnostics_points=(POINT_FOR_PATH,), capture=capture)
        self.capture_runs[f"level{level}"] = outcome
        return outcome

    def capture_factors(self) -> dict[str, float]:
        """Each level's capture request over the plain request of the same server (its
        latency less its dump), as measured (may be below 1)."""
        run = self.capture_server
        if run is None or run.request is None or run.request.sample.latency_s is None:
            return {}
        plain = run.request.sample.latency_s - float(
            (run.enabled_path or {}).get("dump_seconds") or 0.0)
        return {level: outcome.sample.latency_s / plain
                for level, outcome in self.capture_runs.items()
                if outcome.complete and outcome.sample.latency_s is not None and plain > 0
                and level not in self.capture_problems}

    # -- the warm-up demonstration -----------------------------------------------------------------
    def demonstration(self) -> None:
        served = [r for r in self.policies if r.served]
        chosen = next((r for r in served if r.release is None or r.release.released), None)
        for demo in self.plan.warmup_demonstration:
            if chosen is None or chosen.path is None:
                self.demos[demo.duration] = "no B0 memory policy started, served and released"
                continue
            arms = self.arms(demo.track, self.policy_spec(chosen.path))
            label = f"warm-up demonstration {demo.duration}"
            def hook(audit: Cleanup, what: str = label) -> None:
                self.record_stop(audit, what)

            self.registry.on_audit.append(hook)
            try:
                check = demonstrate(arms, demo.warmup_steps, demo.pairs)
            except Ref2VAError as exc:
                self.demos[demo.duration] = f"an instance did not start: {str(exc).splitlines()[0]}"
                continue
            finally:
                self.registry.on_audit.remove(hook)
            self.bundle.add_check(check)
            self.demos[demo.duration] = check
            self.bundle.checkpoint()

    # -- scoring -----------------------------------------------------------------------------------
    def scoring(self) -> None:
        for step in self.plan.scoring:
            if not step.same_shape:
                self.scoring_missing[step.duration] = (
                    f"{step.output_of}'s frames or size differ from {step.track}'s: B0's output "
                    "is not one of its")
                continue
            outcome = self._output(step.duration)
            if outcome is None or not outcome.complete or outcome.media_path is None:
                self.scoring_missing[step.duration] = f"no complete B0 {step.duration} output"
                continue
            from ref2va_accept.quality import score_video  # noqa: PLC0415

            reference = self.track_plan(step.track, self.model.baseline).inputs.reference_image
            try:
                self.scoring_prices.append(measure(
                    self.campaign, step.duration, step.track, step.dimensions,
                    outcome.media_path, reference.path, step.device, score_video))
            except Exception as exc:  # a scorer's own failure leaves the price open, named
                self.scoring_missing[step.duration] = (f"scoring failed: {type(exc).__name__}: "
                                                       f"{str(exc).splitlines()[0][:200]}")
            self.bundle.checkpoint()

    def _output(self, duration: str) -> Outcome | None:
        if duration == "15s":
            return self.long_request
        run = next((r for r in self.policies if r.served), None)
        return None if run is None else run.request

    # -- rows --------------------------------------------------------------------------------------
    def judge_prices(self) -> None:
        self.put(self._stop_row())
        self.put(self._capture_row())
        self.put(self._warmup_row())
        self.put(self._scoring_row())
        self.data.prices = Prices(
            stops=[StopPrice(what=s.what, seconds=round(s.seconds, 3)) for s in self.stops],
            capture={k: round(v, 4) for k, v in self.capture_factors().items()},
            capture_problems=dict(self.capture_problems),
            warmup_demonstration=dict(self.demos), scoring=list(self.scoring_prices),
            scoring_missing=dict(self.scoring_missing))

    def _stop_row(self) -> BringupRow:
        if not self.stops:
            return not_checked("stop_time", "no engine was stopped", "`ref2va-accept bringup` "
                               "measures it once an engine starts")
        worst = max(s.seconds for s in self.stops)
        per: dict[str, list[float]] = {}
        for stop in self.stops:
            per.setdefault(stop.what or "?", []).append(stop.seconds)
        seen = "; ".join(f"{what}: {max(v):.1f} s" for what, v in per.items())
        estimate = (self.model.protocol.expected_stop_s or {}).get("5s")
        if estimate is None:
            return measured("stop_time", f"slowest stop {worst:.1f} s (SIGTERM to gone and "
                            f"device memory back to idle): {seen}")
        off = abs(worst - estimate) / estimate if estimate else 1.0
        return (confirmed if off <= START_TOLERANCE else contradicted)(
            "stop_time", f"slowest stop {worst:.1f} s against the estimate {estimate:g} s "
            f"({off:.0%} off): {seen}")

    def _capture_row(self) -> BringupRow:
        if not self.plan.capture_requests:
            return not_checked("capture_overhead", "the campaign has no lossless track (no "
                               "localization pass to price) or no 5 s track")
        factors = self.capture_factors()
        said = "; ".join(f"{k}: {v:.3f}x a plain request" for k, v in factors.items())
        lacking = [f"{level}: " + self.capture_problems.get(level, self._why_not(level))
                   for level in ("level1", "level2") if level not in factors]
        if lacking:
            return not_checked("capture_overhead", "; ".join([*([said] if said else []),
                                                              *lacking]),
                               "`ref2va-accept bringup` measures it on a B0 server that serves "
                               "and captures")
        frozen = self.model.protocol.capture_overhead
        if not frozen:
            return measured("capture_overhead", said)
        off = {k: abs(max(1.0, v) - frozen[k]) / frozen[k] for k, v in factors.items()
               if k in frozen}
        worst = max(off.values(), default=1.0)
        return (confirmed if len(off) == 2 and worst <= START_TOLERANCE else contradicted)(
            "capture_overhead", f"{said} against the frozen {frozen}")

    def _why_not(self, level: str) -> str:
        outcome = self.capture_runs.get(level)
        if outcome is None:
            return "no B0 server served its 5 s request" if self.capture_server is None \
                else "not sent"
        return f"the request did not complete: {outcome.explain()[:200]}"

    def _warmup_row(self) -> BringupRow:
        demos = self.plan.warmup_demonstration
        command = (f"pytest -m warmup_demonstration --warmup-steps "
                   f"{demos[0].warmup_steps if demos else 4} "
                   f"{_campaign_arg(self)}")
        if not demos:
            return not_checked("warmup_steps", "the bring-up was asked to leave the warm-up "
                               "demonstration out (--no-warmup-demonstration)", command)
        open_, bad, good = [], [], []
        for demo in demos:
            found = self.demos.get(demo.duration)
            if found is None or isinstance(found, str):
                open_.append(f"{demo.duration}: {found or 'not reached'}")
            elif found.status == CheckStatus.PASS:
                good.append(f"{demo.duration}: {found.detail.split('; per_duration')[0]}")
            elif found.reason is not None and found.reason.value == "warmup_not_steady":
                bad.append(f"{demo.duration}: {found.detail.split('; per_duration')[0]}")
            else:
                open_.append(f"{demo.duration}: {found.detail}")
        if bad:
            return contradicted("warmup_steps", "; ".join(bad + good + open_))
        if open_:
            return not_checked("warmup_steps", "; ".join(open_ + good), command)
        return confirmed("warmup_steps", "; ".join(good) + " (in the patch)")

    def _scoring_row(self) -> BringupRow:
        if not self.plan.scoring:
            return not_checked("scoring_price", "the campaign has no lossy track: nothing is "
                               "scored")
        frozen = self.model.scoring.seconds_per_output or {}
        lines, lacking, off = [], [], []
        for price in self.scoring_prices:
            total = sum(price.seconds.values())
            label = " (with the shipped stand-in weights)" if price.with_standins else ""
            lines.append(f"{price.duration} ({price.track}, {price.device}): {total:.1f} s per "
                         f"output over {len(price.seconds)} dimension(s){label}")
            lacking += [f"{price.duration} {d}: {why}" for d, why in price.missing.items()]
            known = frozen.get(price.duration, {})
            if all(d in known for d in price.seconds):
                was = sum(known[d] for d in price.seconds)
                off.append(abs(total - was) / was if was else 1.0)
        lacking += [f"{d}: {why}" for d, why in self.scoring_missing.items()]
        if lacking:
            return not_checked("scoring_price", "; ".join(lines + lacking),
                               "`ref2va-accept bringup` measures it; a dimension's files: "
                               "`ref2va-accept scorers standins fixtures/standins`")
        if not off or len(off) < len(self.scoring_prices):
            return measured("scoring_price", "; ".join(lines))
        return (confirmed if max(off) <= START_TOLERANCE else contradicted)(
            "scoring_price", "; ".join(lines) + f" against the campaign's scoring prices "
            f"({max(off):.0%} off at most)")

    # -- the patch ---------------------------------------------------------------------------------
    def price_edits(self) -> list[ScalarEdit]:
        edits: list[ScalarEdit] = []
        durations = [d for d in ("5s", "15s") if any(t.startswith(d) for t in self.model.tracks)]
        if self.stops:
            worst = max(s.seconds for s in self.stops)
            comment = ("SIGTERM to gone plus device memory back to idle: the slowest stop the "
                       "bring-up measured")
            for n, duration in enumerate(durations):
                edits.append(ScalarEdit(("protocol", "expected_stop_s", duration),
                                        math.ceil(worst), "the slowest stop measured",
                                        f"protocol.expected_stop_s.{duration}",
                                        comment if n == 0 else ""))
        factors = self.capture_factors()
        for n, (level, factor) in enumerate(sorted(factors.items())):
            edits.append(ScalarEdit(
                ("protocol", "capture_overhead", level), round(max(1.0, factor), 3),
                f"a capture request measured at {factor:.3f}x a plain one"
                + (" (no slower: 1)" if factor < 1 else ""),
                f"protocol.capture_overhead.{level}",
                "" if n else "a localization pass's capture request over a plain one, measured"))
        edits += self._scoring_edits()
        edits += self._warmup_edits()
        return edits

    def _scoring_edits(self) -> list[ScalarEdit]:
        edits: list[ScalarEdit] = []
        models = False
        standins = False
        for price in self.scoring_prices:
            whole = not price.missing
            for dim, seconds in price.seconds.items():
                edits.append(ScalarEdit(
                    ("scoring", "seconds_per_output", price.duration, dim), round(seconds, 3),
                    f"scored on {price.device}",
                    f"scoring.seconds_per_output.{price.duration}" if whole else None))
            models = models or price.models > 0
            standins = standins or price.with_standins
        if models:
            edits.append(ScalarEdit(("scoring", "measured_with"),
                                    "standins" if standins else "pinned",
                                    "the weights the scoring prices were measured with"))
        return edits

    def _warmup_edits(self) -> list[ScalarEdit]:
        demos = self.plan.warmup_demonstration
        found = [self.demos.get(d.duration) for d in demos]
        shown = [c.data for c in found if c is not None and not isinstance(c, str)
                 and c.status == CheckStatus.PASS and isinstance(c.data, WarmupDemonstrationData)]
        if not demos or len(shown) != len(found):
            return []
        limit = self.model.protocol.steady_fraction or 0.05
        per: dict[str, Any] = {}
        for demo, data in zip(demos, shown, strict=True):
            full = [round(float(v), 3) for v in data.full_s]
            cheap = [round(float(v), 3) for v in data.cheap_s]
            if abs(statistics.median(cheap) / statistics.median(full) - 1) > limit:
                return []  # rounding took it past the limit: the campaign would refuse it
            per[demo.duration] = {"full_s": full, "cheap_s": cheap}
        steps = demos[0].warmup_steps
        block = {"warmup_steps": steps, "run_id": self.bundle.run_id,
                 "measured_at": shown[0].measured_at, "per_duration": per}
        return [ScalarEdit(("protocol", "warmup_steps"), steps,
                           "warm-ups of that many steps demonstrated"),
                ScalarEdit(("protocol", "warmup_demonstration"), block,
                           "the bring-up's warm-up demonstration",
                           "protocol.warmup_demonstration")]

    # -- stops -------------------------------------------------------------------------------------
    def record_stop(self, audit: Cleanup, what: str) -> Release | None:
        """After a stop: the wait for device memory (with an accelerator) and the stop's
        record, whose time is a stop's price."""
        release = None
        if self.model.devices.kind != "none" and self.idle is not None:
            release = wait_for_release(self.probe(), self.model.devices.visible, self.idle,
                                       self.model.devices.memory_release)
        self.stops.append(StopRecord(audit=audit, release=None if release is None
                                     else release.record(), what=what))
        self.data.stops = list(self.stops)
        self.bundle.checkpoint()
        return release
