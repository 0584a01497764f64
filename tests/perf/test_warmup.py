"""The warm-up demonstration, run once on the host before freezing a cheaper warm-up.

`pytest -m warmup_demonstration --warmup-steps N` runs it on one track per duration class: B0 on
fresh instances, each pair one warmed up in full and one with N denoising steps, then a measured
request on each. It passes when the median request after the cheap warm-ups is within the
protocol's steady_fraction of the one after full warm-ups, and prints the entry to paste under
`protocol.warmup_demonstration.per_duration`. Never part of `./ref2va campaign`'s selection.
"""

from __future__ import annotations

import pytest

from ref2va_accept.arms import Arms, say_now
from ref2va_accept.judging import GateResult, demonstrate, fail_unless_passed

TRACK_CLASS = "lossless"  # one track per duration class
pytestmark = pytest.mark.warmup_demonstration


def test_cheap_warmup_is_demonstrated(arms: Arms, pytestconfig: pytest.Config) -> None:
    steps = pytestconfig.getoption("warmup_steps")
    if steps is None:
        pytest.fail("OPEN: --warmup-steps N names the warm-up to demonstrate", pytrace=False)
    check = demonstrate(arms, int(steps))
    arms.evidence.add_check(check)
    say_now(pytestconfig, f"warm-up demonstration {arms.plan.track_id}: {check.detail}")
    fail_unless_passed(GateResult.from_checks([check]))
