"""Which scenarios a session selects, as the checkout's own collection of tests/acceptance gives
them (in this process: no engine starts at collection): one track per quality and duration mark,
the campaign from the environment when no option names one, and a malformed campaign refused at
collection in one line naming its file and field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.plugin_sessions import collect_in_checkout
from tests.unit.suite_runner import campaign_variant

pytestmark = pytest.mark.fast

TRACKS = ("5s-lossless", "5s-lossy", "15s-lossless", "15s-lossy")


def _collected(expression: str, *extra: str) -> list[str]:
    result = collect_in_checkout("tests/acceptance", "-m", expression, *extra)
    assert result.ret == 0, result.out + result.err
    return result.nodeids


@pytest.mark.parametrize("track", TRACKS)
def test_marks_select_exactly_one_track(track: str) -> None:
    duration, quality = track.split("-")
    items = _collected(f"{quality} and {duration}")
    assert items, "nothing collected"
    assert all(item.endswith(f"[{track}]") for item in items), items


def test_a_duration_mark_selects_both_of_its_tracks() -> None:
    items = _collected("5s")
    ids = {re.search(r"\[(.*)\]$", item).group(1) for item in items}  # type: ignore[union-attr]
    assert ids == {"5s-lossless", "5s-lossy"}


def test_campaign_comes_from_the_environment_when_no_option_is_given(tmp_path: Path) -> None:
    campaign = campaign_variant(tmp_path / "c", tracks={})
    result = collect_in_checkout("tests/acceptance", env={"REF2VA_CAMPAIGN": str(campaign)})
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "campaign.yaml" in result.err and "tracks" in result.err


def test_malformed_campaign_fails_collection_with_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 1\nname: x\nsurprise: 1\n")
    result = collect_in_checkout("tests/acceptance", "--campaign", str(bad))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "bad.yaml: surprise: unknown key" in result.err
    assert "Traceback" not in result.out + result.err
