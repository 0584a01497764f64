"""One TLS context per process for the judge's HTTP clients.

httpx builds a fresh SSL context for every client or transport it is not handed one, loading
the whole CA bundle each time: about 40 ms of CPU, twice per engine start (the health poll and
the timed client), which came to a tenth of the judge's own CPU in suite runs that start many
engines. The engines the judge talks to serve plain HTTP, so the context is never used on them;
it is made once, by httpx itself with its defaults, and handed to every client the judge makes.
"""

from __future__ import annotations

import functools
import ssl


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default context (verified, its CA bundle), made on first use and shared."""
    import httpx  # noqa: PLC0415 - core stays importable without loading httpx

    return httpx.create_ssl_context()
