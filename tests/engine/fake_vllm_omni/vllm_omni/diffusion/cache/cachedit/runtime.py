"""The request-scoped Cache-DiT runtime (vllm_omni/diffusion/cache/cachedit/runtime.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm_omni.diffusion.cache.cachedit.backend import CacheDiTBackend


@dataclass(frozen=True)
class CacheDiTRequestSpec:
    installation_key: str
    cache_config: Any
    num_inference_steps: int


class RequestScopedCacheDiTRuntime:
    """Installs Cache-DiT for a request that wants it, removes it for one that does not."""

    def __init__(self, pipeline: Any) -> None:
        self._pipeline = pipeline
        self._backend: CacheDiTBackend | None = None
        self._installation_key: str | None = None

    @property
    def is_enabled(self) -> bool:
        return self._backend is not None and self._backend.is_enabled()

    def prepare(self, spec: CacheDiTRequestSpec | None) -> None:
        desired_key = None if spec is None else spec.installation_key
        if self._installation_key != desired_key:
            self.disable()
        if spec is None:
            return
        if self._backend is None:
            backend = CacheDiTBackend(spec.cache_config)
            backend.enable(self._pipeline)
            self._backend, self._installation_key = backend, spec.installation_key
        self._backend.refresh(self._pipeline, num_inference_steps=spec.num_inference_steps)

    def disable(self) -> None:
        try:
            if self._backend is not None:
                self._backend.disable(self._pipeline)
        finally:
            self._backend = None
            self._installation_key = None
