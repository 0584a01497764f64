"""An engine app driven in-process over ASGI, with a synchronous face for plain tests.

starlette's TestClient is deprecated with the installed httpx, so requests go through
``httpx.ASGITransport`` on an event loop this object owns; background job tasks advance
whenever a request runs the loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi import FastAPI


class AsgiEngine:
    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._loop = asyncio.new_event_loop()
        self._client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://engine", timeout=60.0
        )

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        return self._loop.run_until_complete(self._client.request(method, url, **kwargs))

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    def close(self) -> None:
        try:
            self._loop.run_until_complete(self._client.aclose())
        finally:
            self.app.state.engine.runner.shutdown()
            self._loop.close()
