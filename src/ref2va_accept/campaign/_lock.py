"""Freezing a campaign and verifying it against its lock.

`freeze` writes `<campaign>.lock.json` beside the campaign before any candidate outcome is seen:
the canonical campaign and its hash, the sha256 of every file it depends on (profiles, inputs),
and the harness version. `verify` reports, field by field and file by file, everything that moved
since; a run on a campaign that is not frozen, or has drifted, has its verdicts capped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import posixpath
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field

from ref2va_accept import __version__
from ref2va_accept.campaign._fields import StrictModel, check_sha256
from ref2va_accept.campaign._files import dotted_path, show_value, validate_model
from ref2va_accept.campaign._loaded import LoadedCampaign, load_campaign, unfilled_fields
from ref2va_accept.campaign._schema import LOCK_SCHEMA
from ref2va_accept.core import (
    CampaignError,
    FreezeError,
    WriteFailed,
    atomic_write,
    file_sha256,
    is_placeholder,
    tree_sha256,
)
from ref2va_accept.quality import stand_in_name

logger = logging.getLogger(__name__)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def canonical_campaign(campaign: LoadedCampaign) -> dict[str, Any]:
    """The campaign as JSON-ready data with sorted keys: what the lock hashes."""
    result: dict[str, Any] = _sorted(campaign.model.model_dump(mode="json"))
    return result


def _canonical_sha256(canonical: Mapping[str, Any]) -> str:
    body = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def campaign_files(campaign: LoadedCampaign) -> dict[str, Path]:
    """Every file the campaign depends on, keyed by its posix path relative to the campaign."""
    rels = [arm.profile for arm in campaign.model.arms()]
    rels += [pinned.path for _, pinned in campaign.pinned_inputs()]
    return {
        posixpath.normpath(rel): campaign.resolve(rel)
        for rel in sorted(set(rels))
        if not is_placeholder(rel)
    }


def lock_path(campaign_path: str | os.PathLike[str]) -> Path:
    path = Path(campaign_path)
    return path.with_name(f"{path.stem}.lock.json")


def _file_sha256(path: Path) -> str | None:
    try:
        return file_sha256(path)
    except FileNotFoundError:
        return None


def _short(sha: str) -> str:
    return f"{sha[:8]}…"


def _pin_problems(campaign: LoadedCampaign, hashes: Mapping[str, str | None]) -> list[str]:
    problems: list[str] = []
    done: set[str] = set()
    for _, pinned in campaign.pinned_inputs():
        rel = posixpath.normpath(pinned.path)
        found = hashes.get(rel)
        if is_placeholder(pinned.sha256) or found is None or rel in done:
            continue
        done.add(rel)
        if found != pinned.sha256:
            problems.append(
                f"file {rel}: pinned sha256 {_short(pinned.sha256)}, found {_short(found)}"
            )
    return problems


# --------------------------------------------------------------------------- freeze / verify


def scorer_weight_identities(campaign: LoadedCampaign
                             ) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The scorer weights the campaign names that are on this disk, as the lock records them
    (file name, sha256 of the file or of a folder's manifest, stand-in or not), and a problem for
    each whose sha256 differs from its pin. One that is not here is not recorded: its dimensions
    are open when scored, naming it (weights live on the host, and a campaign is often frozen
    elsewhere)."""
    pins, stand_ins = campaign.scorer_weight_pins(), campaign.scorer_stand_ins()
    found: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for name, where in sorted(campaign.scorer_weight_paths().items()):
        if not where.exists():
            continue
        sha = tree_sha256(where)
        # A stand-in's bytes are one whether or not the campaign declares them (known_standins).
        found[name] = {"name": where.name, "sha256": sha,
                       "stand_in": name in stand_ins or stand_in_name(sha, where) is not None}
        pinned = pins.get(name)
        if pinned is not None and pinned.lower() != sha:
            problems.append(f"scorer_weights.{name}: {where.name} has sha256 {_short(sha)}, "
                            f"pinned {_short(pinned)}")
    return found, problems


def freeze(path: str | os.PathLike[str]) -> Path:
    """Write the lock beside the campaign, or refuse with every reason named."""
    campaign = load_campaign(path)
    files = campaign_files(campaign)
    hashes = {rel: _file_sha256(p) for rel, p in files.items()}
    problems = [f"{f}: unfilled placeholder" for f in unfilled_fields(campaign)]
    problems += [f"file {rel}: missing" for rel, sha in hashes.items() if sha is None]
    problems += _pin_problems(campaign, hashes)
    for arm in campaign.model.arms():
        if not is_placeholder(arm.profile) and hashes.get(posixpath.normpath(arm.profile)):
            try:
                campaign.profile(arm)
            except CampaignError as exc:
                problems.append(str(exc))
    for loc, pinned in campaign.pinned_inputs():
        rel = posixpath.normpath(pinned.path)
        if loc.endswith(".prompt") and hashes.get(rel):
            text = campaign.resolve(pinned.path).read_bytes()
            try:
                if not text.decode("utf-8").strip():
                    problems.append(f"file {rel}: a prompt, found an empty file")
            except UnicodeDecodeError:
                problems.append(f"file {rel}: a UTF-8 text prompt, found undecodable bytes")
    weights, weight_problems = scorer_weight_identities(campaign)
    problems += weight_problems
    if problems:
        listed = "\n".join(f"  {p}" for p in dict.fromkeys(problems))
        raise FreezeError(f"{campaign.path}: cannot freeze:\n{listed}")

    canonical = canonical_campaign(campaign)
    lock = {
        "schema": LOCK_SCHEMA,
        "harness_version": __version__,
        "campaign_sha256": _canonical_sha256(canonical),
        "campaign": canonical,
        "files": {rel: sha for rel, sha in hashes.items() if sha is not None},
        "scorer_weights": weights,
    }
    target = lock_path(path)
    # A reader never sees half a lock; a failed write leaves the old lock and no temporary file.
    try:
        atomic_write(target, json.dumps(lock, sort_keys=True, indent=2, ensure_ascii=False) + "\n")
    except WriteFailed as exc:
        raise FreezeError(str(exc)) from exc.error
    logger.info("froze %s -> %s (%s)", campaign.path, target, lock["campaign_sha256"])
    return target


class _Lock(StrictModel):
    # the lock's own strings are hashes and names; strict keeps a hand edit from sneaking through
    schema_: Literal["ref2va-lock/1"] = Field(alias="schema")
    harness_version: str
    campaign_sha256: Annotated[str, AfterValidator(check_sha256)]
    campaign: dict[str, Any]
    files: dict[str, Annotated[str, AfterValidator(check_sha256)]]
    # The scorer weights found at freeze time (file name, sha256, stand-in); absent in older locks.
    scorer_weights: dict[str, dict[str, Any]] = Field(default_factory=dict)

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)


@dataclass(frozen=True)
class FreezeStatus:
    state: Literal["frozen", "not_frozen", "drifted"]
    problems: tuple[str, ...]
    unfilled: tuple[str, ...]
    lock_sha256: str | None

    @property
    def ok(self) -> bool:
        return self.state == "frozen" and not self.unfilled

    @property
    def cap_reason(self) -> str | None:
        """The verdict cap this status imposes (docs/protocol.md, verdict order step 1)."""
        if self.ok:
            return None
        if self.state == "not_frozen":
            return "protocol_not_frozen"
        return "protocol_deviation"


def _diff(locked: Any, now: Any, loc: tuple[str | int, ...] = ()) -> Iterator[str]:
    if isinstance(locked, dict) and isinstance(now, dict):
        for key in sorted(set(locked) | set(now)):
            if key not in now:
                yield f"{dotted_path((*loc, key))}: locked {show_value(locked[key])}, now absent"
            elif key not in locked:
                yield f"{dotted_path((*loc, key))}: absent in the lock, now {show_value(now[key])}"
            else:
                yield from _diff(locked[key], now[key], (*loc, key))
    elif isinstance(locked, list) and isinstance(now, list) and len(locked) == len(now):
        for i, (a, b) in enumerate(zip(locked, now, strict=True)):
            yield from _diff(a, b, (*loc, i))
    elif locked != now or type(locked) is not type(now):
        yield f"{dotted_path(loc)}: locked {show_value(locked)}, now {show_value(now)}"


def verify(path: str | os.PathLike[str]) -> FreezeStatus:
    """Compare the campaign and its files with the lock; drift is reported, never raised."""
    campaign = load_campaign(path)
    unfilled = tuple(unfilled_fields(campaign))
    target = lock_path(path)
    try:
        raw = target.read_bytes()
    except FileNotFoundError:
        return FreezeStatus("not_frozen", (f"{target}: no lock; freeze the campaign first",),
                            unfilled, None)  # fmt: skip
    lock_sha = hashlib.sha256(raw).hexdigest()
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CampaignError(f"{target}: malformed lock: {exc}") from None
    if not isinstance(data, dict):
        raise CampaignError(f"{target}: top level: a JSON object, found {type(data).__name__}")
    lock = validate_model(_Lock, data, os.fspath(target))

    problems: list[str] = []
    if lock.harness_version != __version__:
        problems.append(f"harness_version: locked {lock.harness_version}, now {__version__}")
    if _canonical_sha256(lock.campaign) != lock.campaign_sha256:
        problems.append("campaign_sha256: does not match the lock's own campaign (edited by hand?)")
    problems += _diff(lock.campaign, canonical_campaign(campaign))

    files = campaign_files(campaign)
    hashes = {rel: _file_sha256(p) for rel, p in files.items()}
    for rel in sorted(set(files) | set(lock.files)):
        if rel not in files:
            problems.append(f"file {rel}: in the lock, no longer used by the campaign")
        elif rel not in lock.files:
            problems.append(f"file {rel}: not in the lock")
        elif hashes[rel] is None:
            problems.append(f"file {rel}: missing")
        elif hashes[rel] != lock.files[rel]:
            found = hashes[rel] or ""
            problems.append(
                f"file {rel}: locked sha256 {_short(lock.files[rel])}, found {_short(found)}"
            )
    problems += _pin_problems(campaign, hashes)
    state: Literal["frozen", "drifted"] = "drifted" if problems else "frozen"
    if problems:
        logger.warning("%s drifted from its lock: %d problem(s)", campaign.path, len(problems))
    return FreezeStatus(state, tuple(problems), unfilled, lock_sha)
