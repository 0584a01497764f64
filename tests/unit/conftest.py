"""The harness's own tests keep the campaign ledgers of the runs they start to themselves.

A run appends its candidate attempts to the campaign's ledger, by default beside the campaign
file; the self-tests that run the shipped reference campaign (in a subprocess or in-process)
would otherwise grow `fixtures/campaigns/reference.ledger.jsonl` on every selftest. While a test
of this folder runs, REF2VA_LEDGER (which runs inherit) points at a ledger of the session's
own; a test that checks a ledger names its own with --ledger. A campaign run (`./ref2va
campaign`) selects no test here, so this fixture never runs there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

LEDGER_ENV = "REF2VA_LEDGER"


@pytest.fixture(scope="session", autouse=True)
def _session_ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("ledger") / "selftest.ledger.jsonl"
    before = os.environ.get(LEDGER_ENV)
    os.environ[LEDGER_ENV] = str(path)
    yield path
    if before is None:
        os.environ.pop(LEDGER_ENV, None)
    else:
        os.environ[LEDGER_ENV] = before
