"""The Cache-DiT backend (vllm_omni/diffusion/cache/cachedit/backend.py), shaped as upstream's.

``enable`` caches each DiT module the pipeline declares (``_dit_modules``) and sets the tuple of
targets on the pipeline as ``_cache_dit_targets``, which the worker extension reads; ``disable``
removes it. Caching itself is the toy DiT's (``cache_on``).
"""

from __future__ import annotations

from typing import Any


class CacheDiTBackend:
    def __init__(self, cache_config: Any = None) -> None:
        self.config = cache_config
        self.enabled = False
        self._cache_targets: list[Any] = []

    def is_enabled(self) -> bool:
        return self.enabled

    def enable(self, pipeline: Any) -> None:
        self._cache_targets = [getattr(pipeline, name) for name in pipeline._dit_modules
                               if getattr(pipeline, name, None) is not None]
        for target in self._cache_targets:
            target.cache_on = True
        pipeline._cache_dit_targets = tuple(self._cache_targets)
        self.enabled = True

    def disable(self, pipeline: Any) -> None:
        if not self.enabled:
            return
        try:
            for target in self._cache_targets:
                target.cache_on = False
        finally:
            self._cache_targets = []
            if hasattr(pipeline, "_cache_dit_targets"):
                del pipeline._cache_dit_targets
            self.enabled = False

    def refresh(self, pipeline: Any, num_inference_steps: int, verbose: bool = True) -> None:
        for target in self._cache_targets:
            target.reset_request()
