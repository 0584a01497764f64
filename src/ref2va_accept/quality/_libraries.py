"""Reaching the networks inside installed libraries whose top-level imports we cannot afford.

VBench (``vbench``) and DreamSim (``dreamsim``) carry the very networks VBench scores with (RAFT,
AMT-S, DINO's ViT), in modules that need only torch. Their packages' ``__init__`` modules, though,
import torchvision, decord and the rest of VBench's pins, which the judge's environment does not
have (PyPI's torchvision does not load beside the CPU build of torch). :func:`submodule` imports
one module of such a package without running the package's own ``__init__``: it finds where the
package is installed, stands an empty package object in for it and imports the submodule
beneath it. Nothing is copied, nothing is patched: the code that runs is the library's.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
import types
from typing import Any

from ref2va_accept.quality._registry import ScorerError

__all__ = ["library_version", "submodule"]


def library_version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or None when it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def submodule(package: str, module: str, *, distribution: str | None = None,
              why: str = "") -> Any:
    """Import ``package.module`` without running ``package/__init__.py`` (when it is not already
    imported); ScorerError naming the distribution to install when the package is absent or the
    module fails to import."""
    dist = distribution or package
    if package not in sys.modules:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            need = f" ({why})" if why else ""
            raise ScorerError(f"the {dist} package is not installed{need}; "
                              f"`pip install --no-deps {dist}` adds it without its pins")
        stand_in = types.ModuleType(package)
        stand_in.__path__ = list(spec.submodule_search_locations)
        stand_in.__spec__ = spec
        stand_in.__file__ = spec.origin
        sys.modules[package] = stand_in
    name = f"{package}.{module}"
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        need = f" ({why})" if why else ""
        raise ScorerError(f"{name} (from {dist} {library_version(dist) or '?'}) does not import "
                          f"here: {exc}{need}") from None
