"""The timed client against failing transports: every outcome becomes a recorded sample."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

from ref2va_accept.core import tls_context
from ref2va_accept.timing import ClientTimeouts, GenerationRequest, ReferenceFile, TimedClient

pytestmark = pytest.mark.fast

MP4 = b"\x00\x00\x00\x18ftypmp42" + b"x" * 100
HEADERS = {
    "content-type": "video/mp4",
    "x-request-id": "video_sync-abc",
    "x-model": "m",
    "x-inference-time-s": "1.250",
    "x-stage-durations": '{"dit":1.0}',
    "x-peak-memory-mb": "512.000",
}


def _request() -> GenerationRequest:
    return GenerationRequest.from_values(
        {"prompt": "a red ball", "seed": 42, "generate_sound": True,
         "extra_params": {"task": "ref2va"}, "guidance_scale": None},
        (ReferenceFile("ref.png", b"\x89PNG", "image/png"),
         ReferenceFile("ref.wav", b"RIFF", "audio/wav")),
    )


def _ok(content: bytes = MP4, headers: dict[str, str] = HEADERS,
        status: int = 200) -> httpx.Response:
    # A streamed body, as a real transport delivers it (a `content=` body counts as consumed).
    return httpx.Response(status, headers=headers, stream=httpx.ByteStream(content))


def _client(handler: Callable[[httpx.Request], httpx.Response]) -> TimedClient:
    return TimedClient("http://engine", ClientTimeouts(request_s=30.0),
                       transport=httpx.MockTransport(handler))


def _generate(handler: Callable[[httpx.Request], httpx.Response]):  # type: ignore[no-untyped-def]
    with _client(handler) as client:
        return client.generate(_request(), arm="b0", track="5s-lossless", kind="measured",
                               index=0, seed=42)


def test_success_records_latency_hash_and_server_headers() -> None:
    sample, body = _generate(lambda request: _ok())
    assert sample.ok and body == MP4
    assert sample.status == 200 and sample.body_bytes == len(MP4)
    assert sample.latency_s is not None and sample.latency_s >= 0
    assert sample.ttfb_s is not None and sample.ttfb_s <= sample.latency_s
    assert sample.server_request_id == "video_sync-abc"
    assert sample.inference_time_s == 1.25 and sample.peak_memory_mb == 512.0
    assert sample.stage_durations == {"dit": 1.0}
    assert len(sample.sha256 or "") == 64


def test_request_is_multipart_with_vllm_field_names_and_mime_types() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _ok()

    _generate(handler)
    # The connection is opened with GET /health before the clock; then the timed POST.
    assert [r.method for r in seen] == ["GET", "POST"]
    request = seen[1]
    body = request.content
    assert request.url.path == "/v1/videos/sync"
    assert request.headers["content-type"].startswith("multipart/form-data")
    assert b'name="prompt"' in body and b"a red ball" in body
    assert b'name="generate_sound"\r\n\r\ntrue' in body
    assert b'name="extra_params"\r\n\r\n{"task":"ref2va"}' in body
    assert b'name="guidance_scale"' not in body  # None is not sent
    assert body.count(b'name="input_references"') == 2
    assert b"Content-Type: image/png" in body and b"Content-Type: audio/wav" in body


def test_non_200_is_a_failed_sample_with_the_error_body() -> None:
    sample, _ = _generate(lambda r: _ok(b'{"error": {"message": "boom"}}',
                                               {"content-type": "application/json"}, 500))
    assert not sample.ok and sample.failure == "http_status" and sample.status == 500
    assert "boom" in (sample.detail or "")
    assert sample.latency_s is not None


def test_timeout_is_a_failed_sample_not_an_exception() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    sample, body = _generate(handler)
    assert not sample.ok and sample.failure == "timeout" and body == b""
    assert sample.latency_s is None
    assert "30 s" in (sample.detail or "")


def test_refused_connection_is_a_failed_sample() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    sample, _ = _generate(handler)
    assert not sample.ok and sample.failure == "connect_failed"


def test_connection_lost_before_the_response_is_a_failed_sample() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("server disconnected", request=request)

    sample, _ = _generate(handler)
    assert not sample.ok and sample.failure == "connection_lost" and sample.status is None


class _BrokenStream(httpx.SyncByteStream):
    def __iter__(self) -> Iterator[bytes]:
        yield MP4[:40]
        raise httpx.RemoteProtocolError("peer closed connection without sending complete body")


def test_body_cut_mid_stream_is_truncated() -> None:
    sample, body = _generate(lambda r: httpx.Response(200, headers=HEADERS,
                                                      stream=_BrokenStream()))
    assert not sample.ok and sample.failure == "truncated_body" and sample.status == 200
    assert body == MP4[:40] and "40 body bytes" in (sample.detail or "")


def test_body_shorter_than_content_length_is_truncated() -> None:
    class Short(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield MP4[:10]

    headers = HEADERS | {"content-length": str(len(MP4))}
    sample, _ = _generate(lambda r: httpx.Response(200, headers=headers, stream=Short()))
    assert not sample.ok and sample.failure == "truncated_body"


def test_empty_200_body_is_a_failure() -> None:
    sample, _ = _generate(lambda r: _ok(b""))
    assert not sample.ok and sample.failure == "empty_body"


def test_wrong_content_type_is_a_failure() -> None:
    headers = HEADERS | {"content-type": "application/json"}
    sample, _ = _generate(lambda r: _ok(b"{}", headers))
    assert not sample.ok and sample.failure == "content_type"


def test_unparsable_server_header_is_kept_verbatim() -> None:
    headers = HEADERS | {"x-inference-time-s": "soon"}
    sample, _ = _generate(lambda r: _ok(MP4, headers))
    assert sample.ok and sample.inference_time_s is None
    assert sample.extra == {"unparsed_headers": {"x-inference-time-s": "soon"}}


@pytest.mark.parametrize("value, text", [(True, "true"), (False, "false"), (3, "3"),
                                         (1.5, "1.5"), ({"b": 1, "a": 2}, '{"a":2,"b":1}')])
def test_form_values_are_rendered_stably(value: object, text: str) -> None:
    assert GenerationRequest.from_values({"f": value}).field("f") == text


def _counting_contexts(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every SSL context made from here on (httpx makes its default one with
    ssl.create_default_context), counted; the judge's shared one starts unmade."""
    import ssl

    made: list[object] = []
    original = ssl.create_default_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        context = original(*args, **kwargs)  # type: ignore[arg-type]
        made.append(context)
        return context

    monkeypatch.setattr(ssl, "create_default_context", counted)
    tls_context.cache_clear()
    return made


def test_the_judges_http_clients_share_one_tls_context(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx loads its whole CA bundle for each client it is not handed a context: ~40 ms of CPU,
    # twice per engine start. The timed client (its own transport) makes none after the first.
    made = _counting_contexts(monkeypatch)
    for _ in range(3):
        TimedClient("http://engine", ClientTimeouts(request_s=30.0)).close()
    assert len(made) == 1 and made[0] is tls_context()
    # Planted: a client made with httpx's default makes a context of its own, and is seen.
    httpx.Client().close()
    assert len(made) == 2
    tls_context.cache_clear()
