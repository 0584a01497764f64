"""Pinned values of the reference engine that more than one test holds it to: the hash of the
seeded reference weights that the campaign's quality figures were measured with."""

from __future__ import annotations

# weights_sha256 of the reference model (ModelShape(), seed-salt 0) that the campaign runs.
REFERENCE_WEIGHTS_SHA256 = "69d9bf58307f0eff1bfe81ebdbe63cbd1541048c2c203414788afca284b66f3e"
