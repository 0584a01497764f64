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
# Optional: module outputs captured for the localization pass (one stage, one step)
CAPTURE_KEY: Final = "capture"
ACCEPTANCE_KEYS: Final = frozenset({DUMP_DIR_KEY, POINTS_KEY, CAPTURE_KEY})
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
# The diffusion text encoder's tensor-parallel size the server runs with (vLLM-Omni: its
# parallel config's text_encoder_tp_size; the reference engine: --text-encoder-tp-size, or None)
TEXT_ENCODER_TP_KEY: Final = "text_encoder_tp_size"
# Names in APPROXIMATE_KEY that the audit relates to the reused-steps lists.
CACHE_DIT_PATH: Final = "cache_dit"
REFERENCE_KV_REUSE_PATH: Final = "reference_kv_reuse"

# --- the localization capture: ``{CAPTURE_KEY: {CAPTURE_STAGE_KEY: "dit" | "encoders",
# CAPTURE_STEP_KEY: int (dit) | None, CAPTURE_FIRST_STEP_KEY: int (dit, optional),
# CAPTURE_WITHIN_KEY: module path | None, CAPTURE_TENSORS_KEY: bool}}``. Without ``within`` the
# engine hooks the stage's blocks (each root module's children, list containers opened one
# level); with it, that module and everything inside it. Every call of a hooked module while the
# capture is live is one JSON line in CAPTURE_LOG_FILE (with its step), in the order the calls
# completed; ``tensors`` also writes each call's inputs and outputs under CAPTURE_DIR.
CAPTURE_STAGE_KEY: Final = "stage"
CAPTURE_STEP_KEY: Final = "step"
# Optional, the DiT only: the capture is live from this step to ``step`` (default: ``step`` alone)
CAPTURE_FIRST_STEP_KEY: Final = "first_step"
CAPTURE_WITHIN_KEY: Final = "within"
CAPTURE_TENSORS_KEY: Final = "tensors"
# Optional, default false: stop the request once the capture is whole (the DiT: its last step ran,
# on every rank; the encoders: before the denoise begins), the points it asks for and
# ENABLED_PATH_FILE written. Every point it asks for must be made before that (cond.*, and
# dit.stepNNN up to the capture's step): a point after it is refused. The engine answers
# CAPTURE_STOPPED_STATUS, its error message carrying CAPTURE_STOPPED_MARKER, and its capture report
# says where it stopped (CAPTURE_STOPPED_KEY); anything else is a request that failed.
CAPTURE_STOP_KEY: Final = "stop"
CAPTURE_KEYS: Final = frozenset({CAPTURE_STAGE_KEY, CAPTURE_STEP_KEY, CAPTURE_FIRST_STEP_KEY,
                                 CAPTURE_WITHIN_KEY, CAPTURE_TENSORS_KEY, CAPTURE_STOP_KEY})
CAPTURE_DIT: Final = "dit"
CAPTURE_ENCODERS: Final = "encoders"
CAPTURE_STAGES: Final = (CAPTURE_DIT, CAPTURE_ENCODERS)
CAPTURE_LOG_FILE: Final = "capture.jsonl"
CAPTURE_DIR: Final = "capture"
# enabled_path.json: the capture's own summary (hooked modules, calls, bytes, seconds, errors)
CAPTURE_REPORT_KEY: Final = "capture"
# In the capture report: null (the request ran through), or where the engine stopped a request
# that asked for CAPTURE_STOP_KEY: {"stage": CAPTURE_DIT, "step": the last step that ran} or
# {"stage": CAPTURE_ENCODERS, "step": null} (stopped before the denoise).
CAPTURE_STOPPED_KEY: Final = "stopped"
# The answer to a request the engine stopped on purpose once its capture was whole: a client
# error status (vLLM-Omni 0.30.0 carries a 4xx status from the worker to the HTTP answer, and its
# video routes answer 409 only on DELETE and on content not yet ready), with this marker opening
# the error message.
CAPTURE_STOPPED_STATUS: Final = 409
CAPTURE_STOPPED_MARKER: Final = "ref2va-capture-stopped"
