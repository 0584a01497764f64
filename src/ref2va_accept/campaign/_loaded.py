"""A loaded campaign: the validated file, where it lives, its arms and their launch profiles.

`load_campaign` is the one way in: it reads and validates the file and refuses what the real
server would refuse (`h3_limits`). Placeholders (`<FILL: ...>`) load fine; `unfilled_fields`
lists them, and only freezing refuses them.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ref2va_accept.campaign import _h3_limits as h3_limits
from ref2va_accept.campaign._files import dotted_path, read_mapping, validate_model
from ref2va_accept.campaign._launch_profile import LaunchProfile, load_profile_at
from ref2va_accept.campaign._schema import ArmSpec, Campaign
from ref2va_accept.campaign._tracks import PinnedFile
from ref2va_accept.core import ArmRole, CampaignError, is_placeholder
from ref2va_accept.quality import VBENCH_LAYOUT, stand_in_name
from ref2va_contract.launch import DECLARED_TIME_ENV, DECLARED_TIME_FLAGS


@dataclass(frozen=True)
class LoadedCampaign:
    """A validated campaign and where it lives (every relative path is relative to `path`)."""

    path: Path
    model: Campaign
    _profiles: dict[str, LaunchProfile] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def folder(self) -> Path:
        return Path(os.path.abspath(self.path)).parent

    def resolve(self, rel: str) -> Path:
        return Path(os.path.normpath(self.folder / rel))

    def scorer_weight_paths(self) -> dict[str, Path]:
        """Where each named scorer weights file is: its `path`, else VBench's layout under
        `scorer_weights_dir`; a placeholder path or folder leaves the name out (its dimensions
        stay open, naming it as not given)."""
        root = self.model.scorer_weights_dir
        base = None if root is None or is_placeholder(root) else self.resolve(root)
        paths: dict[str, Path] = {}
        for name, weights in self.model.scorer_weights.items():
            rel = weights.path if weights.path is not None else VBENCH_LAYOUT.get(name)
            if rel is None or is_placeholder(rel):
                continue
            if os.path.isabs(rel):
                paths[name] = Path(rel)
            elif base is not None:
                paths[name] = Path(os.path.normpath(base / rel))
            elif weights.path is not None:
                paths[name] = self.resolve(rel)
        return paths

    def scorer_weight_pins(self) -> dict[str, str]:
        """Each named weights file's pinned sha256; a placeholder pins nothing."""
        return {name: w.sha256 for name, w in self.model.scorer_weights.items()
                if not is_placeholder(w.sha256)}

    def scorer_stand_ins(self) -> frozenset[str]:
        """The names whose files are seeded stand-ins (`stand_in: true`)."""
        return frozenset(name for name, w in self.model.scorer_weights.items() if w.stand_in)

    def scorer_undeclared_stand_ins(self) -> dict[str, str]:
        """The names whose pin is a stand-in's bytes (known_standins: a shipped hash, or one the
        list of the folder it is read from records) although the campaign does not mark them
        `stand_in: true`: weights name -> the stand-in those bytes are."""
        paths, declared = self.scorer_weight_paths(), self.scorer_stand_ins()
        found: dict[str, str] = {}
        for name, pin in self.scorer_weight_pins().items():
            which = stand_in_name(pin, paths.get(name))
            if name not in declared and which is not None:
                found[name] = which
        return found

    def display(self, rel: str) -> str:
        """A campaign-relative path as the user would type it (relative if the campaign was)."""
        return os.path.normpath(os.path.join(os.fspath(self.path.parent), rel))

    def engine_workdir(self) -> Path:
        return self.resolve(self.model.engine.workdir)

    def arms_for(self, track_id: str) -> list[ArmSpec]:
        if track_id not in self.model.tracks:
            raise CampaignError(
                f"{self.path}: tracks: a track of this campaign "
                f"({', '.join(self.model.tracks)}), found {track_id!r}"
            )
        entering = [a for a in self.model.candidates if a.tracks is None or track_id in a.tracks]
        return [self.model.baseline, *entering]

    def profile(self, arm: ArmSpec) -> LaunchProfile:
        # ids are unique and only the baseline is b0, so the id says which role the arm plays
        role = "baseline" if arm.id == ArmRole.B0 else "candidate"
        if is_placeholder(arm.profile):
            where = "baseline" if role == "baseline" else f"candidate {arm.id!r}"
            raise CampaignError(f"{self.path}: {where}: profile: unfilled {arm.profile}")
        display = self.display(arm.profile)
        if arm.profile not in self._profiles:
            self._profiles[arm.profile] = load_profile_at(self.resolve(arm.profile), display)
        prof = self._profiles[arm.profile]
        if prof.engine != self.model.engine.kind:
            raise CampaignError(
                f"{display}: engine: {self.model.engine.kind!r} (the campaign's engine), "
                f"found {prof.engine!r}"
            )
        if role == "baseline" and prof.declared != "baseline":
            raise CampaignError(f"{display}: declared: 'baseline' for B0, found {prof.declared!r}")
        if role == "candidate" and prof.declared == "baseline":
            raise CampaignError(
                f"{display}: declared: 'lossless' or 'lossy' for candidate {arm.id!r}, "
                "found 'baseline'"
            )
        declared = [f"args.{flag}" for flag in DECLARED_TIME_FLAGS
                    if prof.args.get(flag) not in (None, False, 0, {})]
        declared += [f"env.{DECLARED_TIME_ENV}"] if DECLARED_TIME_ENV in prof.env else []
        if declared and not self.model.protocol.declared_device_time:
            raise CampaignError(
                f"{display}: {', '.join(declared)}: declares device time, which the engine "
                "sleeps instead of computing: a latency it makes is no measurement (a campaign "
                "of the harness's own tests sets protocol.declared_device_time: true, and every "
                "verdict is then capped inconclusive)")
        if prof.needs_source is not None:
            raise CampaignError(
                f"{display}: needs_source: this profile cannot run on the campaign's engine "
                f"source; it needs {prof.needs_source}"
            )
        return prof

    def pinned_inputs(self) -> Iterator[tuple[str, PinnedFile]]:
        """(track-relative dotted location, pin) for every input of every track."""
        for track_id, track in self.model.tracks.items():
            for name in ("prompt", "reference_image", "reference_audio"):
                pinned = getattr(track.inputs, name)
                if pinned is not None:
                    yield f"tracks.{track_id}.inputs.{name}", pinned


def load_campaign(path: str | os.PathLike[str]) -> LoadedCampaign:
    """Load and validate a campaign file. Placeholders load fine; they only block freezing."""
    display = os.fspath(path)
    model = validate_model(Campaign, read_mapping(Path(path), display), display)
    loaded = LoadedCampaign(path=Path(path), model=model)
    # What the real server would refuse (input limits, its own time bounds) is a load error too.
    problems = h3_limits.campaign_problems(loaded)
    if problems:
        raise CampaignError("\n".join(h3_limits.problem_lines(display, problems)))
    return loaded


# --------------------------------------------------------------------------- placeholders


def _placeholders(value: Any, loc: tuple[str | int, ...] = ()) -> Iterator[str]:
    if isinstance(value, dict):
        for key in value:
            yield from _placeholders(value[key], (*loc, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _placeholders(item, (*loc, i))
    elif is_placeholder(value):
        yield dotted_path(loc)


def unfilled_fields(campaign: LoadedCampaign) -> list[str]:
    """Dotted paths of `<FILL: ...>` values, the campaign's then its profiles' (`profile P: x`)."""
    found = list(_placeholders(campaign.model.model_dump(mode="json")))
    seen: set[str] = set()
    for arm in campaign.model.arms():
        if is_placeholder(arm.profile) or arm.profile in seen:
            continue
        seen.add(arm.profile)
        rel = posixpath.normpath(arm.profile)
        try:
            prof = load_profile_at(campaign.resolve(arm.profile), campaign.display(arm.profile))
        except CampaignError:
            continue  # a broken profile is reported by freeze and by profile(), not here
        found += [f"profile {rel}: {p}" for p in _placeholders(prof.model_dump(mode="json"))]
    return found
