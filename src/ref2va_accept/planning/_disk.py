"""How much disk a run's evidence needs, estimated before any engine starts, against what is free.

The need is summed over the run's plan (planning/_request_plan.py: the requests each collected
scenario sends, and which of them ask for comparison-point dumps), per track, from its frozen plan
(planning/_track_plan.py):

- **MP4s**: every request that comes back keeps its MP4. Per request: frames x width x height x
  ``MP4_BYTES_PER_PIXEL`` + duration x ``AUDIO_BYTES_PER_S`` + ``MP4_OVERHEAD``. An upper bound,
  not a guess: the reference engine's H.264 at crf 18 (what vLLM-Omni's muxer uses) measured
  0.275 bytes per pixel on its noisy synthetic frames and 16 kB/s of AAC (5 s at 112x64: 244 kB
  of video, 83 kB of audio); natural video at crf 18 takes far less per pixel. The formula takes
  0.5 bytes per pixel and 320 kb/s.
- **Dumps** (lossless quality requests only): every `diagnostics` comparison point, its frozen
  shape times its dtype's size. A shape not filled yet (the host campaign before fill-points) is
  bounded from the track's shape: `decoded.video` is frames x H x W x 3 (4.5 GB as float32 for a
  15 s request at 1344x768); any other video point (latent, DiT state) a sixteenth of that (a
  latent of up to 48 channels at 4x temporal and 8x8 spatial compression; Wan- and
  HunyuanVideo-class VAEs use 16); an audio point 2 channels x 48 kHz x duration; a `cond.*`
  point ``COND_ELEMENTS`` (e.g. 1024 tokens x 8192 hidden, above any text encoder's output).
- **Localization passes** (after a lossless candidate's bit-exact failure; contingent, so counted
  as if every lossless candidate of the run failed): four requests each, every one an MP4; the
  two level-1 requests dump the DiT's point at every step since the last equal frozen one (at
  most the widest gap between the contract's frozen steps), the two level-2 requests one point;
  each point bounded by the contract's largest. The tensors of level 2 depend on
  the diverging block's size, known only from level 1: the pass checks the free disk against
  them before it writes them (localize/runner.py).
- **Records**: logs, events, samples, evidence.json and the report, ``RECORD_BASE`` plus
  ``RECORD_PER_REQUEST`` per request.

The run needs the estimate times ``MARGIN`` (1.25): the formulas already bound what they count;
the margin keeps headroom for what they do not (an engine log that grows faster than allowed,
other writers on the same filesystem during an hours-long run). Free space is
``shutil.disk_usage`` of the evidence folder (or its nearest existing parent): what an
unprivileged writer may use.
"""

from __future__ import annotations

import itertools
import math
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ref2va_accept.evidence import Disk, TrackNeed
from ref2va_accept.planning._request_plan import Plan
from ref2va_accept.planning._track_plan import TrackPlan
from ref2va_accept.tensors import dit_step

MARGIN = 1.25
MP4_BYTES_PER_PIXEL = 0.5
AUDIO_BYTES_PER_S = 40_000  # 320 kb/s
MP4_OVERHEAD = 64 * 1024
AUDIO_RATE_BOUND = 48_000  # samples per second per channel, for an unfilled audio point
LATENT_FRACTION = 16  # an unfilled non-decoded video point: decoded.video's elements / this
COND_ELEMENTS = 16 * 1024 * 1024
RECORD_BASE = 64 * 1024 * 1024
RECORD_PER_REQUEST = 1024 * 1024
LOCALIZE_REQUESTS = 4  # localize/runner.py REQUESTS (checked equal by test_localize.py)
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8,
               "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1}


def fmt_bytes(n: float) -> str:
    """Bytes in decimal units: 4.48 GB, 332 kB."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def mp4_bytes(plan: TrackPlan) -> int:
    """The upper bound of one MP4 of this track."""
    pixels = plan.num_frames * plan.shape.width * plan.shape.height
    return math.ceil(pixels * MP4_BYTES_PER_PIXEL + plan.duration_s * AUDIO_BYTES_PER_S
                     + MP4_OVERHEAD)


def _unfilled_elements(plan: TrackPlan, name: str) -> int:
    decoded_video = plan.num_frames * plan.shape.height * plan.shape.width * 3
    if name == "decoded.video":
        return decoded_video
    if "audio" in name:
        return math.ceil(2 * AUDIO_RATE_BOUND * plan.duration_s)
    if name.startswith("cond."):
        return COND_ELEMENTS
    return math.ceil(decoded_video / LATENT_FRACTION)


def _point_sizes(plan: TrackPlan) -> list[tuple[str, int, bool]]:
    """Each diagnostics point of a lossless contract: its name, bytes, and whether its size was
    bounded from the track's shape (not filled yet). Points of the MP4 are decoded by the judge,
    never written; a lossy track has none."""
    if plan.quality != "lossless":
        return []
    found = []
    for point in plan.lossless.points:
        if point.source != "diagnostics":
            continue
        filled = isinstance(point.shape, list)  # else a placeholder (the campaign allows no other)
        elements = (math.prod(point.shape) if isinstance(point.shape, list)
                    else _unfilled_elements(plan, point.name))
        found.append((point.name, elements * DTYPE_BYTES[point.dtype], not filled))
    return found


def dump_bytes(plan: TrackPlan) -> tuple[int, tuple[str, ...]]:
    """One dumping request's comparison points, and the points whose size was bounded (their
    shape not filled yet). A lossy track dumps nothing."""
    sizes = _point_sizes(plan)
    return sum(n for _, n, _ in sizes), tuple(name for name, _, bounded in sizes if bounded)


def step_span(plan: TrackPlan) -> int:
    """The most steps a pass's level 1 spans: the widest gap between the contract's frozen DiT
    steps (from step 0 to the first one, then between neighbours); 1 with no DiT point."""
    if plan.quality != "lossless":
        return 1
    steps = sorted({s for p in plan.lossless.points if (s := dit_step(p.name)) is not None})
    if not steps:
        return 1
    return max([steps[0] + 1, *(b - a for a, b in itertools.pairwise(steps))])


def pass_bytes(plan: TrackPlan) -> int:
    """One localization pass at most: four MP4s, level 1's points over its span on both arms,
    and level 2's one point on both."""
    return (LOCALIZE_REQUESTS * mp4_bytes(plan)
            + (2 * step_span(plan) + 2) * largest_point_bytes(plan))


def largest_point_bytes(plan: TrackPlan) -> int:
    """The largest diagnostics point of a lossless contract (what a pass request dumps, at most)."""
    return max((n for _, n, _ in _point_sizes(plan)), default=0)


@dataclass(frozen=True)
class DiskEstimate:
    tracks: tuple[TrackNeed, ...]
    record_bytes: int

    @property
    def estimate_bytes(self) -> int:
        return sum(t.mp4_bytes + t.dump_bytes + t.localize_bytes
                   for t in self.tracks) + self.record_bytes

    @property
    def need_bytes(self) -> int:
        return math.ceil(self.estimate_bytes * MARGIN)

    def parts(self) -> str:
        return parts(self.tracks, self.record_bytes)


def parts(tracks: Iterable[TrackNeed], record_bytes: int) -> str:
    """The need in words, by kind: MP4s, dumps, localization passes, logs and records."""
    tracks = list(tracks)
    mp4 = sum(t.mp4_bytes for t in tracks)
    dumps = sum(t.dump_bytes for t in tracks)
    passes = sum(t.localize_bytes for t in tracks)
    return (f"MP4s {fmt_bytes(mp4)}, comparison-point dumps {fmt_bytes(dumps)}, "
            + (f"localization passes {fmt_bytes(passes)}, " if passes else "")
            + f"logs and records {fmt_bytes(record_bytes)}")


def estimate(run: Plan, plans: Mapping[str, TrackPlan]) -> DiskEstimate:
    """The run's evidence size, per track, from its request plan and the tracks' frozen plans."""
    requests: dict[str, int] = {}
    dumps: dict[str, int] = {}
    passes: dict[str, int] = {}
    for unit in run.units().values():
        requests[unit.track] = requests.get(unit.track, 0) + unit.requests
        dumps[unit.track] = dumps.get(unit.track, 0) + unit.dumps
        passes[unit.track] = passes.get(unit.track, 0) + unit.localize
    needs = []
    for track, count in requests.items():
        plan = plans[track]
        per_dump, bounded = dump_bytes(plan)
        needs.append(TrackNeed(track=track, requests=count, dump_requests=dumps[track],
                               mp4_bytes=count * mp4_bytes(plan),
                               dump_bytes=dumps[track] * per_dump,
                               bounded_points=list(bounded) if dumps[track] else [],
                               localize_bytes=passes[track] * pass_bytes(plan)))
    total = sum(requests.values())
    return DiskEstimate(tuple(needs), RECORD_BASE + total * RECORD_PER_REQUEST)


def free_bytes(folder: Path) -> tuple[Path, int]:
    """The free space of the filesystem that will hold `folder` (its nearest existing parent
    when it does not exist yet), and that parent."""
    probe = folder.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe, shutil.disk_usage(probe).free


def disk_record(need: DiskEstimate, folder: Path, free: int, *, skipped: bool = False) -> Disk:
    """The estimate against `free` bytes where the evidence folder `folder` goes, as the
    evidence's `disk` records it (`skipped`: --ref2va-skip-disk-check, compared and recorded,
    never refused)."""
    return Disk(estimate_bytes=need.estimate_bytes, margin=MARGIN, need_bytes=need.need_bytes,
                free_bytes=free, fits=need.need_bytes <= free, skipped=skipped,
                folder=str(folder), record_bytes=need.record_bytes, tracks=list(need.tracks))


def disk_refusal(disk: Disk, shown: str) -> str:
    """The one line that refuses the run; `shown` is how the evidence folder is named."""
    return (f"ref2va: disk check: {shown} needs about {fmt_bytes(disk.need_bytes)} for this "
            f"run's evidence (estimate {fmt_bytes(disk.estimate_bytes)} x margin {disk.margin}: "
            f"{parts(disk.tracks, disk.record_bytes)}) but its filesystem has "
            f"{fmt_bytes(disk.free_bytes)} free; free space, choose another --evidence-dir, or "
            "pass --ref2va-skip-disk-check")


def disk_skipped_line(disk: Disk, shown: str) -> str:
    """The note of a check that was skipped (--ref2va-skip-disk-check): what it found."""
    return (f"ref2va: disk check skipped (--ref2va-skip-disk-check): needs about "
            f"{fmt_bytes(disk.need_bytes)}, {fmt_bytes(disk.free_bytes)} free on "
            f"the filesystem of {shown}")


def check_disk(run: Plan, plans: Mapping[str, TrackPlan], folder: Path, *,
          skipped: bool = False) -> Disk:
    """The run's estimated need against the free space where its evidence goes."""
    _, free = free_bytes(folder)
    return disk_record(estimate(run, plans), folder, free, skipped=skipped)
