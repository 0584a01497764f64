"""vLLM-Omni's video API as the judge uses it and the reference engine serves it (0.30.0)."""

from __future__ import annotations

from typing import Final

HEALTH_ROUTE: Final = "/health"
MODELS_ROUTE: Final = "/v1/models"
# The timed request: multipart form in, the MP4 as the response body.
SYNC_VIDEO_ROUTE: Final = "/v1/videos/sync"
# The asynchronous job routes: POST creates a job, GET lists or reads one,
# ``{VIDEOS_ROUTE}/{id}/content`` returns its MP4.
VIDEOS_ROUTE: Final = "/v1/videos"
START_PROFILE_ROUTE: Final = "/start_profile"
STOP_PROFILE_ROUTE: Final = "/stop_profile"

# Response headers of a sync generation, as the server spells them. HTTP header names are
# case-insensitive; the judge reads them lower-cased (``name.lower()``).
REQUEST_ID_HEADER: Final = "X-Request-Id"
MODEL_HEADER: Final = "X-Model"
INFERENCE_TIME_HEADER: Final = "X-Inference-Time-S"
STAGE_DURATIONS_HEADER: Final = "X-Stage-Durations"
PEAK_MEMORY_HEADER: Final = "X-Peak-Memory-MB"
SERVER_HEADERS: Final = (REQUEST_ID_HEADER, MODEL_HEADER, INFERENCE_TIME_HEADER,
                         STAGE_DURATIONS_HEADER, PEAK_MEMORY_HEADER)

# The reference engine's echo of ``launch.INSTANCE_NONCE_ENV`` on every response (health and
# generations included); vLLM-Omni sends none, and the judge then relies on the socket's owner.
INSTANCE_NONCE_HEADER: Final = "X-Ref2VA-Instance-Nonce"
