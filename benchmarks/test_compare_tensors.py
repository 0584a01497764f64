"""The tensor comparator's throughput against `cmp -s` on the same dump sets, in one run.

Writes two dump folders with identical content (F32 and BF16 tensors shaped like a Ref2VA dump,
`--bench-mib` per folder, 1 GiB by default), then alternates a `cmp -s` pass over every file pair
(one subprocess per pair, the benchmark's setup) and a `compare_dumps` pass over the two folders
(the timed subject). Both read files written just before, so both read from the page cache: the
numbers measure comparison, not the disk. Target: comparator/cmp throughput at least 0.8, i.e. a
time ratio of at most 1.25. Then one flipped bit and one fully redrawn tensor must be found and
explained.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.support import Ratio, median, median_of
from ref2va_accept.tensors import compare_dumps, read_header, write_tensor_file

GIB = float(1 << 30)
MIB = 1 << 20
# (point, dtype, MiB at the 1 GiB default): a few large latents and activations.
LAYOUT = (("cond.text", "F32", 128), ("dit.step000", "BF16", 128), ("dit.step025", "BF16", 128),
          ("dit.step049", "BF16", 128), ("latent.video", "F32", 256),
          ("decoded.video", "F32", 256))


def write_dumps(root: Path, scale: float) -> tuple[Path, Path, int]:
    """Two folders holding the same tensors (separate files); the bytes in one folder."""
    rng = np.random.default_rng(0)
    folder_a, folder_b = root / "a", root / "b"
    folder_a.mkdir()
    folder_b.mkdir()
    total = 0
    for point, dtype, mib in LAYOUT:
        nbytes = max(4096, int(mib * scale * MIB) // 4096 * 4096)
        raw = np.frombuffer(rng.bytes(nbytes), np.uint16 if dtype == "BF16" else np.float32)
        array = raw.reshape(-1, 1024)
        for folder in (folder_a, folder_b):
            write_tensor_file(folder / f"{point}.safetensors", {point: array},
                              dtypes={point: dtype})
        total += array.nbytes
    return folder_a, folder_b, total


def cmp_pass(folder_a: Path, folder_b: Path) -> None:
    for file_a in sorted(folder_a.iterdir()):
        done = subprocess.run(["cmp", "-s", str(file_a), str(folder_b / file_a.name)])
        assert done.returncode == 0, f"cmp found {file_a.name} different; the dumps are equal"


def comparator_pass(folder_a: Path, folder_b: Path) -> None:
    result = compare_dumps(folder_a, folder_b)
    assert result.equal, f"comparator found {result.first_divergence} different"


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
          ) -> tuple[Path, Path, int]:
    scale = pytestconfig.getoption("bench_mib") / sum(mib for _, _, mib in LAYOUT)
    return write_dumps(tmp_path_factory.mktemp("compare-tensors"), scale)


@pytest.mark.skipif(shutil.which("cmp") is None, reason="cmp is not on PATH")
def test_comparator_vs_cmp(benchmark: Any, dumps: tuple[Path, Path, int],
                           record_ratio: Callable[[Ratio], None],
                           pytestconfig: pytest.Config) -> None:
    folder_a, folder_b, size = dumps
    cmp_times: list[float] = []

    def timed_cmp_pass() -> None:
        start = time.perf_counter()
        cmp_pass(folder_a, folder_b)
        cmp_times.append(time.perf_counter() - start)

    cmp_pass(folder_a, folder_b)  # one untimed pass each, so that both start warm
    comparator_pass(folder_a, folder_b)
    benchmark.pedantic(comparator_pass, args=(folder_a, folder_b), setup=timed_cmp_pass,
                       rounds=pytestconfig.getoption("bench_rounds"), iterations=1)
    ours, theirs = median_of(benchmark), median(cmp_times)
    pair_gib = 2 * size / GIB
    record_ratio(Ratio(
        "comparator", "compare_dumps", ours, "cmp -s", theirs, "time ratio <= 1.25",
        ours / theirs <= 1.25,
        f"{pair_gib / ours:.2f} GiB/s against {pair_gib / theirs:.2f} GiB/s over "
        f"{pair_gib:.2f} GiB per pass"))


def test_comparator_finds_and_explains_differences(dumps: tuple[Path, Path, int],
                                                   tmp_path: Path) -> None:
    """Not timed against a baseline: the diagnostics on a flipped bit and a redrawn tensor."""
    source_a, source_b, _ = dumps
    folder_b = tmp_path / "b"
    shutil.copytree(source_b, folder_b)
    last = sorted(folder_b.iterdir(), key=lambda p: p.stat().st_size)[-1]
    with last.open("r+b") as handle:  # the very last byte: the last element of the last chunk
        handle.seek(-1, 2)
        byte = handle.read(1)[0]
        handle.seek(-1, 2)
        handle.write(bytes([byte ^ 0x01]))
    start = time.perf_counter()
    result = compare_dumps(source_a, folder_b)
    elapsed = time.perf_counter() - start
    print(f"one bit flipped in {last.name}: found in {elapsed:.3f} s")
    assert result.first_divergence == last.name.removesuffix(".safetensors")

    point = LAYOUT[1][0]  # a reduction-order change differs almost everywhere: the slow path
    info = next(iter(read_header(folder_b / f"{point}.safetensors").values()))
    with (folder_b / f"{point}.safetensors").open("r+b") as handle:
        handle.seek(info.offset)
        handle.write(np.random.default_rng(1).bytes(info.nbytes))
    start = time.perf_counter()
    redrawn = compare_dumps(source_a, folder_b, [point]).points[0]
    print(f"every element of {point} redrawn: explained in {time.perf_counter() - start:.2f} s:"
          f" {redrawn.summary()}")
    assert redrawn.status == "differs"
