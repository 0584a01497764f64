"""The generator seam and the first generator behind it: a synthetic, input-dependent "diffusion".

Everything the HTTP side knows about generation is :class:`VideoGenerator`: a request's
:class:`GenerationSpec` in, :class:`GeneratedMedia` out, with a :class:`StepMonitor` called after
every denoising step (progress, and the point where cancellation takes effect). A real tiny torch
pipeline replaces :class:`SyntheticGenerator` by implementing the same Protocol and being returned
from :func:`build_generator`; nothing else has to change.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from engine.reference.profile import EngineArgs
from engine.reference.references import AUDIO_SAMPLE_RATE, ReferenceAudio, ReferenceImage

# H3's VAE compresses space by 8; the synthetic latent keeps that ratio so its cost scales alike.
SPATIAL_COMPRESSION = 8
LATENT_CHANNELS = 4
# H3's audio latent runs at 40 Hz (see its time_request module).
AUDIO_LATENT_HZ = 40


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
    guidance_scale: float
    flow_shift: float
    seed: int
    generate_sound: bool
    quality: str | None = None
    extra_params: Mapping[str, Any] = field(default_factory=dict)
    images: tuple[ReferenceImage, ...] = ()
    audios: tuple[ReferenceAudio, ...] = ()


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


def build_generator(args: EngineArgs) -> VideoGenerator:
    """The generator a profile's args describe (today there is one kind)."""
    return SyntheticGenerator(
        seed_salt=args.seed_salt, step_cost_s=args.step_cost_ms / 1000.0, dtype=args.dtype
    )


def _round_to_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    # The latent lives in float32; lower precisions are emulated by rounding, so a profile's
    # dtype visibly changes the output the way it would on a device.
    if dtype == "float16":
        return values.astype(np.float16).astype(np.float32)
    if dtype == "bfloat16":
        bits = values.astype(np.float32).view(np.uint32)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & np.uint32(0xFFFF0000)
        return rounded.view(np.float32)
    return values


def _resize_nearest(image: np.ndarray, height: int, width: int) -> np.ndarray:
    rows = (np.arange(height) * image.shape[0]) // height
    cols = (np.arange(width) * image.shape[1]) // width
    resized: np.ndarray = image[rows][:, cols]
    return resized


class SyntheticGenerator:
    """A deterministic stand-in for H3: a latent "denoised" by a flow-matching Euler loop.

    The latent's seed hashes everything that should change the output (seed, prompts, references,
    shape, flow_shift, guidance, the profile's seed-salt), so two requests agree byte for byte
    exactly when they should. Decoding shows the first reference image, panned over time, under
    a texture upsampled from the latent; the audio is latent-driven tones plus reference audio.
    """

    def __init__(self, *, seed_salt: int = 0, step_cost_s: float = 0.0, dtype: str = "auto"):
        self._seed_salt = seed_salt
        self._step_cost_s = step_cost_s
        self._dtype = dtype

    def _request_key(self, spec: GenerationSpec) -> bytes:
        digest = hashlib.sha256()
        for text in (spec.prompt, spec.negative_prompt, self._dtype):
            digest.update(text.encode("utf-8") + b"\0")
        digest.update(
            struct.pack(
                "<qqqqqddd",
                self._seed_salt,
                spec.seed,
                spec.width,
                spec.height,
                spec.num_frames,
                spec.fps,
                spec.flow_shift,
                spec.guidance_scale,
            )
        )
        for image in spec.images:
            digest.update(b"image" + hashlib.sha256(image.payload).digest())
        for audio in spec.audios:
            digest.update(b"audio" + hashlib.sha256(audio.payload).digest())
        return digest.digest()

    def _sigmas(self, spec: GenerationSpec) -> np.ndarray:
        base = np.linspace(1.0, 0.0, spec.num_inference_steps + 1, dtype=np.float64)
        shift = spec.flow_shift
        return shift * base / (1.0 + (shift - 1.0) * base)

    def generate(self, spec: GenerationSpec, monitor: StepMonitor) -> GeneratedMedia:
        key = self._request_key(spec)
        rng = np.random.Generator(np.random.PCG64(int.from_bytes(key[:16], "little")))
        shape = (
            LATENT_CHANNELS,
            video_latent_frames(spec.num_frames),
            max(1, math.ceil(spec.height / SPATIAL_COMPRESSION)),
            max(1, math.ceil(spec.width / SPATIAL_COMPRESSION)),
        )
        latent = rng.standard_normal(shape, dtype=np.float32)
        condition = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.8)
        gain = np.float32(1.0 + 0.05 * spec.guidance_scale)
        sigmas = self._sigmas(spec)
        for step in range(spec.num_inference_steps):
            sigma, sigma_next = float(sigmas[step]), float(sigmas[step + 1])
            predicted = np.tanh(condition * gain + np.float32(0.1) * latent)
            velocity = (latent - predicted) / np.float32(max(sigma, 1e-6))
            latent = latent + np.float32(sigma_next - sigma) * velocity
            latent = _round_to_dtype(latent, self._dtype)
            if self._step_cost_s > 0:
                monitor.idle(self._step_cost_s)
            monitor.step_done(step + 1, spec.num_inference_steps)
        audio = self._decode_audio(spec, latent, key) if spec.generate_sound else None
        return GeneratedMedia(
            width=spec.width,
            height=spec.height,
            fps=spec.fps,
            num_frames=spec.num_frames,
            frames=self._decode_frames(spec, latent, key),
            audio=audio,
        )

    def _decode_frames(
        self, spec: GenerationSpec, latent: np.ndarray, key: bytes
    ) -> Iterator[np.ndarray]:
        height, width = spec.height, spec.width
        rows = (np.arange(height) * latent.shape[2]) // height
        cols = (np.arange(width) * latent.shape[3]) // width
        bases = [
            _resize_nearest(image.rgb, height, width).astype(np.float32) for image in spec.images
        ]
        if not bases:
            # No reference: a prompt-coloured vertical gradient stands in for the image.
            colour = np.frombuffer(key[16:19], dtype=np.uint8).astype(np.float32)
            ramp = np.linspace(0.4, 1.0, height, dtype=np.float32)[:, None, None]
            bases = [np.broadcast_to(ramp * colour, (height, width, 3)).copy()]
        latent_t = latent.shape[1]
        pan_speed = 0.25 + (key[19] / 255.0)  # pixels per frame
        for index in range(spec.num_frames):
            t = min(latent_t - 1, index * latent_t // spec.num_frames)
            texture = latent[:3, t][:, rows][:, :, cols].transpose(1, 2, 0)
            base = bases[index * len(bases) // spec.num_frames]
            panned = np.roll(base, int(index * pan_speed) % width, axis=1)
            frame = 0.75 * panned + 0.25 * 255.0 * (0.5 + 0.5 * np.tanh(texture))
            yield np.clip(frame, 0.0, 255.0).astype(np.uint8)

    def _decode_audio(self, spec: GenerationSpec, latent: np.ndarray, key: bytes) -> np.ndarray:
        samples = audio_sample_count(spec.num_frames, spec.fps)
        seconds = np.arange(samples, dtype=np.float64) / AUDIO_SAMPLE_RATE
        # The last latent channel, averaged over space, is the audio latent's envelope.
        envelope_points = latent[LATENT_CHANNELS - 1].mean(axis=(1, 2)).astype(np.float64)
        point_times = np.linspace(0.0, samples / AUDIO_SAMPLE_RATE, len(envelope_points))
        envelope = 0.5 + 0.5 * np.tanh(np.interp(seconds, point_times, envelope_points))
        base_hz = 110.0 + 2.0 * key[20]
        left = np.sin(2.0 * np.pi * base_hz * seconds)
        right = np.sin(2.0 * np.pi * base_hz * 1.5 * seconds)
        audio = 0.3 * envelope * np.stack([left, right])
        for clip in spec.audios:
            reps = -(-samples // clip.samples.shape[1])
            audio += 0.5 * np.tile(clip.samples, (1, reps))[:, :samples]
        clipped: np.ndarray = np.clip(audio, -1.0, 1.0).astype(np.float32)
        return clipped
