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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ref2va_accept.quality import VBENCH_LAYOUT, WEIGHT_NAMES, ScorerError

if TYPE_CHECKING:
    from ref2va_accept.quality import LoadedModel

__all__ = ["FileCheck", "check_weights", "dimension_rows", "resolve_device"]


@dataclass
class FileCheck:
    name: str
    path: Path | None  # None: the campaign names no file for it
    found: bool = False
    sha256: str | None = None
    pin: str | None = None
    stand_in: bool = False  # declared so by the campaign, or recognised by its bytes
    declared: bool = False  # the campaign marks it `stand_in: true`
    library: str | None = None
    forward: str | None = None  # the output's shape and the seconds it took
    problem: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return self.problem is None and self.forward is not None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "file": None if self.path is None else self.path.name,
                "found": self.found, "sha256": self.sha256, "pin": self.pin,
                "pin_matches": None if self.pin is None or self.sha256 is None
                else self.pin.lower() == self.sha256,
                "stand_in": self.stand_in, "stand_in_declared": self.declared,
                "network": self.library, "forward": self.forward,
                "ready": self.ready, "problem": self.problem}


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
    from ref2va_accept.quality import load_model  # noqa: PLC0415

    checks: dict[str, FileCheck] = {}
    for name in names:
        path = paths.get(name)
        check = checks[name] = FileCheck(name, path, pin=pins.get(name),
                                         stand_in=name in stand_ins, declared=name in stand_ins)
        if path is None:
            check.problem = "no file named (scorer_weights)"
            continue
        check.found = path.exists()
        if not check.found:
            check.problem = f"missing: {path}"
            continue
        try:
            model = load_model(name, path, stand_in=check.stand_in, device=device)
            check.sha256, check.library = model.identity.sha256, model.library
            check.stand_in = bool(model.identity.stand_in)
            if check.pin is not None and check.pin.lower() != check.sha256:
                check.problem = (f"sha256 {check.sha256[:12]}... differs from the pin "
                                 f"{check.pin[:12]}...")
                continue
            if check.pin is not None and check.stand_in and not check.declared:
                # A campaign pins a stand-in's bytes as if they were VBench's weights.
                check.problem = (f"{path.name} is a seeded stand-in (its sha256 "
                                 f"{check.sha256[:12]}... is a stand-in's), not VBench's "
                                 "weights, and the campaign does not mark it stand_in: true: "
                                 "no lossy verdict scored with it would be better than "
                                 "inconclusive; pin the real file, or mark it")
                continue
            check.forward = _forward(model)
        except ScorerError as exc:
            check.problem = str(exc)
        except Exception as exc:
            check.problem = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    return checks


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
