"""What scoring one output costs on the campaign's scoring device, per gated dimension: the
bring-up scores B0's output of a duration class the way the lossy gate scores it.

One pass decodes the output and computes every dimension no model serves (temporal_flickering,
the proxies, the reference-image consistency): its time is shared by the gated dimensions among
them. Each model (or pair: the aesthetic dimension's two files) then runs in a pass of its own on
`scoring.device`, and what it adds to the first pass is its dimension's price (DINO's, shared by
subject_consistency and i2v_subject, split between them). So the prices add up to what one
scoring pass of the gate costs, as `plan` sums them.

Scoring time depends on the networks' architectures and the frames, not on the weights'
values: where the campaign's weight pins are still placeholders, the shipped stand-ins (`ref2va-
accept scorers standins`, the same networks in the official formats, in VBench's layout under
fixtures/standins) give the price, and the patch says so (`scoring.measured_with: standins`). A
dimension whose files are neither pinned nor there is named with the command that makes them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Field

from ref2va_accept.campaign import LoadedCampaign
from ref2va_accept.evidence import Number, Record, written_rounded
from ref2va_accept.quality import VBENCH_LAYOUT, WEIGHT_DIMENSIONS

# Where the checkout keeps the stand-ins `ref2va-accept scorers standins` writes (git-ignored).
STANDINS_FOLDER = "fixtures/standins"

Scorer = Callable[..., Sequence[Any]]  # quality._pipeline.score_video's signature


def names_for(dimension: str) -> tuple[str, ...]:
    """The weights files a gated dimension's model needs (none for one no model serves)."""
    if not dimension.startswith("vbench."):
        return ()
    short = dimension.removeprefix("vbench.")
    return tuple(n for n, dims in WEIGHT_DIMENSIONS.items() if short in dims)


@dataclass(frozen=True)
class Weights:
    """The files one model pass runs with, and whether they are stand-ins."""

    paths: Mapping[str, Path]
    pins: Mapping[str, str]
    stand_ins: frozenset[str]

    @property
    def with_standins(self) -> bool:
        return bool(self.stand_ins)


def resolve(campaign: LoadedCampaign, names: Sequence[str]) -> Weights | str:
    """The campaign's pinned files for `names` when each is there and pinned, else the shipped
    stand-ins when each is there; else why neither (a sentence naming the command)."""
    paths, pins = campaign.scorer_weight_paths(), campaign.scorer_weight_pins()
    declared = campaign.scorer_stand_ins()
    if all(n in paths and paths[n].exists() and n in pins for n in names):
        return Weights({n: paths[n] for n in names}, {n: pins[n] for n in names},
                       frozenset(n for n in names if n in declared))
    folder = campaign.engine_workdir() / STANDINS_FOLDER
    found = {n: folder / VBENCH_LAYOUT[n] for n in names}
    if all(p.exists() for p in found.values()):
        return Weights(found, {}, frozenset(names))
    lacking = [n for n in names if not found[n].exists()]
    return (f"{', '.join(names)}: not pinned with a file on this host, and no shipped stand-in "
            f"(`ref2va-accept scorers standins {STANDINS_FOLDER} --names {','.join(lacking)}` "
            "writes them; then run the bring-up again)")


class ScoringPass(Record):
    """One scoring pass and its time: the first decodes and scores every dimension no model
    serves; each after it runs one model (or pair), naming its stand-ins (none: the pinned
    files)."""

    model_config = ConfigDict(frozen=True)

    what: str = Field(validation_alias="pass", serialization_alias="pass")
    seconds: Number  # rounded to the millisecond
    stand_ins: list[str] | None = None  # a model pass's; the first pass writes none

    @property
    def model(self) -> bool:
        return self.stand_ins is not None


class ScoringPrice(Record):
    """One duration class's scoring, measured (bringup.json's `prices.scoring`; `measure`
    builds it): seconds per gated dimension, as measured and written to the millisecond, and
    what was not."""

    model_config = ConfigDict(frozen=True)

    duration: str
    track: str  # the lossy track whose gated dimensions were scored
    device: str
    seconds: dict[str, Annotated[Number, written_rounded(3)]]
    missing: dict[str, str]  # dimension -> why not measured
    passes: list[ScoringPass]
    with_standins: bool

    @property
    def models(self) -> int:
        """The model passes run."""
        return sum(1 for p in self.passes if p.model)


def _status(scores: Sequence[Any], dimension: str) -> tuple[str, str]:
    found = next((s for s in scores if s.scorer == dimension), None)
    if found is None:
        return "error", "no score made"
    return str(found.status), str(found.detail)


def measure(campaign: LoadedCampaign, duration: str, track: str, gated: Sequence[str],
            video: Path, reference: Path | None, device: str, scorer: Scorer,
            clock: Callable[[], float] = time.perf_counter) -> ScoringPrice:
    """Score `video` once per model and once without, on `device`, and share the times out
    over `gated` (see the module doc)."""
    seconds: dict[str, float] = {}
    missing: dict[str, str] = {}
    standins = False
    plain = [d for d in gated if not names_for(d)]
    groups: dict[tuple[str, ...], list[str]] = {}
    for dimension in gated:
        names = names_for(dimension)
        if names:
            groups.setdefault(names, []).append(dimension)
    started = clock()
    base_scores = scorer(video, reference_image=reference, weights={}, device=device)
    base = clock() - started
    passes = [ScoringPass(what="decode and every dimension no model serves",
                          seconds=round(base, 3))]
    for dimension in plain:
        status, detail = _status(base_scores, dimension)
        if status == "error":
            missing[dimension] = f"its score failed: {detail}"
    share = plain if plain else list(gated)
    for names, dims in groups.items():
        weights = resolve(campaign, names)
        if isinstance(weights, str):
            for dimension in dims:
                missing[dimension] = weights
            continue
        started = clock()
        scores = scorer(video, reference_image=reference, weights=dict(weights.paths),
                        weight_pins=dict(weights.pins), stand_ins=weights.stand_ins,
                        device=device)
        took = clock() - started
        standins = standins or weights.with_standins
        passes.append(ScoringPass(what=", ".join(names), seconds=round(took, 3),
                                  stand_ins=sorted(weights.stand_ins)))
        for dimension in dims:
            status, detail = _status(scores, dimension)
            if status != "ok":
                missing[dimension] = f"its model did not score ({status}: {detail})"
            else:
                seconds[dimension] = max(took - base, 0.0) / len(dims)
    for dimension in share:
        if dimension not in missing:
            seconds[dimension] = seconds.get(dimension, 0.0) + base / len(share)
    return ScoringPrice(duration=duration, track=track, device=device, seconds=seconds,
                        missing=missing, passes=passes, with_standins=standins)
