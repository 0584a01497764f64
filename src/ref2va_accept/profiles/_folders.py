"""A folder of profiles, read rank by rank: which ranks profiled which steps, what is missing,
and each rank's :class:`RankProfile`, whatever wrote it.

Under the folder (searched recursively) a rank's profile is one of:

- ``trace_rank<N>.json[.gz]``: a Chrome trace (torch's profiler: the reference engine on CPU,
  vLLM-Omni on CUDA);
- a ``<worker>_<pid>_<stamp>_ascend_pt`` folder (torch_npu's profiler on the 910C), its rank in
  the name of its ``profiler_info_<N>.json``; analysed when it holds ``ASCEND_PROFILER_OUTPUT/``
  (text files, or the database ``ascend_pytorch_profiler_<N>.db``). A folder not analysed yet is
  analysed here, in a child process, where torch_npu imports
  (``torch_npu.profiler.profiler.analyse``); where it does not, the rank is ``not_analysed`` with
  the one command that analyses it.

A rank expected but not found is ``missing``, a rank whose files cannot be read ``unreadable``:
either keeps the profile open. Nothing is averaged over ranks here.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ref2va_accept.evidence import Profile, Profiled, RankCoverage, RankProfile
from ref2va_accept.profiles._chrome import TRACE_FILE, read_chrome_trace
from ref2va_accept.profiles._files import ProfileReadError, read_json
from ref2va_accept.profiles._npu_db import DB_FILE, read_npu_db
from ref2va_accept.profiles._npu_text import OUTPUT_DIR, read_npu_text

__all__ = ["ANALYSE_TIMEOUT_S", "Found", "ProfilesRead", "analyse_command", "find_profiles",
           "metadata_ranks", "read_profiles"]

NPU_FOLDER = re.compile(r"_ascend_pt$")
INFO_FILE = re.compile(r"^profiler_info_(\d+)\.json$")
ANALYSE_TIMEOUT_S = 3600.0
NO_ANALYSIS = "REF2VA_NO_PROFILE_ANALYSIS"


@dataclass
class Found:
    """One rank's profile as found on disk, before it is read."""

    rank: int
    kind: str  # "chrome" | "npu_text" | "npu_db" | "npu_raw"
    path: Path


@dataclass
class ProfilesRead:
    """A folder's profiles: per expected rank its coverage, and each rank read."""

    coverage: list[RankCoverage]
    ranks: list[RankProfile]
    problems: list[str] = field(default_factory=list)

    @property
    def ranks_found(self) -> list[int]:
        return sorted(r.rank for r in self.ranks)

    @property
    def complete(self) -> bool:
        return not self.problems and all(c.status == "profiled" for c in self.coverage)

    def profile(self, *, track: str, arm: str, expected: Sequence[int], instance: str,
                problems: Sequence[str] = (), profiler_config: Mapping[str, object] | None = None,
                warmups: Sequence[float | None] = (), profiled: Profiled | None = None
                ) -> Profile:
        """The arm's evidence entry: these ranks, with the profiling's own ``problems`` ahead of
        the reading's; summarized only when every expected rank was read and nothing went
        wrong."""
        return Profile(track=track, arm=arm, profiler_config=dict(profiler_config or {}),
                       warmups=list(warmups), profiled=profiled,
                       problems=[*problems, *self.problems], instance=instance,
                       ranks_expected=list(expected), ranks_found=self.ranks_found,
                       coverage=self.coverage, ranks=self.ranks,
                       status="summarized" if self.complete and not problems else "open")


def analyse_command(folder: Path | str) -> str:
    return ("python -c \"from torch_npu.profiler.profiler import analyse; "
            f"analyse('{folder}')\"")


def _npu_rank(folder: Path) -> int | None:
    for child in folder.iterdir():
        match = INFO_FILE.match(child.name)
        if match:
            return int(match.group(1))
    return None


def _npu_kind(folder: Path, rank: int) -> tuple[str, Path]:
    output = folder / OUTPUT_DIR
    if (output / "kernel_details.csv").is_file() or (output / "trace_view.json").is_file():
        return "npu_text", folder
    databases = sorted(p for p in output.glob("*.db") if DB_FILE.match(p.name)) \
        if output.is_dir() else []
    if databases:
        named = [p for p in databases if p.name == f"ascend_pytorch_profiler_{rank}.db"]
        return "npu_db", (named or databases)[0]
    return "npu_raw", folder


def find_profiles(folder: Path) -> tuple[list[Found], list[str]]:
    """Every rank's profile under ``folder`` and what could not be placed (one line each)."""
    found: list[Found] = []
    problems: list[str] = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and (m := TRACE_FILE.match(path.name)):
            found.append(Found(int(m.group(1)), "chrome", path))
        elif path.is_dir() and NPU_FOLDER.search(path.name):
            rank = _npu_rank(path)
            if rank is None:
                if (path / "profiler_info.json").is_file():
                    rank = 0
                else:
                    problems.append(f"{path.name}: no profiler_info_<rank>.json: its rank is not "
                                    "known (the profiler did not finish writing?)")
                    continue
            kind, where = _npu_kind(path, rank)
            found.append(Found(rank, kind, where))
    return found, problems


def metadata_ranks(found: list[Found]) -> list[int] | None:
    """The ranks the profiles' own metadata names (torch_npu's profiler_metadata.json: its
    parallel groups' global ranks, or distributed_args' world size), None where none does."""
    ranks: set[int] = set()
    for item in found:
        folder = item.path if item.path.is_dir() else item.path.parent.parent
        meta = folder / "profiler_metadata.json"
        if not meta.is_file():
            continue
        try:
            data: Any = read_json(meta)
        except ProfileReadError:
            continue
        if not isinstance(data, dict):
            continue
        for group in (data.get("parallel_group_info") or {}).values():
            if isinstance(group, dict):
                ranks |= {int(r) for r in group.get("global_ranks") or []
                          if isinstance(r, int)}
        world = (data.get("distributed_args") or {}).get("world_size")
        if isinstance(world, int) and world > 0:
            ranks |= set(range(world))
    return sorted(ranks) or None


def _analyse(folder: Path) -> str | None:
    """Analyse a raw torch_npu folder in a child process; None when it worked, else why not."""
    if os.environ.get(NO_ANALYSIS):
        return f"not analysed ({NO_ANALYSIS} is set)"
    if importlib.util.find_spec("torch_npu") is None:
        return ("not analysed: torch_npu does not import here; on the host run "
                + analyse_command(folder.name) + " in its parent folder, then read it again")
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import sys\nfrom torch_npu.profiler.profiler import analyse\n"
                                   "analyse(sys.argv[1])", str(folder)],
            capture_output=True, text=True, timeout=ANALYSE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return f"torch_npu's analysis of {folder.name} ran past {ANALYSE_TIMEOUT_S:.0f} s"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"torch_npu's analysis of {folder.name} failed (exit {done.returncode}): {tail[0]}"
    return None


def _read(item: Found, relative_to: Path) -> RankProfile:
    if item.kind == "chrome":
        return read_chrome_trace(item.path, item.rank, relative_to)
    if item.kind == "npu_db":
        return read_npu_db(item.path, item.rank, relative_to)
    return read_npu_text(item.path, item.rank, relative_to)


def read_profiles(folder: Path, relative_to: Path, expected_ranks: list[int] | None,
                  *, analyse: bool = True) -> ProfilesRead:
    """Every rank's profile under ``folder``: raw torch_npu folders analysed first where
    ``analyse`` and torch_npu imports; ``expected_ranks`` None takes the ranks the profiles'
    metadata names, or else the ranks found (the caller says so: a missing rank cannot be seen
    then). A rank lacking a step another rank profiled is a problem."""
    found, problems = find_profiles(folder)
    by_rank: dict[int, list[Found]] = {}
    for item in found:
        by_rank.setdefault(item.rank, []).append(item)
    expected = sorted(set(expected_ranks if expected_ranks is not None
                          else metadata_ranks(found) or by_rank))
    coverage: list[RankCoverage] = []
    ranks: list[RankProfile] = []
    for rank in sorted(set(expected) | set(by_rank)):
        items = by_rank.get(rank, [])
        if not items:
            coverage.append(RankCoverage(rank=rank, status="missing", steps=[],
                                         note="expected, but no profile of this rank was found"))
            continue
        if len(items) > 1:
            names = ", ".join(i.path.name for i in items)
            coverage.append(RankCoverage(rank=rank, status="unreadable", steps=[],
                                         note=f"profiled more than once ({names}): which one "
                                              "belongs to this request is not known"))
            continue
        item = items[0]
        analysis_s: float | None = None
        if item.kind == "npu_raw":
            began = time.monotonic()
            said = _analyse(item.path) if analyse else "not analysed (analysis not asked for)"
            if said is not None:
                coverage.append(RankCoverage(rank=rank, status="not_analysed", steps=[],
                                             note=said))
                continue
            analysis_s = round(time.monotonic() - began, 3)
            kind, where = _npu_kind(item.path, rank)
            if kind == "npu_raw":
                coverage.append(RankCoverage(
                    rank=rank, status="not_analysed", steps=[],
                    note=f"torch_npu's analysis of {item.path.name} wrote no "
                         f"{OUTPUT_DIR} files"))
                continue
            item = Found(rank, kind, where)
        try:
            profile = _read(item, relative_to)
        except ProfileReadError as exc:
            coverage.append(RankCoverage(rank=rank, status="unreadable", steps=[],
                                         note=str(exc)))
            continue
        ranks.append(profile)
        unexpected = rank not in expected
        coverage.append(RankCoverage(
            rank=rank, status="unreadable" if profile.problems else "profiled",
            steps=profile.steps,
            note=("; ".join(profile.problems) if profile.problems else
                  "not among the ranks expected" if unexpected else None),
            **({} if analysis_s is None else {"analysis_s": analysis_s})))
        if unexpected:
            problems.append(f"rank {rank} profiled but not expected (expected "
                            f"{', '.join(map(str, expected))})")
    every = sorted({s for r in ranks for s in r.steps})
    for r in ranks:
        lacking = [s for s in every if s not in r.steps]
        if lacking:
            problems.append(f"rank {r.rank} lacks step(s) {', '.join(lacking)} that another "
                            "rank profiled: its figures cover fewer steps")
    return ProfilesRead(coverage, ranks, problems)
