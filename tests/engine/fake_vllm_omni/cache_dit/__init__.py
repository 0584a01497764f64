"""Fake Cache-DiT: summary() reads the cached steps a (toy) cached module recorded."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class CacheStats:
    cached_steps: list[int] = dataclasses.field(default_factory=list)
    accumulated_cached_steps: int = 0


def summary(adapter_or_others: Any, details: bool = False, logging: bool = True,
            **kwargs: Any) -> list[CacheStats]:
    steps = getattr(adapter_or_others, "_cached_steps", None)
    if steps is None:
        return [CacheStats()]
    return [CacheStats(list(steps), len(steps))]
