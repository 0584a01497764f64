"""`ref2va-accept`, the command line: its entry point and one module per group of commands.

The modules are private; the other stages import these names from here.
"""

from typing import TYPE_CHECKING

from ref2va_accept.core import load_name

if TYPE_CHECKING:
    from ref2va_accept.cli._localize import localize_run
    from ref2va_accept.cli._main import build_parser, main
    from ref2va_accept.cli._scorers_check import check_weights, default_paths, dimension_rows

# Each name and the private module that defines it, imported when the name is
# first used (core.load_name): a stage loads only what its user needs.
_WHERE = {
    "build_parser": "_main",
    "check_weights": "_scorers_check",
    "default_paths": "_scorers_check",
    "dimension_rows": "_scorers_check",
    "localize_run": "_localize",
    "main": "_main",
}

__all__ = [
    "build_parser",
    "check_weights",
    "default_paths",
    "dimension_rows",
    "localize_run",
    "main",
]


def __getattr__(name: str) -> object:
    return load_name(__name__, _WHERE, name)
