"""The current platform (upstream: resolved lazily per device kind); the extension only calls
``synchronize`` to drain queued device work before a request stops, as upstream's cancellation
does. Here it counts the calls, for the tests."""

from __future__ import annotations


class _Platform:
    synchronized = 0

    @classmethod
    def synchronize(cls) -> None:
        cls.synchronized += 1


current_omni_platform = _Platform()
