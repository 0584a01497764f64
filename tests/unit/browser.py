"""The machine's Chromium for the tests that open a page in a real browser (through Playwright,
never a downloaded browser)."""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest


def chromium() -> str:
    """Debian's chromium. `.ci/run` installs it and sets REF2VA_REQUIRE_BROWSER=1, so that in CI
    its absence fails instead of skipping."""
    required = os.environ.get("REF2VA_REQUIRE_BROWSER") == "1"
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if importlib.util.find_spec("playwright") is None:
        found = None
    if found is None:
        if required:
            pytest.fail("REF2VA_REQUIRE_BROWSER=1 but no chromium (or no playwright) here")
        pytest.skip("no chromium on this machine: the browser check did not run")
    return found
