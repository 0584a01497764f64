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
    assert "every engine start, stop, request and score priced" in out
    assert "search: 12 candidate directions (5s-lossy 5, 5s-lossless 7)" in out
    # The capture overhead is unpriced: the figures that include a pass are lower bounds.
    assert "each direction at its costliest outcome: at least" in out
    assert "at the campaign's outcome mix: at least" in out
    assert "localization in the outcome mix: each of the 7 lossless directions" in out
    assert "four-track confirmation of one final configuration per track" in out
    assert "with warm-ups of 4 steps, once the host has demonstrated them" in out
    # The what-if table: a row per price, the value the search still fits at.
    table = out.split("what-if, each price alone")[1].split("four-track")[0]
    rows = re.findall(r"^    (engine start|engine stop|request|scoring one output|capture "
                      r"overhead)", table, flags=re.M)
    assert rows == ["engine start", "engine stop", "request", "scoring one output",
                    "capture overhead", "capture overhead"], table
    found = as_json["search"]
    assert found["directions"] == 12 and found["worst_s"] > 0
    assert found["localization_passes_expected"] == 3.5 and found["at_least"] is True
    assert [row["price"] for row in found["what_if"]][:2] == ["engine start (5s)",
                                                             "engine stop (5s)"]
    assert any(line.startswith("  engine stop: 5s 180 s") for line in as_json["prices"])


def test_plan_prints_the_pass_and_its_json_holds_it(text: str, as_json: dict[str, Any]) -> None:
    assert "localization pass (after a lossless bit-exact failure" in text
    assert "logical-device-h" in text.split("localization pass", 1)[1].splitlines()[0]
    found = as_json["localization"]
    assert found["passes"] > 0 and found["requests"] == 4 * found["passes"]
    assert found["wall_s"] > 0 and found["unpriced"] == []
    # With the stop after each of its starts, its capture overhead named unpriced.
    assert "  with the stop after each start and its capture overhead unpriced" in text
    assert found["with_stops"]["wall_s"] > found["wall_s"]
    assert found["with_stops"]["capture_overhead_priced"] is False
