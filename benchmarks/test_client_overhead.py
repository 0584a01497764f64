"""What the harness's client adds to the latency it reports, against curl, in one run.

Starts the reference engine, then sends the same small generation request alternately with curl
(`time_total`, in the benchmark's untimed setup) and with the harness's TimedClient (the timed
subject), each on a fresh connection. The figure of merit is the median of the paired differences
between the latency the harness reports and curl's: target at most 1 ms. The ratio of the median
latencies is printed beside it.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from benchmarks.support import ROOT, Ratio, median
from ref2va_accept.engines import EngineInstance, LaunchSpec, free_port, start_instance
from ref2va_accept.timing import ClientTimeouts, GenerationRequest, ReferenceFile, TimedClient

# A small request: the engine's own time should not drown a millisecond.
FIELDS = {"prompt": "a red ball rolls toward a yellow wall", "width": 32, "height": 32,
          "num_frames": 5, "fps": 24, "num_inference_steps": 2, "seed": 7,
          "extra_params": {"task": "ref2va"}}
IMAGE = ROOT / "fixtures/inputs/reference.png"
AUDIO = ROOT / "fixtures/inputs/reference.wav"
WARM_PAIRS = 2  # the first pairs warm the engine and the page cache


def curl_time(url: str) -> float:
    args = ["curl", "-s", "-o", "/dev/null", "-w", "%{time_total} %{http_code}"]
    for name, value in GenerationRequest.from_values(FIELDS).fields:
        args += ["--form-string", f"{name}={value}"]
    args += ["-F", f"input_references=@{IMAGE};type=image/png",
             "-F", f"input_references=@{AUDIO};type=audio/wav", url]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()
    assert out[1] == "200", f"curl got HTTP {out[1]}"
    return float(out[0])


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineInstance]:
    port = free_port()
    spec = LaunchSpec(
        arm_id="b0", instance_id="bench", port=port, cwd=ROOT, env={},
        argv=(sys.executable, "-m", "engine.reference", "serve", "--config",
              str(ROOT / "engine/profiles/reference/b0.yaml"), "--port", str(port)),
        startup_timeout_s=60, shutdown_grace_s=10,
        log_path=tmp_path_factory.mktemp("engine") / "engine.log",
    )
    instance = start_instance(spec)
    yield instance
    audit = instance.stop()
    assert audit.clean, audit.problems


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not on PATH")
def test_client_overhead_vs_curl(benchmark: Any, engine: EngineInstance,
                                 record_ratio: Callable[[Ratio], None],
                                 pytestconfig: pytest.Config) -> None:
    request = GenerationRequest.from_values(FIELDS, (
        ReferenceFile(IMAGE.name, IMAGE.read_bytes(), "image/png"),
        ReferenceFile(AUDIO.name, AUDIO.read_bytes(), "audio/wav"),
    ))
    url = f"{engine.base_url}/v1/videos/sync"
    harness: list[float] = []
    curl: list[float] = []

    def one_harness_request() -> None:
        # A fresh client per request: a new connection, as curl makes one.
        with TimedClient(engine.base_url, ClientTimeouts(request_s=60)) as client:
            sample, _ = client.generate(request, arm="b0", track="bench", kind="bench",
                                        index=len(harness))
        assert sample.ok and sample.latency_s is not None, (sample.failure, sample.detail)
        harness.append(sample.latency_s)

    def one_curl_request() -> None:
        curl.append(curl_time(url))

    for _ in range(WARM_PAIRS):
        one_curl_request()
        one_harness_request()
    harness.clear()
    curl.clear()
    benchmark.pedantic(one_harness_request, setup=one_curl_request,
                       rounds=pytestconfig.getoption("bench_pairs"), iterations=1)
    diffs = [(h - c) * 1000 for h, c in zip(harness, curl, strict=True)]
    paired = statistics.median(diffs)
    quartiles = statistics.quantiles(diffs, n=4)
    record_ratio(Ratio(
        "client overhead", "harness-reported latency", median(harness), "curl time_total",
        median(curl), "median paired difference <= 1 ms", paired <= 1.0,
        f"median paired difference {paired:+.3f} ms over {len(diffs)} pairs (quartiles "
        f"{quartiles[0]:+.3f} / {quartiles[2]:+.3f} ms)"))

