"""The scripts that write profiles in torch_npu's formats (scripts/npu_profile_fixtures.py, and
its database twin), loaded for the tests that plant cases in them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
COMMITTED = SCRIPTS.parent / "fixtures" / "profiles" / "npu"


def load(name: str) -> ModuleType:
    """A script of scripts/ as a module (loaded once)."""
    if name in sys.modules:
        return sys.modules[name]
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


text = load("npu_profile_fixtures")
