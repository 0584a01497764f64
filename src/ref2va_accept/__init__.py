"""The judge: harness library and pytest plugin for the Ref2VA acceptance suite."""

from __future__ import annotations

__version__ = "0.1.0"
