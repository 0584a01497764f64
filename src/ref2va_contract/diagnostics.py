"""Request-owned diagnostics: the request block, the dump folder, ``enabled_path.json``.

A request opts in with ``extra_params[ACCEPTANCE_FIELD] = {DUMP_DIR_KEY: ABS_PATH, POINTS_KEY:
[...] | ALL_POINTS}``; the engine writes one ``<point>{DUMP_SUFFIX}`` file per point produced (one
tensor, named after the point) and, last, ``ENABLED_PATH_FILE``: what actually ran.
"""

from __future__ import annotations

from typing import Final

# --- the request's block, in ``extra_params``
ACCEPTANCE_FIELD: Final = "acceptance"
DUMP_DIR_KEY: Final = "dump_dir"
POINTS_KEY: Final = "points"
ACCEPTANCE_KEYS: Final = frozenset({DUMP_DIR_KEY, POINTS_KEY})
ALL_POINTS: Final = "all"

# --- the dump folder
DUMP_SUFFIX: Final = ".safetensors"
ENABLED_PATH_FILE: Final = "enabled_path.json"

# --- enabled_path.json: the keys the judge's audit reads
APPROXIMATE_KEY: Final = "approximate"  # list of the approximate paths that ran
DTYPE_KEY: Final = "dtype"  # the compute dtype, e.g. "float32", "bfloat16"
CACHE_KEY: Final = "cache"  # object; its REUSED_STEPS_KEY lists steps served from cache
REFERENCE_KV_KEY: Final = "reference_kv"  # object; its REUSED_STEPS_KEY lists K/V reuse steps
REUSED_STEPS_KEY: Final = "reused_steps"
POINTS_WRITTEN_KEY: Final = "points_written"  # the points written, in the order written
# Names in APPROXIMATE_KEY that the audit relates to the reused-steps lists.
CACHE_DIT_PATH: Final = "cache_dit"
REFERENCE_KV_REUSE_PATH: Final = "reference_kv_reuse"
