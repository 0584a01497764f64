"""Module outputs captured for the judge's localization pass, in either engine.

A request whose ``extra_params.acceptance`` block carries ``capture`` (names in
:mod:`ref2va_contract.diagnostics`) asks the engine to hook the modules of one stage (the DiT at
one denoising step, or from ``first_step`` to it, or the conditioning encoders) for that request
alone. Every call of a hooked module while the capture is live becomes one JSON line of
``capture.jsonl``, written as the call completes (so the file lists calls in completion order: a
submodule before the module around it): the step, the module's path in the model, its call index
at that step, and each input and output tensor's shape, dtype and sha256 of its bytes. Equal
digests are equal bytes, so the judge can tell where two runs part without any tensor on disk.
With ``tensors`` the tensors themselves are written too, one safetensors file each under
``capture/``, one at a time (nothing is held whole beyond the tensor being written).

The reference engine and the vLLM-Omni worker extension both use this module; each says which
modules make a stage (``roots``: each a path and the module there), when the stage is running
(``in_stage``) and which denoising step is (``current_step``). A stage's blocks are its roots'
children, a module list opened into its items; a module's path is its root's path and the
attribute names down to it, each module hooked once under the first path that reaches it; a
``within`` path is resolved by attribute names the way the model's code reaches it, so every name
a capture reports is accepted back as ``within``. The hooks never change an output, never raise
into the model (a failure is recorded and reported in ``enabled_path.json``) and are removed by
:meth:`ModuleCapture.remove`, which the callers run in a ``finally``. torch and safetensors are
imported inside functions: this module imports anywhere.

With ``stop`` the engine stops the request once the capture is whole, the way a cancelled request
stops at a step boundary: the DiT after its last captured step (on every rank, at the same step,
since every rank reads it from the request), the encoders before the denoise begins. It writes
the points asked for (each must be made by then: :func:`refuse_points_after_stop`) and
``enabled_path.json``, whose capture report says where it stopped (``stopped``), and answers the
contract's ``CAPTURE_STOPPED_STATUS`` with :meth:`CaptureRequest.stop_message`; the judge takes
nothing else for a request stopped on purpose.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ref2va_contract.diagnostics import (
    ACCEPTANCE_FIELD,
    CAPTURE_DIR,
    CAPTURE_DIT,
    CAPTURE_FIRST_STEP_KEY,
    CAPTURE_KEY,
    CAPTURE_KEYS,
    CAPTURE_LOG_FILE,
    CAPTURE_STAGE_KEY,
    CAPTURE_STAGES,
    CAPTURE_STEP_KEY,
    CAPTURE_STOP_KEY,
    CAPTURE_STOPPED_KEY,
    CAPTURE_STOPPED_MARKER,
    CAPTURE_TENSORS_KEY,
    CAPTURE_WITHIN_KEY,
    ENABLED_PATH_FILE,
)

if TYPE_CHECKING:
    import torch
    from torch import nn

# torch dtype name -> safetensors dtype code (the judge's tensors package reads these codes).
_DTYPE_CODES = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "int64": "I64", "int32": "I32",
    "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL",
}
# Module classes that hold modules but have no forward of their own: their items are the blocks.
_CONTAINERS = ("ModuleList", "ModuleDict")
# A DiT step's point: dit.stepNNN (the reference engine) or dit.stepNNN.video|audio (vLLM-Omni).
_STEP_POINT = re.compile(r"^dit\.step(\d{3})(\.(video|audio))?$")


class CaptureRefused(ValueError):
    """The capture block cannot be honoured; the request fails before anything runs."""


@dataclass(frozen=True)
class CaptureRequest:
    stage: str  # CAPTURE_STAGES
    step: int | None  # the (last) denoising step (dit); None for the encoders
    within: str | None  # None: block level; else this module and everything inside it
    tensors: bool  # also write every captured tensor
    first_step: int | None = None  # the dit capture is live from this step to `step`
    stop: bool = False  # stop the request once the capture is whole (see stopped_where)

    def covers(self, step: int | None) -> bool:
        """Whether a call at this denoising step is captured (the encoders: outside the loop)."""
        if self.stage != CAPTURE_DIT:
            return True
        if step is None or self.step is None:
            return False
        first = self.step if self.first_step is None else self.first_step
        return first <= step <= self.step

    def stopped_where(self) -> dict[str, Any]:
        """Where a stopped request stopped, for the capture report (CAPTURE_STOPPED_KEY): after
        the DiT's last captured step, or before the denoise (the encoders)."""
        return {CAPTURE_STAGE_KEY: self.stage,
                CAPTURE_STEP_KEY: self.step if self.stage == CAPTURE_DIT else None}

    def stop_message(self) -> str:
        """The stopped request's error message, the marker first."""
        where = (f"the DiT at step {self.step}" if self.stage == CAPTURE_DIT
                 else "the conditioning encoders")
        return (f"{CAPTURE_STOPPED_MARKER}: the capture of {where}, its points and "
                f"{ENABLED_PATH_FILE} are written; the engine stopped the request there, as "
                f"extra_params.{ACCEPTANCE_FIELD}.{CAPTURE_KEY}.{CAPTURE_STOP_KEY} asked")


def _point_step(point: str) -> int | None:
    """The step of a ``dit.stepNNN`` point (either engine's naming), else None."""
    match = _STEP_POINT.match(point)
    return int(match.group(1)) if match else None


def points_after_stop(request: CaptureRequest, points: Iterable[str] | None) -> list[str]:
    """The asked points a request that stops once its capture is whole cannot write (``None``:
    every point, which it cannot); empty for a request that does not stop."""
    if not request.stop:
        return []
    if points is None:
        return ["all"]
    after = []
    for point in points:
        step = _point_step(point)
        made = point.startswith("cond.") or (
            request.stage == CAPTURE_DIT and step is not None and request.step is not None
            and step <= request.step)
        if not made:
            after.append(point)
    return after


def refuse_points_after_stop(request: CaptureRequest | None,
                             points: Iterable[str] | None) -> None:
    """:class:`CaptureRefused` naming the points a stopping request asks for and cannot write."""
    if request is None:
        return
    after = points_after_stop(request, points)
    if after:
        raise CaptureRefused(
            f"extra_params.{ACCEPTANCE_FIELD}.{CAPTURE_KEY}.{CAPTURE_STOP_KEY}: the request stops "
            f"once its capture is whole, so it cannot write {', '.join(sorted(after))} (only "
            "cond.* and dit.stepNNN up to the capture's step)")


def parse_capture(block: Mapping[str, Any], steps: int | None) -> CaptureRequest | None:
    """The request's capture, or None; :class:`CaptureRefused` names what is wrong."""
    raw = block.get(CAPTURE_KEY)
    if raw is None:
        return None
    where = f"extra_params.{ACCEPTANCE_FIELD}.{CAPTURE_KEY}"
    if not isinstance(raw, Mapping) or set(raw) - CAPTURE_KEYS:
        raise CaptureRefused(f"{where} must be an object with keys {sorted(CAPTURE_KEYS)}, "
                             f"got {raw!r}")
    stage = raw.get(CAPTURE_STAGE_KEY)
    if stage not in CAPTURE_STAGES:
        raise CaptureRefused(f"{where}.{CAPTURE_STAGE_KEY} must be one of {list(CAPTURE_STAGES)}, "
                             f"got {stage!r}")
    step = raw.get(CAPTURE_STEP_KEY)
    if stage == CAPTURE_DIT:
        if isinstance(step, bool) or not isinstance(step, int) or step < 0 or (
                steps is not None and step >= steps):
            last = f"0..{steps - 1}" if steps else "a step index"
            raise CaptureRefused(f"{where}.{CAPTURE_STEP_KEY} must be an integer in {last} "
                                 f"for stage {CAPTURE_DIT!r}, got {step!r}")
    elif step is not None:
        raise CaptureRefused(f"{where}.{CAPTURE_STEP_KEY} must be null for stage {stage!r} "
                             f"(the encoders run once per request), got {step!r}")
    first = raw.get(CAPTURE_FIRST_STEP_KEY)
    if first is not None and (stage != CAPTURE_DIT or isinstance(first, bool)
                              or not isinstance(first, int) or not 0 <= first <= (step or 0)):
        raise CaptureRefused(f"{where}.{CAPTURE_FIRST_STEP_KEY} must be an integer in 0..{step} "
                             f"for stage {CAPTURE_DIT!r} (at most {CAPTURE_STEP_KEY}), or absent; "
                             f"got {first!r}")
    within = raw.get(CAPTURE_WITHIN_KEY)
    if within is not None and (not isinstance(within, str) or not within.strip()):
        raise CaptureRefused(f"{where}.{CAPTURE_WITHIN_KEY} must be a module path or null, "
                             f"got {within!r}")
    tensors = raw.get(CAPTURE_TENSORS_KEY, False)
    if not isinstance(tensors, bool):
        raise CaptureRefused(f"{where}.{CAPTURE_TENSORS_KEY} must be true or false, "
                             f"got {tensors!r}")
    stop = raw.get(CAPTURE_STOP_KEY, False)
    if not isinstance(stop, bool):
        raise CaptureRefused(f"{where}.{CAPTURE_STOP_KEY} must be true or false, got {stop!r}")
    return CaptureRequest(str(stage), step, within, tensors, first, stop)


def _is_container(module: Any) -> bool:
    return type(module).__name__ in _CONTAINERS


def _unique(found: Iterator[tuple[str, nn.Module]]) -> list[tuple[str, nn.Module]]:
    """Each module once, under the first path that reaches it (a model may register one module
    under two attributes, as H3's VAEs do with ``remote.model`` and ``model``: hooked twice, its
    calls would be logged twice)."""
    seen: set[int] = set()
    out: list[tuple[str, nn.Module]] = []
    for path, module in found:
        if id(module) not in seen:
            seen.add(id(module))
            out.append((path, module))
    return out


def _children(root_name: str, root: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    for name, child in root.named_children():
        if _is_container(child):
            yield from ((f"{root_name}.{name}.{item}", module)
                        for item, module in child.named_children())
        else:
            yield f"{root_name}.{name}", child


def block_level(roots: Sequence[tuple[str, nn.Module]]) -> list[tuple[str, nn.Module]]:
    """Each root's children, a list container replaced by its items (``blocks.0``, ...), each
    module once (see :func:`_unique`)."""
    return _unique(path_module for root_name, root in roots
                   for path_module in _children(root_name, root))


def _resolve(roots: Sequence[tuple[str, nn.Module]], path: str) -> nn.Module | None:
    """The module at ``path``: a root's name, then attribute names (list items by index), as the
    model's code reaches it. An alias (one module under two attributes) resolves under either
    name, unlike ``named_modules``, which lists a module under its first path only."""
    for root_name, root in roots:
        if path != root_name and not path.startswith(f"{root_name}."):
            continue
        module: Any = root
        for part in path[len(root_name):].split(".")[1:]:
            module = getattr(module, "_modules", {}).get(part)
            if module is None:
                break
        if module is not None:
            return module  # type: ignore[no-any-return]
    return None


def inside(roots: Sequence[tuple[str, nn.Module]], path: str) -> list[tuple[str, nn.Module]]:
    """The module at ``path`` and every module inside it, named under ``path`` (so a name the
    capture reports is accepted back as ``within``), containers left out, each module once."""
    module = _resolve(roots, path)
    if module is not None:
        return _unique((sub, m) for sub, m in module.named_modules(prefix=path)
                       if not _is_container(m))
    known = ", ".join(name for name, _ in block_level(roots)[:8])
    raise CaptureRefused(f"extra_params.{ACCEPTANCE_FIELD}.{CAPTURE_KEY}.{CAPTURE_WITHIN_KEY}: "
                         f"no module {path!r} in this stage (its blocks include: {known})")


def chosen(request: CaptureRequest, roots: Sequence[tuple[str, nn.Module]]
           ) -> list[tuple[str, nn.Module]]:
    """The modules a capture hooks: inside ``within``, else the stage's blocks (raises
    :class:`CaptureRefused` for a ``within`` no module of the stage has)."""
    return inside(roots, request.within) if request.within else block_level(roots)


def _tensors(value: Any) -> Iterator[Any]:
    """Every tensor in a nest of tuples, lists and dicts (dict values by sorted key)."""
    import torch  # noqa: PLC0415 - lazy: see module doc

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, Mapping):
        for key in sorted(value, key=str):
            yield from _tensors(value[key])


def dtype_code(tensor: torch.Tensor) -> str:
    name = str(tensor.dtype).removeprefix("torch.")
    return _DTYPE_CODES.get(name, name)


def _raw_bytes(cpu: torch.Tensor) -> memoryview:
    import torch  # noqa: PLC0415 - lazy

    flat = cpu.reshape(-1)
    if flat.dtype != torch.uint8:
        flat = flat.view(torch.uint8)
    return memoryview(flat.numpy().data).cast("B")


@dataclass
class ModuleCapture:
    """Hooks on the chosen modules of one request; see the module doc."""

    request: CaptureRequest
    folder: Path  # the request's dump folder (already checked against the launch roots)
    modules: list[tuple[str, nn.Module]]
    in_stage: Callable[[], bool]  # the stage is running (encoding; the denoising loop)
    current_step: Callable[[], int | None]  # the denoising step now running, None outside it
    # Where the hooked modules hang (the stage's roots, or the ``within`` path): the report counts
    # the calls under each, so a root whose modules never ran (zero) shows by name.
    roots: tuple[str, ...] = ()
    calls: dict[tuple[int | None, str], int] = field(default_factory=dict)
    lines: int = 0
    bytes_written: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    # Where the engine stopped the request (CaptureRequest.stopped_where), None: it ran through.
    stopped: dict[str, Any] | None = None
    _handles: list[Any] = field(default_factory=list)
    _log: Any = None

    @classmethod
    def for_stage(cls, request: CaptureRequest, folder: Path,
                  roots: Sequence[tuple[str, nn.Module]], in_stage: Callable[[], bool],
                  current_step: Callable[[], int | None]) -> ModuleCapture:
        """Choose the modules (raises :class:`CaptureRefused` for an unknown ``within``)."""
        names = (request.within,) if request.within else tuple(name for name, _ in roots)
        return cls(request, folder, chosen(request, roots), in_stage, current_step, names)

    def install(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.request.tensors:
            (self.folder / CAPTURE_DIR).mkdir(exist_ok=True)
        self._log = (self.folder / CAPTURE_LOG_FILE).open("w", encoding="utf-8")
        for path, module in self.modules:
            self._handles.append(module.register_forward_hook(self._hook(path), with_kwargs=True))

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self._log is not None:
            self._log.close()
            self._log = None

    def _hook(self, path: str) -> Callable[..., None]:
        def hook(module: Any, args: Any, kwargs: Any, output: Any) -> None:
            if not self.in_stage():
                return
            step = self.current_step() if self.request.stage == CAPTURE_DIT else None
            if not self.request.covers(step):
                return
            try:
                self._record(path, step, (args, kwargs), output)
            except Exception as exc:  # never into the model: reported in enabled_path.json
                if len(self.errors) < 20:
                    self.errors.append(f"{path}: {type(exc).__name__}: {exc}")
        return hook

    def _record(self, path: str, step: int | None, inputs: Any, output: Any) -> None:
        started = time.perf_counter()
        call = self.calls.get((step, path), 0)
        self.calls[(step, path)] = call + 1
        index = self.lines
        self.lines += 1
        line = {
            "index": index, "step": step, "module": path, "call": call,
            "inputs": [self._describe(t, index, f"in{i}") for i, t in enumerate(_tensors(inputs))],
            "outputs": [self._describe(t, index, f"out{i}")
                        for i, t in enumerate(_tensors(output))],
        }
        self._log.write(json.dumps(line, sort_keys=True) + "\n")
        self._log.flush()
        self.seconds += time.perf_counter() - started

    def _describe(self, tensor: torch.Tensor, index: int, role: str) -> dict[str, Any]:
        cpu = tensor.detach().to("cpu").contiguous()
        entry: dict[str, Any] = {
            "shape": list(cpu.shape), "dtype": dtype_code(cpu),
            "sha256": hashlib.sha256(_raw_bytes(cpu)).hexdigest(),
        }
        if self.request.tensors:
            from safetensors.torch import save_file  # noqa: PLC0415 - lazy

            name = f"{CAPTURE_DIR}/{index:05d}.{role}.safetensors"
            save_file({role: cpu}, str(self.folder / name))
            self.bytes_written += cpu.numel() * cpu.element_size()
            entry["file"] = name
        return entry

    def calls_by_root(self) -> dict[str, int]:
        """Calls captured under each root (a root's own calls included)."""
        return {root: sum(count for (_, path), count in self.calls.items()
                          if path == root or path.startswith(f"{root}."))
                for root in self.roots}

    def report(self) -> dict[str, Any]:
        """For ``enabled_path.json``: what was hooked and captured, and any failure.

        ``modules_hooked`` and ``calls`` are the totals; ``calls_by_root`` says which root's
        modules ran (a root with 0 was hooked and never called in the stage)."""
        return {
            CAPTURE_STAGE_KEY: self.request.stage, CAPTURE_STEP_KEY: self.request.step,
            CAPTURE_FIRST_STEP_KEY: self.request.first_step,
            CAPTURE_WITHIN_KEY: self.request.within, CAPTURE_TENSORS_KEY: self.request.tensors,
            "modules_hooked": len(self.modules), "calls": self.lines,
            "calls_by_root": self.calls_by_root(),
            "bytes_written": self.bytes_written, "seconds": round(self.seconds, 3),
            "errors": list(self.errors), CAPTURE_STOPPED_KEY: self.stopped,
        }
