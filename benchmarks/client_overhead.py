"""What the harness's client adds to the latency it reports, against curl, in one run.

Starts the reference engine, then sends the same small generation request alternately with the
harness's TimedClient and with curl (`time_total`), each on a fresh connection, and prints the
median of the paired differences. Target: at most 1 ms.

    .venv/bin/python benchmarks/client_overhead.py [--pairs 100]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ref2va_accept.client import ClientTimeouts, GenerationRequest, ReferenceFile, TimedClient  # noqa: E402
from ref2va_accept.server import LaunchSpec, free_port, start_instance  # noqa: E402

# A small request: the engine's own time should not drown a millisecond.
FIELDS = {"prompt": "a red ball rolls toward a yellow wall", "width": 32, "height": 32,
          "num_frames": 5, "fps": 24, "num_inference_steps": 2, "seed": 7,
          "extra_params": {"task": "ref2va"}}


def _curl(url: str, image: Path, audio: Path) -> float:
    args = ["curl", "-s", "-o", "/dev/null", "-w", "%{time_total} %{http_code}"]
    for name, value in GenerationRequest.from_values(FIELDS).fields:
        args += ["--form-string", f"{name}={value}"]
    args += ["-F", f"input_references=@{image};type=image/png",
             "-F", f"input_references=@{audio};type=audio/wav", url]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()
    if out[1] != "200":
        raise SystemExit(f"curl got HTTP {out[1]}")
    return float(out[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100)
    args = parser.parse_args()
    image = ROOT / "fixtures/inputs/reference.png"
    audio = ROOT / "fixtures/inputs/reference.wav"
    request = GenerationRequest.from_values(FIELDS, (
        ReferenceFile(image.name, image.read_bytes(), "image/png"),
        ReferenceFile(audio.name, audio.read_bytes(), "audio/wav"),
    ))
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        spec = LaunchSpec(
            arm_id="b0", instance_id="bench", port=port, cwd=ROOT, env={},
            argv=(sys.executable, "-m", "engine.reference", "serve", "--config",
                  str(ROOT / "engine/profiles/reference/b0.yaml"), "--port", str(port)),
            startup_timeout_s=60, shutdown_grace_s=10, log_path=Path(tmp) / "engine.log",
        )
        engine = start_instance(spec)
        try:
            harness: list[float] = []
            curl: list[float] = []
            url = f"{engine.base_url}/v1/videos/sync"
            for i in range(args.pairs + 2):
                # Alternate who goes first, so neither side always meets a just-busy engine.
                curl_s = _curl(url, image, audio) if i % 2 else 0.0
                # A fresh client per request: a new connection, as curl makes one.
                with TimedClient(engine.base_url, ClientTimeouts(request_s=60)) as client:
                    sample, _ = client.generate(request, arm="b0", track="bench", kind="bench",
                                                index=i)
                if not sample.ok or sample.latency_s is None:
                    raise SystemExit(f"harness request failed: {sample.failure} {sample.detail}")
                if not i % 2:
                    curl_s = _curl(url, image, audio)
                if i >= 2:  # the first pairs warm the engine and the page cache
                    harness.append(sample.latency_s)
                    curl.append(curl_s)
        finally:
            audit = engine.stop()
    diffs = [(h - c) * 1000 for h, c in zip(harness, curl, strict=True)]
    median_h, median_c = statistics.median(harness), statistics.median(curl)
    print(f"pairs: {len(diffs)} (interleaved, after 2 warm-up pairs)")
    print(f"median latency: harness {median_h * 1000:.2f} ms, curl {median_c * 1000:.2f} ms, "
          f"ratio {median_h / median_c:.4f}")
    print(f"median paired difference (harness - curl): {statistics.median(diffs):+.3f} ms "
          f"(target <= 1 ms); quartiles {statistics.quantiles(diffs, n=4)[0]:+.3f} / "
          f"{statistics.quantiles(diffs, n=4)[2]:+.3f} ms")
    print(f"engine stopped clean: {audit.clean}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
