"""Constants of the reference model that more than one part of the engine reads.

The launch-profile schema checks Cache-DiT's block counts against the DiT's depth, and the
pipeline builds that many blocks: the number lives here, below both, rather than in either.
"""

from __future__ import annotations

from typing import Final

# Depth of the reference DiT; Cache-DiT's Fn/Bn block counts are checked against it at load time.
DIT_BLOCKS: Final = 6
