"""What a model-based VBench score was made with, recorded beside its value (``made_with``).

Each model's parameter dtype, input dtype and device, whether the frame resize antialiases, and
for the i2v dimensions how the reference image is resized: the choices that move a score from
upstream's without being errors (upstream runs CLIP in fp16 on a GPU; VBench++'s i2v transforms
leave antialiasing to the torchvision version).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ref2va_accept.evidence import ScoreRecord
from ref2va_accept.quality import _models as models
from ref2va_accept.quality._frames import FrameMetric, FrameView
from ref2va_accept.quality._registry import with_extra

__all__ = ["FRAME_RESIZE_ANTIALIAS", "Recorded", "made_with"]

# Whether each model-based dimension's frame resize antialiases: VBench's own transforms are
# replicated without (torch's interpolate default), VBench++'s i2v ones with (torchvision's
# default for tensors since 0.17, which they leave unset: models.I2V_ANTIALIAS); None: frames are
# padded, not resized.
FRAME_RESIZE_ANTIALIAS: dict[str, bool | None] = {
    "subject_consistency": False, "background_consistency": False, "aesthetic_quality": False,
    "imaging_quality": False, "motion_smoothness": None, "dynamic_degree": None,
    "i2v_subject": models.I2V_ANTIALIAS, "i2v_background": models.I2V_ANTIALIAS,
}


class Recorded:
    """A model-based metric whose scores say what they were made with (``made_with``)."""

    def __init__(self, metric: FrameMetric, record: dict[str, Any]) -> None:
        self.metric, self.record = metric, record
        self.info = metric.info  # type: ignore[attr-defined]

    def update(self, view: FrameView) -> None:
        self.metric.update(view)

    def finish(self) -> list[ScoreRecord]:
        return [with_extra(score, made_with=self.record)
                for score in self.metric.finish()]


def made_with(dimension: str, used: Sequence[models.LoadedModel],
              needs_reference: bool) -> dict[str, Any]:
    record: dict[str, Any] = {"models": {m.name: m.made_with() for m in used},
                              "frame_resize_antialias": FRAME_RESIZE_ANTIALIAS[dimension]}
    if needs_reference:
        record["reference_resize"] = "PIL bicubic (antialiased), no EXIF orientation"
    return record
