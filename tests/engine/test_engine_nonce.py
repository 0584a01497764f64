"""The reference engine echoes the judge's per-instance nonce on every response (issue 13)."""

from __future__ import annotations

import pytest

from engine.reference.app import create_app
from engine.reference.generator import GeneratedMedia, GenerationSpec, StepMonitor
from engine.reference.profile import load_profile
from ref2va_contract.api import INSTANCE_NONCE_HEADER
from ref2va_contract.launch import INSTANCE_NONCE_ENV
from tests.engine.asgi_engine import AsgiEngine
from tests.engine.conftest import B0_PROFILE

pytestmark = pytest.mark.engine

FORM = {"prompt": "p", "width": "32", "height": "32", "num_frames": "5", "seed": "1"}


class BrokenGenerator:
    def generate(self, spec: GenerationSpec, monitor: StepMonitor) -> GeneratedMedia:
        raise RuntimeError("device fell over")


def _engine() -> AsgiEngine:
    return AsgiEngine(create_app(load_profile(B0_PROFILE), generator=BrokenGenerator()))


def test_every_response_carries_the_instance_nonce(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(INSTANCE_NONCE_ENV, "c0ffee")
    engine = _engine()
    try:
        health = engine.get("/health")
        generation = engine.request("POST", "/v1/videos/sync", data=FORM)  # an error answer too
        missing = engine.get("/no-such-route")
    finally:
        engine.close()
    assert health.status_code == 200
    for answer in (health, generation, missing):
        assert answer.headers.get(INSTANCE_NONCE_HEADER) == "c0ffee", answer.headers


def test_without_a_nonce_no_header_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(INSTANCE_NONCE_ENV, raising=False)
    engine = _engine()
    try:
        health = engine.get("/health")
    finally:
        engine.close()
    assert INSTANCE_NONCE_HEADER not in health.headers
