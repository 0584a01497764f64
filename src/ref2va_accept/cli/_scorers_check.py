"""`ref2va-accept scorers check`: can every model-based VBench dimension be scored here?

For each dimension, each weights file it needs: where it is looked for, found or missing, its
sha256 against the campaign's pin, then the network built from it by its library (:mod:`loaders`)
and one forward pass on a seeded synthetic frame through VBench's own input transform, on the CPU
or on an NPU through torch_npu. A dimension is ready only when all of that holds for each of its
files; the command exits 1 when any is not, naming what is missing or what failed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ConfigDict, Field

from ref2va_accept.evidence import Record
from ref2va_accept.quality import VBENCH_LAYOUT, WEIGHT_NAMES, ScorerError

if TYPE_CHECKING:
    from ref2va_accept.quality import LoadedModel

__all__ = ["FileCheck", "check_weights", "dimension_rows", "resolve_device"]


class FileCheck(Record):
    """One weights file checked (`scorers check --json` writes it under `weights`); `of` builds
    it once the check is done, its file name, pin match and readiness computed then."""

    model_config = ConfigDict(frozen=True)

    name: str
    file: str | None  # its file name (None: the campaign names no file for it)
    found: bool
    sha256: str | None
    pin: str | None
    pin_matches: bool | None  # None: no pin, or no sha256 to hold it to
    stand_in: bool  # declared so by the campaign, or recognised by its bytes
    stand_in_declared: bool  # the campaign marks it `stand_in: true`
    network: str | None  # the library that built it
    forward: str | None  # the output's shape and the seconds it took
    ready: bool  # no problem, and one forward pass made
    problem: str | None
    path: Path | None = Field(exclude=True)  # where it is looked for (this host's path)

    @classmethod
    def of(cls, name: str, path: Path | None, *, found: bool = False, sha256: str | None = None,
           pin: str | None = None, stand_in: bool = False, declared: bool = False,
           network: str | None = None, forward: str | None = None,
           problem: str | None = None) -> FileCheck:
        return cls(name=name, file=None if path is None else path.name, found=found,
                   sha256=sha256, pin=pin, pin_matches=None if pin is None or sha256 is None
                   else pin.lower() == sha256, stand_in=stand_in, stand_in_declared=declared,
                   network=network, forward=forward,
                   ready=problem is None and forward is not None, problem=problem, path=path)


def resolve_device(device: str) -> str:
    """'cpu', or 'npu' (torch_npu must import and see a device); 'auto' picks npu when it can;
    npu:N or cuda:N as a campaign's scoring.device names it (prepare_device)."""
    if device == "cpu":
        return "cpu"
    if ":" in device:
        from ref2va_accept.quality import prepare_device  # noqa: PLC0415

        prepare_device(device)
        return device
    try:
        import torch  # noqa: PLC0415
        import torch_npu  # noqa: F401, PLC0415
    except ImportError:
        if device == "auto":
            return "cpu"
        raise ScorerError("--device npu: torch_npu does not import here") from None
    if not torch.npu.is_available():  # type: ignore[attr-defined]
        if device == "auto":
            return "cpu"
        raise ScorerError("--device npu: torch_npu sees no NPU")
    return "npu"


def _sample_frame() -> Any:
    # 256x448: VBench's transforms resize, crop and pad it as they would a 768x1344 frame.
    return np.random.default_rng(0).integers(0, 256, (256, 448, 3), dtype=np.uint8)


def _forward(model: LoadedModel) -> str:
    # The scorers' models load OpenCV: only when a weights file is checked, not with the CLI.
    from ref2va_accept.quality import (  # noqa: PLC0415
        amt_input,
        clip_input,
        dino_input,
        dreamsim_input,
        musiq_input,
        raft_input,
    )

    frame = _sample_frame()
    started = time.perf_counter()
    name = model.name
    if name == "dino_vitb16":
        out = model(dino_input(frame))
    elif name in ("clip_vitb32", "clip_vitl14"):
        out = model(clip_input(frame))
    elif name == "laion_aesthetic":
        import torch  # noqa: PLC0415

        feature = np.random.default_rng(1).standard_normal((1, 768)).astype(np.float32)
        out = model(torch.from_numpy(feature / np.linalg.norm(feature)))
    elif name == "musiq_spaq":
        out = model(musiq_input(frame))
    elif name == "dreamsim":
        out = model(dreamsim_input(frame))
    elif name == "raft":
        (a, _), (b, _) = raft_input(frame), raft_input(frame[:, ::-1].copy())
        out = model(a, b)
    else:
        (a, _), (b, _) = amt_input(frame), amt_input(frame[::-1].copy())
        out = model(a, b)
    if not np.all(np.isfinite(out)):
        raise ScorerError(f"{name}: its forward pass gave non-finite values")
    shape = "x".join(str(d) for d in out.shape)
    return f"{shape} in {time.perf_counter() - started:.2f} s"


def check_weights(paths: Mapping[str, Path], pins: Mapping[str, str],
                  stand_ins: frozenset[str] = frozenset(), *, device: str = "cpu",
                  names: tuple[str, ...] = WEIGHT_NAMES) -> dict[str, FileCheck]:
    """One :class:`FileCheck` per weights name: found, hashed, pinned, built, run once."""
    return {name: _check(name, paths.get(name), pins.get(name), name in stand_ins, device)
            for name in names}


def _check(name: str, path: Path | None, pin: str | None, declared: bool, device: str
           ) -> FileCheck:
    """One weights file: found, hashed, pinned, built, run once (the first problem ends it)."""
    from ref2va_accept.quality import load_model  # noqa: PLC0415

    if path is None:
        return FileCheck.of(name, path, pin=pin, stand_in=declared, declared=declared,
                            problem="no file named (scorer_weights)")
    if not path.exists():
        return FileCheck.of(name, path, pin=pin, stand_in=declared, declared=declared,
                            problem=f"missing: {path}")
    sha256: str | None = None
    network: str | None = None
    forward: str | None = None
    problem: str | None = None
    stand_in = declared
    try:
        model = load_model(name, path, stand_in=declared, device=device)
        sha256, network = model.identity.sha256, model.library
        stand_in = bool(model.identity.stand_in)
        if pin is not None and pin.lower() != sha256:
            problem = f"sha256 {sha256[:12]}... differs from the pin {pin[:12]}..."
        elif pin is not None and stand_in and not declared:
            # A campaign pins a stand-in's bytes as if they were VBench's weights.
            problem = (f"{path.name} is a seeded stand-in (its sha256 {sha256[:12]}... is a "
                       "stand-in's), not VBench's weights, and the campaign does not mark it "
                       "stand_in: true: no lossy verdict scored with it would be better than "
                       "inconclusive; pin the real file, or mark it")
        else:
            forward = _forward(model)
    except ScorerError as exc:
        problem = str(exc)
    except Exception as exc:
        problem = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    return FileCheck.of(name, path, found=True, sha256=sha256, pin=pin, stand_in=stand_in,
                        declared=declared, network=network, forward=forward, problem=problem)


def dimension_rows(checks: Mapping[str, FileCheck]) -> list[tuple[str, bool, list[FileCheck]]]:
    """(dimension, ready, the checks of its files) for every model-based dimension."""
    from ref2va_accept.quality import MODEL_DIMENSIONS  # noqa: PLC0415

    rows = []
    for dimension, (names, _) in MODEL_DIMENSIONS.items():
        files = [checks[n] for n in names if n in checks]
        rows.append((dimension, len(files) == len(names) and all(f.ready for f in files), files))
    return rows


def default_paths(folder: Path) -> dict[str, Path]:
    """Every weights file where VBench's cache keeps it under ``folder``."""
    return {name: folder / rel for name, rel in VBENCH_LAYOUT.items()}
