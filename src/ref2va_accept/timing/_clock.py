"""The timed multipart request: what the suite calls latency is measured here and nowhere else.

The clock (monotonic) starts just before the request is handed to the transport and stops after
the last body byte arrived. Building the multipart body, opening the connection, hashing and
writing the MP4 happen outside the clock. Every outcome, including non-200, timeouts, lost
connections and truncated bodies, comes back as the evidence's Sample with a reason; the harness
never loses a sample to an exception.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from ref2va_accept.core import tls_context
from ref2va_accept.evidence import RequestRecord, Sample
from ref2va_contract.api import (
    HEALTH_ROUTE,
    INFERENCE_TIME_HEADER,
    MODEL_HEADER,
    PEAK_MEMORY_HEADER,
    REQUEST_ID_HEADER,
    STAGE_DURATIONS_HEADER,
    SYNC_VIDEO_ROUTE,
)

# The server's response headers (lower-cased, as httpx hands them) -> the Sample field they fill.
SERVER_HEADERS = {
    REQUEST_ID_HEADER.lower(): "server_request_id",
    MODEL_HEADER.lower(): "server_model",
    INFERENCE_TIME_HEADER.lower(): "inference_time_s",
    STAGE_DURATIONS_HEADER.lower(): "stage_durations",
    PEAK_MEMORY_HEADER.lower(): "peak_memory_mb",
}
_ERROR_EXCERPT = 500


@dataclass(frozen=True)
class ReferenceFile:
    """One reference file part, sent as a repeated `input_references` part (kind by MIME type)."""

    filename: str
    content: bytes
    mime: str


@dataclass(frozen=True)
class GenerationRequest:
    """A ready-to-send request: form fields in a fixed order and the reference files."""

    fields: tuple[tuple[str, str], ...]
    references: tuple[ReferenceFile, ...] = ()

    @staticmethod
    def from_values(
        values: Mapping[str, Any], references: tuple[ReferenceFile, ...] = ()
    ) -> GenerationRequest:
        fields: list[tuple[str, str]] = []
        for name, value in values.items():
            if value is None:
                continue
            if isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, dict | list):
                text = json.dumps(value, separators=(",", ":"), sort_keys=True)
            else:
                text = str(value)
            fields.append((name, text))
        return GenerationRequest(tuple(fields), references)

    def field(self, name: str) -> str | None:
        return next((v for k, v in self.fields if k == name), None)

    def describe(self) -> RequestRecord:
        """The request as the evidence records it (file contents by hash, not bytes)."""
        return RequestRecord.model_validate({
            "fields": dict(self.fields),
            "references": [
                {"filename": r.filename, "mime": r.mime, "bytes": len(r.content),
                 "sha256": hashlib.sha256(r.content).hexdigest()}
                for r in self.references
            ],
        })


@dataclass(frozen=True)
class Timing:
    """Where one request ended up, before it becomes a Sample."""

    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    latency_s: float | None = None
    ttfb_s: float | None = None
    failure: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class ClientTimeouts:
    request_s: float
    connect_s: float = 10.0


def _server_fields(headers: Mapping[str, str]) -> dict[str, Any]:
    """The server's own timing headers (None where absent: the sample writes every key); an
    unparsable value is kept verbatim under `extra`."""
    out: dict[str, Any] = dict.fromkeys(SERVER_HEADERS.values()) | {"extra": {}}
    unparsed: dict[str, str] = {}
    for header, name in SERVER_HEADERS.items():
        raw = headers.get(header)
        if raw is None:
            continue
        if name in ("inference_time_s", "peak_memory_mb"):
            try:
                out[name] = float(raw)
            except ValueError:
                unparsed[header] = raw
        elif name == "stage_durations":
            try:
                out[name] = json.loads(raw)
            except ValueError:
                unparsed[header] = raw
        else:
            out[name] = raw
    if unparsed:
        out["extra"] = {"unparsed_headers": unparsed}
    return out


class TimedClient:
    """Sends generation requests to one engine instance and times them."""

    def __init__(
        self,
        base_url: str,
        timeouts: ClientTimeouts,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeouts = timeouts
        # The read timeout is the whole request budget: a sync generation sends nothing until the
        # MP4 is ready, and a total deadline is enforced on top while the body streams.
        if transport is None:
            # TCP_NODELAY as curl sets it: without it, the body written after the headers can
            # wait on a delayed ACK, and that wait would be reported as engine latency.
            transport = httpx.HTTPTransport(
                verify=tls_context(),
                socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
            )
        self._client = httpx.Client(
            base_url=self.base_url,
            transport=transport,
            verify=tls_context(),
            timeout=httpx.Timeout(
                connect=timeouts.connect_s,
                read=timeouts.request_s,
                write=timeouts.request_s,
                pool=timeouts.connect_s,
            ),
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> TimedClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open_connection(self) -> None:
        """Open the keep-alive connection before the clock starts.

        Connection setup costs Python's HTTP stack about 0.7 ms more than curl on loopback; it is
        the harness's work, not the engine's, so it stays outside the reported latency. A failure
        here is not reported: the timed request that follows records it.
        """
        with contextlib.suppress(httpx.HTTPError):
            self._client.get(HEALTH_ROUTE, timeout=self.timeouts.connect_s).read()

    def timed_post(self, route: str, request: GenerationRequest) -> Timing:
        """POST the request as multipart/form-data and time it; never raises for I/O faults."""
        files = [
            ("input_references", (r.filename, r.content, r.mime)) for r in request.references
        ]
        # Multipart encoding is done before the clock starts: it is the harness's work.
        built = self._client.build_request(
            "POST", route, data=dict(request.fields), files=files or None
        )
        built.read()
        self._open_connection()
        deadline_s = self.timeouts.request_s
        status: int | None = None
        headers: Mapping[str, str] = {}
        chunks: list[bytes] = []
        ttfb: float | None = None
        t0 = time.perf_counter()
        try:
            response = self._client.send(built, stream=True)
            try:
                ttfb = time.perf_counter() - t0
                status = response.status_code
                headers = dict(response.headers)
                for chunk in response.iter_raw():
                    chunks.append(chunk)
                    if time.perf_counter() - t0 > deadline_s:
                        raise httpx.ReadTimeout("request deadline exceeded while reading body")
                t_end = time.perf_counter()
            finally:
                response.close()
        except httpx.TimeoutException as exc:
            elapsed = time.perf_counter() - t0
            phase = "connect" if isinstance(exc, httpx.ConnectTimeout) else "response"
            return Timing(status, headers, b"".join(chunks), None, ttfb, "timeout",
                          f"no complete response within {deadline_s:g} s ({phase} phase, "
                          f"gave up after {elapsed:.3f} s)")
        except httpx.ConnectError as exc:
            return Timing(None, {}, b"", None, None, "connect_failed",
                          f"cannot connect to the engine: {exc}")
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            body = b"".join(chunks)
            reason = "truncated_body" if status is not None else "connection_lost"
            return Timing(status, headers, body, None, ttfb, reason,
                          f"connection ended after {len(body)} body bytes: {exc}")
        body = b"".join(chunks)
        latency = t_end - t0
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) != len(body):
            return Timing(status, headers, body, None, ttfb, "truncated_body",
                          f"Content-Length {declared} but {len(body)} bytes arrived")
        if status != 200:
            excerpt = body[:_ERROR_EXCERPT].decode("utf-8", errors="replace")
            return Timing(status, headers, body, latency, ttfb, "http_status",
                          f"HTTP {status}: {excerpt}")
        if not body:
            return Timing(status, headers, body, latency, ttfb, "empty_body", "HTTP 200, no body")
        return Timing(status, headers, body, latency, ttfb)

    def generate(
        self,
        request: GenerationRequest,
        *,
        arm: str,
        track: str,
        kind: str,
        index: int,
        seed: int | None = None,
    ) -> tuple[Sample, bytes]:
        """One timed sync generation. Returns the sample (the request as sent with it) and the
        body (the MP4 when ok)."""
        started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        timing = self.timed_post(SYNC_VIDEO_ROUTE, request)
        content_type = timing.headers.get("content-type")
        failure, detail = timing.failure, timing.detail
        if failure is None and content_type is not None and "video/mp4" not in content_type:
            failure, detail = "content_type", f"expected video/mp4, got {content_type}"
        sample = Sample(
            sample_id=uuid.uuid4().hex[:12],
            arm=arm,
            track=track,
            kind=kind,
            index=index,
            seed=seed,
            started_at=started_at,
            ok=failure is None,
            failure=failure,
            detail=detail,
            status=timing.status,
            latency_s=timing.latency_s,
            ttfb_s=timing.ttfb_s,
            body_bytes=len(timing.body),
            sha256=hashlib.sha256(timing.body).hexdigest() if timing.body else None,
            content_type=content_type,
            media_file=None,
            request=request.describe(),
            **_server_fields(timing.headers),
        )
        return sample, timing.body
