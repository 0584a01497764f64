"""In-process runs of the torch reference pipeline for the numerical tests (no server needed)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.reference.generator import GenerationSpec
from engine.reference.profile import EngineArgs
from engine.reference.torch_generator import TorchGenerator
from ref2va_contract.diagnostics import (
    ACCEPTANCE_FIELD,
    ALL_POINTS,
    DUMP_DIR_KEY,
    DUMP_SUFFIX,
    POINTS_KEY,
)
from ref2va_contract.launch import DIAGNOSTICS_ROOT_ENV

STEPS = 6
SPEC = GenerationSpec(
    prompt="a red fox in snow",
    negative_prompt="",
    width=32,
    height=32,
    num_frames=22,
    fps=24.0,
    num_inference_steps=STEPS,
    guidance_scale=None,
    flow_shift=12.0,
    seed=42,
    generate_sound=True,
    extra_params={"audio_flow_shift": 3.0},
)


class Monitor:
    def step_done(self, step: int, total: int) -> None:
        pass

    def idle(self, seconds: float) -> None:
        time.sleep(seconds)


@dataclass
class Run:
    folder: Path
    frames: list[np.ndarray]
    audio: np.ndarray | None

    @property
    def enabled_path(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((self.folder / "enabled_path.json").read_text())
        return loaded

    def point(self, name: str) -> bytes:
        return (self.folder / f"{name}{DUMP_SUFFIX}").read_bytes()

    def points(self) -> list[str]:
        return sorted(path.stem for path in self.folder.glob(f"*{DUMP_SUFFIX}"))


def generator(monkeypatch: pytest.MonkeyPatch, root: Path, **args: object) -> TorchGenerator:
    monkeypatch.setenv(DIAGNOSTICS_ROOT_ENV, str(root))
    return TorchGenerator(EngineArgs.model_validate(args))


def run(engine: TorchGenerator, folder: Path, spec: GenerationSpec = SPEC, **changes: Any) -> Run:
    block = {DUMP_DIR_KEY: str(folder), POINTS_KEY: ALL_POINTS}
    extra = {**spec.extra_params, ACCEPTANCE_FIELD: block}
    request = replace(spec, extra_params=extra, **changes)
    engine.validate(request)
    media = engine.generate(request, Monitor())
    frames = list(media.frames)
    return Run(folder, frames, media.audio)


def first_difference(left: Run, right: Run) -> str | None:
    """The first comparison point, in pipeline order, whose bytes differ."""
    order = ["cond.text", "cond.image", "cond.audio"]
    order += [f"dit.step{step:03d}" for step in range(STEPS)]
    order += ["latent.video", "latent.audio", "decoded.video", "decoded.audio"]
    for name in order:
        if left.point(name) != right.point(name):
            return name
    return None
