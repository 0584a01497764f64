"""The dump writer: one ``<point>.safetensors`` per wanted comparison point, on the output owner.

``safetensors`` is imported inside :meth:`DumpWriter.put` and torch only for type checking: this
module imports on a machine that has neither.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.vllm_omni.request_block import DumpRequest
from ref2va_contract.diagnostics import DUMP_SUFFIX

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


@dataclass
class DumpWriter:
    """Writes the wanted points of one request on the output-owner rank, and what went wrong.

    A failure to write is recorded, not raised, while the pipeline runs (a raise on rank 0 alone
    would leave the other ranks waiting in a collective); :meth:`raise_failures` raises it once
    every rank has finished.
    """

    target: DumpRequest
    written: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    bytes: int = 0

    def wants(self, point: str) -> bool:
        return self.target.wants(point)

    def put(self, point: str, tensor: torch.Tensor | None, *, absent: str = "") -> None:
        if not self.wants(point):
            return
        if tensor is None:
            self.missing[point] = absent or "the pipeline produced no tensor for it"
            return
        if point in self.written:
            self.failures.append(f"{point} produced twice in one request (more than one output "
                                 "or continuation window); diagnostics support one output")
            return
        from safetensors.torch import save_file  # noqa: PLC0415 - lazy: see module doc

        started = time.perf_counter()
        path = self.target.folder / f"{point}{DUMP_SUFFIX}"
        partial = path.with_name(path.name + ".partial")
        try:
            # As it is: same dtype and values, detached, on the CPU, contiguous for safetensors.
            value = tensor.detach().to("cpu").contiguous()
            save_file({point: value}, str(partial))
            os.replace(partial, path)  # a half-written file never carries the point's name
        except Exception as exc:  # any failure is held and reported, see above
            partial.unlink(missing_ok=True)
            self.failures.append(f"{point}: could not write {path}: {type(exc).__name__}: {exc}")
            return
        spent = time.perf_counter() - started
        size = value.numel() * value.element_size()
        self.seconds += spent
        self.bytes += size
        self.written.append(point)
        self.missing.pop(point, None)
        logger.info("diagnostics: %s %s %s, %.1f MiB in %.3f s", point, str(value.dtype),
                    list(value.shape), size / 2**20, spent)

    def note_unwritten(self) -> None:
        """Name every requested point that never came (e.g. a step the loop did not run)."""
        if self.target.points is None:
            return
        for point in sorted(self.target.points - set(self.written)):
            self.missing.setdefault(point, "not produced by this request")

    def raise_failures(self) -> None:
        if self.failures:
            raise RuntimeError("diagnostics: " + "; ".join(self.failures))


@dataclass
class RunRecord:
    """What the worker saw while one watched request ran (for ``enabled_path.json``)."""

    dit_calls: int = 0
    step_source: str = "forward_context"
    cache_dit: dict[str, Any] = field(default_factory=dict)
    decode_path: str | None = None
