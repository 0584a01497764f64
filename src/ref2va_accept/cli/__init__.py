"""`ref2va-accept`, the command line: its entry point and one module per group of commands.

The modules are private; the other stages import these names from here.
"""

from ref2va_accept.cli._localize import localize_run
from ref2va_accept.cli._main import build_parser, main
from ref2va_accept.cli._scorers_check import check_weights, default_paths, dimension_rows

__all__ = [
    "build_parser",
    "check_weights",
    "default_paths",
    "dimension_rows",
    "localize_run",
    "main",
]
