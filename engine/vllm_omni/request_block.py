"""A request's ``extra_params.acceptance`` block: the comparison-point names and the checks.

Every rank parses the block the same way (:func:`parse_request`), so a refused request fails on
all ranks before any collective starts; that includes the block's optional module capture
(:func:`engine.module_capture.parse_capture`). Standard library, ``ref2va_contract`` and
:mod:`engine.module_capture` (which imports torch only inside its functions).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.module_capture import (
    CaptureRefused,
    CaptureRequest,
    parse_capture,
    refuse_points_after_stop,
)
from ref2va_contract.diagnostics import (
    ACCEPTANCE_FIELD,
    ACCEPTANCE_KEYS,
    ALL_POINTS,
    CAPTURE_KEY,
    DUMP_DIR_KEY,
    POINTS_KEY,
)
from ref2va_contract.launch import DIAGNOSTICS_ROOT_ENV

# The points outside the denoise loop, in pipeline order.
CONDITIONING_POINTS = ("cond.text", "cond.image", "cond.audio")
OUTPUT_POINTS = ("latent.video", "latent.audio", "decoded.video", "decoded.audio")
FIXED_POINTS = CONDITIONING_POINTS + OUTPUT_POINTS
# The two tensors of each DiT forward (video velocity rows, audio velocity rows), per step.
STEP_POINT = re.compile(r"^dit\.step(\d{3})\.(video|audio)$")


class DiagnosticsRefused(ValueError):
    """A request's diagnostics block cannot be honoured; the request fails, nothing is written."""


def step_point(step: int, stream: str) -> str:
    return f"dit.step{step:03d}.{stream}"


def allowed_roots(environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """The roots named at launch in ``REF2VA_DIAGNOSTICS_ROOT`` (``os.pathsep``-separated)."""
    raw = (os.environ if environ is None else environ).get(DIAGNOSTICS_ROOT_ENV, "")
    return tuple(Path(part).resolve() for part in raw.split(os.pathsep) if part.strip())


def valid_names(steps: int | None) -> str:
    last = f"{steps - 1:03d}" if steps else "NNN"
    return (f"{', '.join(FIXED_POINTS)}, dit.stepNNN.video and dit.stepNNN.audio for NNN in "
            f"000..{last} (zero-padded), or \"{ALL_POINTS}\"")


@dataclass(frozen=True)
class DumpRequest:
    """Where one request's points go, which (``None``: every point, ``ALL_POINTS``), and the
    module capture it asks for, if any."""

    folder: Path
    points: frozenset[str] | None
    capture: CaptureRequest | None = None

    def wants(self, point: str) -> bool:
        return self.points is None or point in self.points


def request_field(req: Any) -> Any:
    """The raw diagnostics block of a request, or None; never raises on an odd request."""
    sampling = getattr(req, "sampling_params", None)
    extra = getattr(sampling, "extra_args", None)
    if not isinstance(extra, Mapping):
        return None
    return extra.get(ACCEPTANCE_FIELD)


def parse_request(block: Any, steps: int | None, roots: tuple[Path, ...]) -> DumpRequest:
    """Validate a diagnostics block against the launch roots; raise :class:`DiagnosticsRefused`."""
    where = f"extra_params.{ACCEPTANCE_FIELD}"
    where_dir = f"{where}.{DUMP_DIR_KEY}"
    if not isinstance(block, Mapping) or set(block) - ACCEPTANCE_KEYS:
        raise DiagnosticsRefused(f"{where} must be an object with keys '{DUMP_DIR_KEY}', "
                                 f"'{POINTS_KEY}' and optionally '{CAPTURE_KEY}', got {block!r}")
    raw_dir = block.get(DUMP_DIR_KEY)
    if not roots:
        raise DiagnosticsRefused(
            f"{where_dir} {raw_dir!r} refused: diagnostics are disabled on this server, "
            f"{DIAGNOSTICS_ROOT_ENV} was not set at launch")
    if not isinstance(raw_dir, str) or not os.path.isabs(raw_dir):
        raise DiagnosticsRefused(f"{where_dir} must be an absolute path, got {raw_dir!r}")
    shown_roots = os.pathsep.join(str(root) for root in roots)
    if ".." in Path(raw_dir).parts:
        raise DiagnosticsRefused(f"{where_dir} {raw_dir} must not contain '..' "
                                 f"(allowed roots: {shown_roots})")
    # resolve() follows every symlink: a link inside the root that points out of it is refused.
    folder = Path(raw_dir).resolve()
    if not any(folder == root or folder.is_relative_to(root) for root in roots):
        raise DiagnosticsRefused(
            f"{where_dir} {raw_dir} (resolved: {folder}) is outside every diagnostics root "
            f"allowed at launch ({DIAGNOSTICS_ROOT_ENV}={shown_roots})")
    points = block.get(POINTS_KEY)
    try:
        capture = parse_capture(block, steps)
    except CaptureRefused as exc:
        raise DiagnosticsRefused(str(exc)) from None
    if points == ALL_POINTS:
        _refuse_after_stop(capture, None)
        return DumpRequest(folder, None, capture)
    if not (isinstance(points, list) and points and all(isinstance(p, str) for p in points)):
        raise DiagnosticsRefused(f'{where}.{POINTS_KEY} must be "{ALL_POINTS}" or a non-empty '
                                 'list of names, '
                                 f"got {points!r}; valid names: {valid_names(steps)}")
    unknown = [p for p in points if not _known(p, steps)]
    if unknown:
        raise DiagnosticsRefused(f"{where}.{POINTS_KEY}: unknown comparison point(s) {unknown}; "
                                 f"valid names: {valid_names(steps)}")
    _refuse_after_stop(capture, points)
    return DumpRequest(folder, frozenset(points), capture)


def _refuse_after_stop(capture: CaptureRequest | None, points: list[str] | None) -> None:
    try:
        refuse_points_after_stop(capture, points)
    except CaptureRefused as exc:
        raise DiagnosticsRefused(str(exc)) from None


def _known(point: str, steps: int | None) -> bool:
    if point in FIXED_POINTS:
        return True
    match = STEP_POINT.match(point)
    return match is not None and (steps is None or int(match.group(1)) < steps)


def num_steps(req: Any) -> int | None:
    """The request's denoise step count, or None where it has no plain positive one."""
    steps = getattr(getattr(req, "sampling_params", None), "num_inference_steps", None)
    return steps if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0 else None


def is_dummy(req: Any) -> bool:
    """Upstream's own test for its warm-up/profiling request (``OmniDiffusionRequest``)."""
    test = getattr(req, "is_dummy_run", None)
    if callable(test):
        return bool(test())
    return str(getattr(req, "request_id", "")).startswith("dummy_req_id")
