"""The tensor comparator's throughput against `cmp -s` on the same dump sets, in one run.

Writes two dump folders with identical content (F32 and BF16 tensors of 128-256 MiB, about
1 GiB per folder by default), then alternates rounds of `cmp -s` over every file pair (one
subprocess per pair, the whole pass timed) and `compare_dumps` over the two folders, and prints
the median throughput of each and their ratio. Target: comparator/cmp >= 0.8. Afterwards it flips
one bit in one tensor and shows the diagnostics the comparator gives for it, and how long that
took.

Both read the files right after they were written, so both read from the page cache; the numbers
measure comparison, not the disk.

    .venv/bin/python benchmarks/compare_tensors.py [--dir /scratch] [--mib 1024] [--rounds 5]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ref2va_accept.tensors import (  # noqa: E402
    compare_dumps,
    read_header,
    write_tensor_file,
)

log = logging.getLogger("benchmarks.compare_tensors")
GIB = float(1 << 30)
MIB = 1 << 20
# (point, dtype, MiB): shaped like a Ref2VA dump, a few large latents and activations.
LAYOUT = (("cond.text", "F32", 128), ("dit.step000", "BF16", 128), ("dit.step025", "BF16", 128),
          ("dit.step049", "BF16", 128), ("latent.video", "F32", 256),
          ("decoded.video", "F32", 256))


def _write_dumps(root: Path, scale: float, seed: int) -> tuple[Path, Path, int]:
    """Two folders holding the same tensors (separate files); the bytes in one folder."""
    rng = np.random.default_rng(seed)
    folder_a, folder_b = root / "a", root / "b"
    folder_a.mkdir()
    folder_b.mkdir()
    total = 0
    for point, dtype, mib in LAYOUT:
        nbytes = max(4096, int(mib * scale) * MIB // 4096 * 4096)
        itemsize = 2 if dtype == "BF16" else 4
        raw = np.frombuffer(rng.bytes(nbytes), np.uint16 if dtype == "BF16" else np.float32)
        array = raw.reshape(-1, 1024)
        for folder in (folder_a, folder_b):
            write_tensor_file(folder / f"{point}.safetensors", {point: array},
                              dtypes={point: dtype})
        total += array.size * itemsize
        del raw, array
    return folder_a, folder_b, total


def _cmp_pass(folder_a: Path, folder_b: Path) -> float:
    start = time.perf_counter()
    for file_a in sorted(folder_a.iterdir()):
        done = subprocess.run(["cmp", "-s", str(file_a), str(folder_b / file_a.name)])
        if done.returncode != 0:
            raise SystemExit(f"cmp found {file_a.name} different; the dumps should be equal")
    return time.perf_counter() - start


def _comparator_pass(folder_a: Path, folder_b: Path) -> float:
    start = time.perf_counter()
    result = compare_dumps(folder_a, folder_b)
    elapsed = time.perf_counter() - start
    if not result.equal:
        raise SystemExit(f"comparator found {result.first_divergence} different")
    return elapsed


def _flip_one_bit(path: Path) -> None:
    # The very last byte: a difference in the last element of the last chunk of the tensor.
    with path.open("r+b") as handle:
        handle.seek(-1, 2)
        last = handle.read(1)[0]
        handle.seek(-1, 2)
        handle.write(bytes([last ^ 0x01]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="scratch folder (default: a temporary one)")
    parser.add_argument("--mib", type=int, default=1024, help="MiB per dump folder")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if shutil.which("cmp") is None:
        raise SystemExit("cmp is not on PATH")
    scale = args.mib / sum(mib for _, _, mib in LAYOUT)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="compare-tensors-") as tmp:
        folder_a, folder_b, size = _write_dumps(Path(tmp), scale, args.seed)
        pair_gib = 2 * size / GIB
        log.info("dump sets: %d files per side, %.2f GiB per side, %.2f GiB read per pass; "
                 "written just before, so both tools read from the page cache",
                 len(LAYOUT), size / GIB, pair_gib)
        _cmp_pass(folder_a, folder_b)  # one untimed pass each, so that both start warm
        _comparator_pass(folder_a, folder_b)
        cmp_times, ours = [], []
        for round_ in range(args.rounds):
            cmp_times.append(_cmp_pass(folder_a, folder_b))
            ours.append(_comparator_pass(folder_a, folder_b))
            log.info("round %d: cmp %.3f s, comparator %.3f s", round_ + 1, cmp_times[-1],
                     ours[-1])
        cmp_rate = pair_gib / statistics.median(cmp_times)
        our_rate = pair_gib / statistics.median(ours)
        log.info("cmp -s:     %.2f GiB/s (median of %d passes)", cmp_rate, args.rounds)
        log.info("comparator: %.2f GiB/s (median of %d passes)", our_rate, args.rounds)
        log.info("ratio comparator/cmp: %.2f (target >= 0.8)", our_rate / cmp_rate)

        last = sorted(folder_b.iterdir(), key=lambda p: p.stat().st_size)[-1]
        _flip_one_bit(last)
        start = time.perf_counter()
        result = compare_dumps(folder_a, folder_b)
        elapsed = time.perf_counter() - start
        log.info("one bit flipped in the last element of %s: found in %.3f s (%.2f GiB/s)",
                 last.name, elapsed, pair_gib / elapsed)
        for point in result.points:
            if not point.equal:
                log.info("  %s", point.summary())
        log.info("  first divergence: %s", result.first_divergence)
        found = result.first_divergence == last.name.removesuffix(".safetensors")

        # A reduction-order change differs almost everywhere: the slow, explaining path.
        point, dtype, _ = LAYOUT[1]
        dense = np.frombuffer(np.random.default_rng(args.seed + 1).bytes(
            (folder_a / f"{point}.safetensors").stat().st_size), np.uint8)
        size_dense = _rewrite_tensor(folder_b / f"{point}.safetensors", dense)
        start = time.perf_counter()
        result = compare_dumps(folder_a, folder_b, [point])
        elapsed = time.perf_counter() - start
        log.info("every element of %s (%s, %.0f MiB) redrawn: explained in %.2f s (%.2f GiB/s)",
                 point, dtype, size_dense / MIB, elapsed, 2 * size_dense / GIB / elapsed)
        log.info("  %s", result.points[0].summary())
        return 0 if found and result.points[0].status == "differs" else 1


def _rewrite_tensor(path: Path, noise: np.ndarray) -> int:
    """Overwrite the data of a one-tensor file with noise, keeping its header; the data size."""
    info = next(iter(read_header(path).values()))
    with path.open("r+b") as handle:
        handle.seek(info.offset)
        handle.write(noise[: info.nbytes].data)
    return int(info.nbytes)


if __name__ == "__main__":
    raise SystemExit(main())
