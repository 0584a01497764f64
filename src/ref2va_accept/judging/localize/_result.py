"""What the localization pass found for one candidate, and which stage and steps a comparison
point leads it to: the ``localization`` check's data (:class:`Localization`) and its target
(:class:`Target`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ref2va_accept.core import Check, CheckStatus
from ref2va_accept.evidence import (
    DiffPicture,
    DivergenceRecord,
    LocalizationCheck,
    LocalizationData,
    LocalizedFigures,
    LocalizeRequest,
    NotCompared,
)
from ref2va_accept.judging.localize._capture import Divergence
from ref2va_accept.tensors import dit_step
from ref2va_contract.diagnostics import CAPTURE_DIT, CAPTURE_ENCODERS


@dataclass(frozen=True)
class Target:
    stage: str
    step: int | None  # the diverging point's step (the last one level 1 captures)
    first_step: int | None = None  # the first step level 1 captures (points skip steps)

    def describe(self) -> str:
        if self.stage != CAPTURE_DIT:
            return "the conditioning encoders"
        if self.first_step is not None and self.first_step != self.step:
            return f"the DiT at steps {self.first_step}..{self.step}"
        return f"the DiT at step {self.step}"

    def steps(self) -> tuple[int | None, ...]:
        """The steps a capture of this target records calls at (None: the encoders')."""
        if self.stage != CAPTURE_DIT or self.step is None:
            return (None,)
        first = self.step if self.first_step is None else self.first_step
        return tuple(range(first, self.step + 1))


def point_at(point: str, step: int) -> str:
    """The same DiT point at another step (``dit.step025.video`` -> ``dit.step002.video``)."""
    return re.sub(r"^dit\.step\d{3}", f"dit.step{step:03d}", point)


def target_of(point: str, equal_points: Sequence[str] = ()) -> Target | None:
    """Which stage (and steps) made a comparison point; None for one no module of a step makes.

    ``equal_points``: the contracted points found equal before it. When the frozen points skip
    steps (dit.step000, dit.step025, ...), the runs may have parted at any step after the last
    equal one: level 1 captures them all, from the step after it.
    """
    if point.startswith("cond."):
        return Target(CAPTURE_ENCODERS, None)
    step = dit_step(point)
    if step is None:
        return None
    earlier = [s for s in map(dit_step, equal_points) if s is not None and s < step]
    return Target(CAPTURE_DIT, step, max(earlier) + 1 if earlier else 0)


@dataclass
class Localization:
    """What the pass found for one candidate (the ``localization`` check's data)."""

    track: str
    candidate: str
    point: str
    seed: int | None
    target: Target | None = None
    found: bool = False
    sentence: str = ""  # where, in words (or why no place is named)
    module: str | None = None  # the module path named (None: outside any module, or not found)
    where: str = ""  # the place in a few words: the module, "code between A and B", "X not run"
    level1: Divergence | None = None
    level2: Divergence | None = None
    # the named module's output (else the pictured point), B0 against the candidate
    figures: LocalizedFigures | NotCompared | None = None
    inputs_equal: bool | None = None
    picture: DiffPicture | None = None
    picture_of: str = ""
    requests: list[LocalizeRequest] = field(default_factory=list)

    def check(self) -> LocalizationCheck:
        detail = (f"first divergence at {self.point}"
                  + (f", in {self.target.describe()}" if self.target else "")
                  + f": {self.sentence}")
        return LocalizationCheck(track=self.track, arm=self.candidate, name=Check.LOCALIZATION,
                                 status=CheckStatus.PASS if self.found else CheckStatus.OPEN,
                                 reason=None, detail=detail, data=self.record())

    def record(self) -> LocalizationData:
        """What the pass found, as the evidence records it (the check's data)."""
        target = self.target
        return LocalizationData(
            point=self.point, seed=self.seed,
            stage=target.stage if target else None, step=target.step if target else None,
            first_step=target.first_step if target else None, point_step=dit_step(self.point),
            found=self.found, module=self.module, where=self.where, sentence=self.sentence,
            level1=_divergence_record(self.level1), level2=_divergence_record(self.level2),
            figures=self.figures, inputs_equal=self.inputs_equal, picture=self.picture,
            picture_of=self.picture_of, requests=self.requests)


def _divergence_record(found: Divergence | None) -> DivergenceRecord | None:
    if found is None:
        return None
    return DivergenceRecord(
        kind=found.kind, module=found.module, b0=found.b0.label if found.b0 else None,
        candidate=found.candidate.label if found.candidate else None,
        before=found.before.label if found.before else None, output=found.output,
        skipped=list(found.skipped), sentence=found.sentence())
