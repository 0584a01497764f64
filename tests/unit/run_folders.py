"""Finished run folders for the tests that read runs back (merge, the stand-in labels): made
through the evidence's own writer (EvidenceBundle: its events, then evidence.json at its end), so
that each evidence.json is a complete bundle that matches the records, never a hand-written
part of one."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ref2va_accept.core import Check, Verdict
from ref2va_accept.evidence import AnyCheck, EvidenceBundle, TrackVerdict
from ref2va_accept.evidence.sanitize import Sanitizer
from ref2va_accept.judging import judge_latency
from tests.unit.latency_doubles import INSTANCE, latency_run

# A frozen campaign's lock (any sha256 will do: nothing here reads the campaign file).
LOCK = "c197f00a0d734627b11f4bc6c53ab7489299a9dc59f5b4697412cd0f4ca5c9a6"


def latency_check(track: str, arm: str, *, ratio: float, lower: float, upper: float,
                  verdict: str) -> AnyCheck:
    """A passed latency_ratio check as the runner records it (latency.judge_latency, three
    instances per arm), its decision then set to these figures."""
    runs = [latency_run("b0", [300], warmups=[340, 305]), latency_run(arm, [140], [150]),
            latency_run("b0", [310]), latency_run(arm, [139]),
            latency_run("b0", [295]), latency_run(arm, [142])]
    check = next(c for c in judge_latency(track, arm, runs, INSTANCE)
                 if c.name is Check.LATENCY_RATIO)
    assert check.latency is not None, check
    interval = check.latency.interval.model_copy(update={"lower": lower, "upper": upper})
    decided = check.latency.model_copy(update={"ratio_of_medians": ratio,
                                               "verdict": Verdict(verdict),
                                               "interval": interval})
    return check.revised(verdict=decided.verdict, interval=decided)


def finished_run(root: Path, run_id: str, verdicts: Sequence[TrackVerdict],
                 checks: Sequence[AnyCheck] = (), *, campaign: str = "reference-ci",
                 lock: str | None = LOCK, torch: str = "2.13.0+cpu") -> Path:
    """root/run_id as a complete run leaves it: the campaign (frozen with `lock`, else not
    frozen), the host's engine identity (its torch), `checks`, then `verdicts` and the status
    complete. Returns the run folder."""
    bundle = EvidenceBundle.create(root, run_id, Sanitizer((), ()))
    bundle.set_campaign({
        "name": campaign, "file": f"{campaign}.yaml", "engine_kind": "reference",
        "source_pin": {}, "canonical": {"name": campaign},
        "freeze": {"state": "frozen" if lock else "not_frozen", "lock_sha256": lock,
                   "problems": [], "unfilled": [], "verdict_cap": None},
        "order": {"seed": 7, "drawn_per_run": False, "given": False}})
    bundle.set_section("host_identity", {
        "engine_kind": "reference", "ok": True,
        "rows": [{"field": "torch", "frozen": torch, "host": torch, "status": "match",
                  "source": "pip"}]})
    for check in checks:
        bundle.add_check(check)
    bundle.finish("complete", lambda _: list(verdicts))
    return bundle.folder
