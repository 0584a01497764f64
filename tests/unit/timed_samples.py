"""A timed request's sample as the test doubles build it: the evidence's Sample with what a
double does not care about left empty (no server headers, no media file, no request fields)."""

from __future__ import annotations

from typing import Any

from ref2va_accept.evidence import RequestRecord, Sample

NO_REQUEST = RequestRecord(fields={}, references=[])


def timed_sample(sample_id: str, arm: str, track: str, kind: str, index: int, seed: int | None,
                 started_at: str = "t", *, ok: bool, **fields: Any) -> Sample:
    """The sample TimedClient.generate would build, with `fields` (failure, status, latency_s,
    ...) set and every other field as a request that sent nothing special leaves it."""
    empty: dict[str, Any] = {
        "failure": None, "detail": None, "status": None, "latency_s": None, "ttfb_s": None,
        "body_bytes": 0, "sha256": None, "content_type": None, "server_request_id": None,
        "server_model": None, "inference_time_s": None, "stage_durations": None,
        "peak_memory_mb": None, "media_file": None, "extra": {}, "request": NO_REQUEST}
    return Sample(sample_id=sample_id, arm=arm, track=track, kind=kind, index=index, seed=seed,
                  started_at=started_at, ok=ok, **(empty | fields))
