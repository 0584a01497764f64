"""The release wheels the contract tests read: obtained once per session, or why they are not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.contract import wheel as wheel_mod
from tests.contract.upstream import Upstream
from tests.contract.wheel import SourceTree, WheelError


@pytest.fixture(scope="session")
def pinned_wheel() -> Path | WheelError:
    """The verified wheel, or why there is none (each test that needs it then fails)."""
    try:
        return wheel_mod.obtain()
    except WheelError as exc:
        return exc


def _released(pin: wheel_mod.Pin) -> Upstream | str:
    """The vLLM or Cache-DiT release read like the wheel, or why it could not be obtained (its
    items then fail with that line)."""
    try:
        return Upstream(SourceTree(wheel_mod.obtain(pin=pin), pin.package))
    except WheelError as exc:
        return str(exc)


@pytest.fixture(scope="session")
def upstream(pinned_wheel: Path | WheelError) -> Upstream:
    if isinstance(pinned_wheel, WheelError):
        pytest.fail(str(pinned_wheel), pytrace=False)
    return Upstream(SourceTree(pinned_wheel), base=_released(wheel_mod.VLLM),
                    cache_dit=_released(wheel_mod.CACHE_DIT))
