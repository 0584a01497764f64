"""The reference engine's request time at the CI size, B0 against lossless-text-kv, in one run.

Runs the engine in-process over ASGI (no port, no subprocess), so the times are the engine's own:
generation and MP4 muxing, real compute only (the reference campaign declares no device time).
Per duration the timed subject is B0's request; lossless-text-kv's, in the benchmark's setup, is
the same-run baseline. Their ratio is what the reference campaign's latency verdicts rest on: B0
embeds the DiT's cross-attention context and projects its K/V at every step, the candidate once
per request, so the ratio is about 0.33 on the 5 s tracks (below the 0.5 target) and about 0.6
on the 15 s tracks (not expected to reach it: the skipped work does not grow with the clip's
length, the DiT's does). The request is the campaign's: 112x64, 50 steps, the shipped
reference image and audio.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from benchmarks.support import ROOT, Ratio, median, median_of
from engine.reference.app import create_app
from engine.reference.pipeline.costs import COST_MODEL_ENV
from engine.reference.profile import load_profile

CAMPAIGN = ROOT / "fixtures/campaigns/reference.yaml"
PROFILES = ROOT / "engine/profiles/reference"
INPUTS = ROOT / "fixtures/inputs"
# What reference.yaml's comments and the README expect (the 15 s ratio is not a target).
EXPECTED = {"124": ("<= 0.5 (about 0.33)", 0.5), "362": ("none (about 0.6 expected)", None)}
# Read once: a YAML parse inside the timed request would be timed too (about 35 ms).
TRACK_REQUEST = yaml.safe_load(CAMPAIGN.read_text())["tracks"]["5s-lossless"]["request"]
DECLARED = (yaml.safe_load(CAMPAIGN.read_text()).get("environment") or {}).get(COST_MODEL_ENV)


class Engine:
    """One in-process reference engine for a profile, its requests sent over ASGI."""

    def __init__(self, profile: Path) -> None:
        self.app = create_app(load_profile(profile))
        self.loop = asyncio.new_event_loop()
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app),
                                        base_url="http://engine", timeout=600)

    def request(self, frames: str) -> None:
        track = TRACK_REQUEST
        data = {"prompt": (INPUTS / "prompt.txt").read_text().strip(), "num_frames": frames,
                **{k: str(track[k]) for k in ("width", "height", "fps", "num_inference_steps",
                                               "flow_shift")}, "seed": str(track["seeds"][0])}
        files = [("input_references", ("reference.png", (INPUTS / "reference.png").read_bytes(),
                                       "image/png")),
                 ("input_references", ("reference.wav", (INPUTS / "reference.wav").read_bytes(),
                                       "audio/wav"))]
        response = self.loop.run_until_complete(
            self.client.post("/v1/videos/sync", data=data, files=files))
        assert response.status_code == 200, response.text[:500]

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()
        self.app.state.engine.runner.shutdown()


@pytest.fixture(scope="module")
def engines() -> Any:
    environment = yaml.safe_load(CAMPAIGN.read_text()).get("environment") or {}
    with pytest.MonkeyPatch.context() as patch:
        # The campaign's environment, as its engines get it: no declared device time unless it
        # sets one (then it is reported in the benchmark's note).
        patch.delenv(COST_MODEL_ENV, raising=False)
        for name, value in environment.items():
            patch.setenv(name, value)
        pair = (Engine(PROFILES / "b0.yaml"), Engine(PROFILES / "lossless-text-kv.yaml"))
    yield pair
    for engine in pair:
        engine.close()


@pytest.mark.parametrize("frames", ["124", "362"], ids=["5s", "15s"])
def test_reference_engine_b0_vs_lossless_text_kv(
    benchmark: Any, engines: tuple[Engine, Engine], frames: str,
    record_ratio: Callable[[Ratio], None], pytestconfig: pytest.Config,
) -> None:
    b0, text_kv = engines
    candidate_s: list[float] = []

    def timed_candidate() -> None:
        start = time.perf_counter()
        text_kv.request(frames)
        candidate_s.append(time.perf_counter() - start)

    b0.request(frames)  # one untimed request each: lazy imports, allocator, page cache
    text_kv.request(frames)
    benchmark.pedantic(b0.request, args=(frames,), setup=timed_candidate,
                       rounds=max(3, pytestconfig.getoption("bench_rounds") // 2), iterations=1)
    target, limit = EXPECTED[frames]
    theirs, ours = median(candidate_s), median_of(benchmark)
    record_ratio(Ratio(
        f"reference engine {frames} frames", "lossless-text-kv", theirs, "b0", ours, target,
        None if limit is None else theirs / ours <= limit,
        f"B0 {ours:.2f} s per request at 112x64, 50 steps, "
        + (f"declared device time {DECLARED}" if DECLARED else "real compute only")))
