"""The generator seam, and the real tiny torch pipeline behind it.

Everything the HTTP side knows about generation is :class:`VideoGenerator`: a request's
:class:`GenerationSpec` in, :class:`GeneratedMedia` out, with a :class:`StepMonitor` called after
every denoising step (progress, and the point where cancellation takes effect). A generator may
also offer ``validate(spec)``, called while the request is parsed, so that what it cannot honour
(diagnostics outside the allowed root, a cache hint without a cache) is a 400, not a failed job.
The pipeline itself lives in :mod:`engine.reference.pipeline`; :mod:`.torch_generator` wires it
and builds it (``build_generator``). This module imports no torch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from engine.reference.references import AUDIO_SAMPLE_RATE, ReferenceAudio, ReferenceImage


def snap_frame_count(frames: int) -> int:
    """Snap a frame count UP to H3's 17n+5 boundary (124 and 362 are already on it)."""
    if frames <= 0:
        return 1
    return frames + (5 - frames) % 17


def video_latent_frames(frames: int) -> int:
    """H3's latent length for a snapped frame count: 124 -> 37, 362 -> 107."""
    if frames <= 5:
        return 2
    return ((frames - 5) // 17) * 5 + 2


def audio_sample_count(num_frames: int, fps: float) -> int:
    """Samples of audio that exactly cover ``num_frames`` at ``fps``, rounded to whole samples."""
    return round(num_frames * AUDIO_SAMPLE_RATE / fps)


@dataclass(frozen=True)
class GenerationSpec:
    """What one request asks the generator for, already validated and resolved."""

    prompt: str
    negative_prompt: str
    width: int
    height: int
    num_frames: int  # snapped to 17n+5
    fps: float
    num_inference_steps: int
    # None when the request gave none: guidance (two passes per step) only runs when asked for.
    guidance_scale: float | None
    flow_shift: float
    seed: int
    generate_sound: bool
    quality: str | None = None
    extra_params: Mapping[str, Any] = field(default_factory=dict)
    images: tuple[ReferenceImage, ...] = ()
    audios: tuple[ReferenceAudio, ...] = ()
    # Fault injection only (faults.py, `nondeterministic`): after this 1-based denoising step the
    # latents get noise from an unseeded generator, the way a nondeterministic kernel would differ.
    unseeded_noise_step: int | None = None
    # Fault injection only (faults.py, `capture_hooks_off`): a localization capture hooks its
    # modules, but its hooks never see a call of their stage (it reports zero calls).
    capture_hooks_off: bool = False


@dataclass
class GeneratedMedia:
    """A finished generation. ``frames`` is lazy so long videos are never all held at once."""

    width: int
    height: int
    fps: float
    num_frames: int
    frames: Iterator[np.ndarray]  # each (height, width, 3) uint8, exactly num_frames of them
    audio: np.ndarray | None  # (2, samples) float32 in [-1, 1], or None for a silent video
    sample_rate: int = AUDIO_SAMPLE_RATE
    # Seconds per pipeline stage; filled as stages finish (video decoding ends with ``frames``).
    stage_durations: dict[str, float] = field(default_factory=dict)


class StepMonitor(Protocol):
    """The generation's link back to the server: progress, cancellation, declared device time."""

    def step_done(self, step: int, total: int) -> None:
        """Report a finished denoising step; raises when the generation must stop."""
        ...

    def idle(self, seconds: float) -> None:
        """Spend declared device time; returns early when the generation is cancelled."""
        ...


class VideoGenerator(Protocol):
    """The seam: the one thing the server needs from a model."""

    def generate(self, spec: GenerationSpec, monitor: StepMonitor) -> GeneratedMedia: ...
