"""The host bring-up as pytest scenarios: `pytest -m bringup` (with --campaign or
$REF2VA_CAMPAIGN) runs `ref2va-accept bringup` once and reports each of its rows as a test: a
confirmed or measured row passes, a contradicted one fails with the value seen, one not checked is
skipped with the reason (open, never a pass). A bring-up that did not finish (a step raised) fails
`test_bringup_finished` with where it stopped, and every row it left open fails instead of being
skipped; one interrupted by a signal ends the session as Ctrl-C does. Asked for by name only: no
other selection runs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ref2va_accept.bringup import QUESTION_IDS, BringupResult, run_bringup
from ref2va_accept.evidence import new_run_id
from ref2va_accept.plugin._selection import campaign_path

pytestmark = pytest.mark.bringup


@pytest.fixture(scope="module")
def bringup(request: pytest.FixtureRequest) -> Iterator[BringupResult]:
    config = request.config
    root = Path(config.getoption("evidence_dir"))
    root = root if root.is_absolute() else config.rootpath / root
    result = run_bringup(campaign_path(config), root, f"bringup-{new_run_id()}")
    if result.signalled is not None:
        raise KeyboardInterrupt(f"the bring-up was {result.failure}")
    yield result


def test_bringup_finished(bringup: BringupResult) -> None:
    assert bringup.finished, (f"the bring-up did not finish: {bringup.failure} (exit "
                              f"{bringup.exit_code}; {bringup.folder.name}/bringup.html)")


@pytest.mark.parametrize("row_id", QUESTION_IDS)
def test_row(bringup: BringupResult, row_id: str) -> None:
    row = next(r for r in bringup.rows if r.id == row_id)
    if row.status == "not_checked":
        if not bringup.finished:
            pytest.fail(f"not checked, and the bring-up did not finish: {row.seen}")
        pytest.skip(f"not checked: {row.seen}")
    assert row.status != "contradicted", f"{row.question}: contradicted: {row.seen}"
