"""Request-owned diagnostics: comparison-point tensors as safetensors and ``enabled_path.json``.

A request opts in with ``extra_params.acceptance``: ``{"dump_dir": ABS_PATH, "points": [...]}``
(or ``"points": "all"``). The folder must lie under a root allowed at launch
(``REF2VA_DIAGNOSTICS_ROOT``, roots separated by ``os.pathsep``). A request without the block
gets a :class:`NoDumps`, whose ``wants`` is always false, so the pipeline never copies a tensor it
would not write.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from engine.reference.errors import bad_request
from ref2va_contract.diagnostics import (
    ACCEPTANCE_FIELD,
    ACCEPTANCE_KEYS,
    ALL_POINTS,
    DUMP_DIR_KEY,
    DUMP_SUFFIX,
    ENABLED_PATH_FILE,
    POINTS_KEY,
    POINTS_WRITTEN_KEY,
)
from ref2va_contract.launch import DIAGNOSTICS_ROOT_ENV

logger = logging.getLogger(__name__)

FIXED_POINTS = (
    "cond.text",
    "cond.image",
    "cond.audio",
    "latent.video",
    "latent.audio",
    "decoded.video",
    "decoded.audio",
)
STEP_POINT = re.compile(r"^dit\.step(\d{3})$")


def step_point(step: int) -> str:
    return f"dit.step{step:03d}"


def allowed_roots() -> tuple[Path, ...]:
    """Roots named at launch; read once, when the generator is built."""
    raw = os.environ.get(DIAGNOSTICS_ROOT_ENV, "")
    return tuple(Path(part).resolve() for part in raw.split(os.pathsep) if part.strip())


def _valid_names(steps: int) -> str:
    return (
        f"{', '.join(FIXED_POINTS)}, dit.stepNNN for NNN in 000..{steps - 1:03d} "
        f'(zero-padded), or "{ALL_POINTS}"'
    )


class NoDumps:
    """The diagnostics of a request that asked for none: wants nothing, writes nothing."""

    enabled = False

    def wants(self, point: str) -> bool:
        return False

    def put(self, point: str, tensor: torch.Tensor) -> None:
        raise AssertionError(f"{point} written without a dump request")

    def finish(self, enabled_path: Mapping[str, Any]) -> None:
        return None


class Dumps:
    """Writes each wanted point as ``<dump_dir>/<point>.safetensors`` when it is produced."""

    enabled = True

    def __init__(self, folder: Path, points: frozenset[str]) -> None:
        self.folder = folder
        self.points = points
        self.written: list[str] = []
        # Seconds spent writing, inside the request as on the host (where the worker extension
        # reports the same key: dump writes count against the server's time bound).
        self.seconds = 0.0

    def wants(self, point: str) -> bool:
        return point in self.points

    def put(self, point: str, tensor: torch.Tensor) -> None:
        # one tensor per file, named after the point; contiguous CPU copy for safetensors
        started = time.perf_counter()
        save_file(
            {point: tensor.detach().to("cpu").contiguous()}, self.folder / f"{point}{DUMP_SUFFIX}"
        )
        self.seconds += time.perf_counter() - started
        self.written.append(point)

    def finish(self, enabled_path: Mapping[str, Any]) -> None:
        # One process serves every request here: it is the output owner, rank 0.
        body = {**enabled_path, POINTS_WRITTEN_KEY: list(self.written),
                "dump_seconds": round(self.seconds, 3), "rank": 0}
        (self.folder / ENABLED_PATH_FILE).write_text(
            json.dumps(body, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        logger.info(
            "diagnostics: %d points and %s in %s", len(self.written), ENABLED_PATH_FILE, self.folder
        )


def parse_request(
    extra_params: Mapping[str, Any], steps: int, roots: tuple[Path, ...]
) -> tuple[Path, frozenset[str]] | None:
    """Validate a request's acceptance block; None when it has none. Raises a 400 otherwise."""
    where = f"extra_params.{ACCEPTANCE_FIELD}"
    block = extra_params.get(ACCEPTANCE_FIELD)
    if block is None:
        return None
    if not isinstance(block, dict) or set(block) - ACCEPTANCE_KEYS:
        raise bad_request(
            f"{where} must be an object with keys '{DUMP_DIR_KEY}' and '{POINTS_KEY}'."
        )
    if not roots:
        raise bad_request(
            f"Diagnostics are disabled on this server: {DIAGNOSTICS_ROOT_ENV} was not set at "
            f"launch, so {where} cannot be honoured."
        )
    raw_dir = block.get(DUMP_DIR_KEY)
    if not isinstance(raw_dir, str) or not os.path.isabs(raw_dir):
        raise bad_request(
            f"{where}.{DUMP_DIR_KEY} must be an absolute path, got {raw_dir!r}."
        )
    if ".." in Path(raw_dir).parts:
        raise bad_request(f"{where}.{DUMP_DIR_KEY} must not contain '..': {raw_dir}.")
    folder = Path(raw_dir).resolve()
    if not any(folder == root or folder.is_relative_to(root) for root in roots):
        raise bad_request(
            f"{where}.{DUMP_DIR_KEY} {raw_dir} is outside the diagnostics roots "
            f"allowed at launch ({DIAGNOSTICS_ROOT_ENV})."
        )
    points = block.get(POINTS_KEY)
    all_points = frozenset(FIXED_POINTS) | {step_point(step) for step in range(steps)}
    if points == ALL_POINTS:
        chosen = all_points
    elif isinstance(points, list) and points and all(isinstance(p, str) for p in points):
        unknown = [p for p in points if p not in all_points]
        if unknown:
            raise bad_request(
                f"{where}.{POINTS_KEY}: unknown comparison point(s) {unknown}; "
                f"valid names: {_valid_names(steps)}."
            )
        chosen = frozenset(points)
    else:
        raise bad_request(
            f'{where}.{POINTS_KEY} must be "{ALL_POINTS}" or a non-empty list of names; '
            f"valid names: {_valid_names(steps)}."
        )
    return folder, chosen


def open_dumps(target: tuple[Path, frozenset[str]] | None) -> Dumps | NoDumps:
    if target is None:
        return NoDumps()
    folder, points = target
    folder.mkdir(parents=True, exist_ok=True)
    return Dumps(folder, points)
