"""`ref2va-accept plan` on the host campaign as a user runs it, in a subprocess, once as text and
once as JSON for the whole module: the search priced against the campaign's ceilings (cost.py)
and the localization pass a lossless failure would add (localize)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest

from tests.unit.suite_runner import ROOT

HOST = ROOT / "fixtures/campaigns/910c.yaml"


def _plan(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "ref2va_accept.cli", "plan", str(HOST), *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT).stdout


@pytest.fixture(scope="module")
def text() -> str:
    return _plan()


@pytest.fixture(scope="module")
def as_json() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(_plan("--json"))
    return found


def test_plan_prints_the_search_against_the_ceilings(text: str, as_json: dict[str, Any]) -> None:
    out = text
    assert "every engine start, request and score priced" in out
    assert "search: 12 candidate directions (5s-lossy 5, 5s-lossless 7)" in out
    assert "worst case (every candidate passes its gate and sits at the target)" in out
    assert "at the campaign's outcome mix" in out
    assert "four-track confirmation of one final configuration per track" in out
    assert "with warm-ups of 4 steps, once the host has demonstrated them" in out
    # ... and what scoring one output may then cost for the worst case to fit the ceilings.
    fits = re.search(r"it fits if scoring one output takes at most (\d+) s \(now 2278 s on "
                     r"cpu", out)
    assert fits is not None, out
    assert 0 < int(fits.group(1)) < 2278
    found = as_json["search"]
    assert found["directions"] == 12 and found["worst_s"] > 0


def test_plan_prints_the_pass_and_its_json_holds_it(text: str, as_json: dict[str, Any]) -> None:
    assert "localization pass (after a lossless bit-exact failure" in text
    assert "logical-device-h" in text.split("localization pass", 1)[1].splitlines()[0]
    found = as_json["localization"]
    assert found["passes"] > 0 and found["requests"] == 4 * found["passes"]
    assert found["wall_s"] > 0 and found["unpriced"] == []
