"""The `<FILL: ...>` placeholder: a value only the host can supply, which blocks freezing.

Its own module so that the campaign and the modules it is built from (identity, h3_limits)
read one rule without importing one another.
"""

from __future__ import annotations

import re

_PLACEHOLDER = re.compile(r"^<FILL:[^<>]*>$")


def is_placeholder(value: object) -> bool:
    """True for an explicit `<FILL: ...>` value that the host still has to supply."""
    return isinstance(value, str) and _PLACEHOLDER.match(value) is not None
