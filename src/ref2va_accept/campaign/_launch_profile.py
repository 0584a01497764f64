"""Launch profiles: how one arm starts its engine (flags, environment), and loading one.

Which profile an arm may use (the campaign's engine, baseline or candidate, a profile that needs a
later engine source) is decided by `LoadedCampaign.profile`, which loads through here.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import model_validator

from ref2va_accept.campaign._fields import StrictModel, env_violations
from ref2va_accept.campaign._files import raise_violations, read_mapping, validate_model
from ref2va_accept.evidence import EngineKindName

_FLAG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")

ArgValue = bool | int | float | str | list[Any] | dict[str, Any]


class LaunchProfile(StrictModel):
    name: str
    description: str = ""
    declared: Literal["baseline", "lossless", "lossy"]
    engine: EngineKindName
    args: dict[str, ArgValue] = {}
    # Values may name ${workdir}: the campaign's engine workdir, made absolute at launch (a worker
    # extension imported from the checkout needs it on PYTHONPATH whatever the host's layout).
    env: dict[str, str] = {}
    # Set on a profile whose flags the campaign's pinned engine does not have yet (e.g. an option
    # that only a later vLLM-Omni source has): what it needs, in words. Such a profile is shipped
    # so the direction is on record, and refused wherever it would start or be frozen.
    needs_source: str | None = None

    @model_validator(mode="after")
    def _names(self) -> LaunchProfile:
        violations = env_violations(self.env, "env")
        for flag in self.args:
            if not _FLAG.match(flag):
                violations.append(
                    (("args", flag), f"a flag name without leading dashes, found {flag!r}")
                )
        raise_violations(violations)
        return self

    def cli_args(self) -> list[str]:
        """The flags in file order: true -> bare flag, false -> omitted, containers -> JSON."""
        out: list[str] = []
        for flag, value in self.args.items():
            if value is True:
                out.append(f"--{flag}")
            elif value is False:
                continue
            elif isinstance(value, (dict, list)):
                out += [f"--{flag}", json.dumps(value, sort_keys=True, separators=(",", ":"))]
            else:
                out += [f"--{flag}", str(value)]
        return out


def load_profile_at(path: Path, display: str) -> LaunchProfile:
    """Load and validate the profile at `path`; errors name it as `display`."""
    return validate_model(LaunchProfile, read_mapping(path, display), display)


def load_profile(path: str | os.PathLike[str]) -> LaunchProfile:
    """Load and validate one launch profile; errors name the path as given."""
    return load_profile_at(Path(path), os.fspath(path))
