"""`ref2va-accept compare-tensors A B`: two safetensors files or two dump folders, bit for bit.

Points are reported in pipeline order: a campaign track's frozen ``comparison_points`` order with
``--campaign CAMPAIGN --track T`` (its diagnostics points, each reported even when both sides
lack it), else the documented order of :func:`~ref2va_accept.tensors._comparison.pipeline_order`.
The first divergence is the first point in that order that is not equal.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ref2va_accept.core import EXIT_OK, EXIT_PROBLEM, TensorFileError
from ref2va_accept.tensors import (
    DumpComparison,
    compare_dumps,
    compare_tensor_files,
    dump_points,
    in_order,
)

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", type=Path, help="a safetensors file, or a folder of <point>.safetensors")
    p.add_argument("b", type=Path, help="the same kind as A")
    p.add_argument("--campaign", type=Path, help="with --track: compare in that lossless "
                   "track's frozen comparison_points order")
    p.add_argument("--track", help="a lossless track of --campaign")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")


def _frozen_order(args: argparse.Namespace) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(the whole frozen order, its diagnostics points), or None without --campaign/--track."""
    # Imported here: the campaign model is only needed when one is named.
    from ref2va_accept.planning import plan_option  # noqa: PLC0415

    plan = plan_option(args.campaign, args.track)
    if plan is None:
        return None
    return plan.lossless.order, plan.lossless.diagnostics


def compare(args: argparse.Namespace) -> DumpComparison:
    a, b = Path(args.a), Path(args.b)
    frozen = _frozen_order(args)
    if a.is_dir() and b.is_dir():
        points = None
        if frozen is not None:
            order, diagnostics = frozen
            points = in_order(dump_points(a) | dump_points(b) | set(diagnostics), order)
        return compare_dumps(a, b, points)
    if a.is_dir() or b.is_dir():
        # Names only: an absolute path in a report leaks the host's layout.
        folder, other = (a, b) if a.is_dir() else (b, a)
        raise TensorFileError(f"{folder.name} is a folder but {other.name} is not; "
                              "expected two safetensors files or two dump folders")
    return compare_tensor_files(a, b, None if frozen is None else frozen[0])


def run(args: argparse.Namespace) -> int:
    result = compare(args)
    if args.json:
        sys.stdout.write(json.dumps(result.json_dict(), indent=2) + "\n")
    else:
        for point in result.points:
            sys.stdout.write(point.summary() + "\n")
        if not result.points:
            sys.stdout.write("no tensors found on either side\n")
        elif result.first_divergence is None:
            sys.stdout.write(f"all {len(result.points)} points equal\n")
        else:
            sys.stdout.write(f"first divergence: {result.first_divergence}\n")
    # Nothing compared proves nothing: an empty dump is a problem, not a pass.
    return EXIT_OK if result.points and result.equal else EXIT_PROBLEM
