"""Names of a stage package loaded when first used (PEP 562), for the faces whose modules are
heavy (quality's scorers load OpenCV, scipy and torch; judging's lossy gate imports them): the
pytest plugin, for one, must not load OpenCV and scipy. The other faces import their names."""

from __future__ import annotations

import importlib
from collections.abc import Mapping


def load_name(package: str, where: Mapping[str, str], name: str) -> object:
    """`name` of `package`, from the private module `where` says defines it; an AttributeError,
    as for any missing attribute, for a name the package does not export."""
    module = where.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{package}.{module}"), name)
    setattr(importlib.import_module(package), name, value)
    return value
