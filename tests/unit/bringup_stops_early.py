"""A pytest plugin for tests/unit/test_bringup.py (`-p tests.unit.bringup_stops_early`): the
bring-up's identity preflight raises, as a probe that breaks on a host would, so that the
bring-up stops at its first step."""

from __future__ import annotations

import pytest


def _raise(*_args: object, **_kwargs: object) -> None:
    raise RuntimeError("the stand-in preflight raised")


def pytest_configure(config: pytest.Config) -> None:
    from ref2va_accept.bringup import _steps as steps

    steps.preflight = _raise  # type: ignore[assignment]
