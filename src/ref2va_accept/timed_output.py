"""A lossless track's timed outputs equal its watched one (MLPerf TEST01 idea).

The timed (perf) requests carry no diagnostics, so an engine that takes another path when it is
watched would show here: each measured MP4 of the candidate is compared, frames and audio, with
the MP4 of its quality request of the same seed. The check is judged where the timed requests
are (the latency protocol of a lossless track) and, since either scenario may run first, also
where the watched request is (the lossless gate): whichever of the two completes the pair
records it. From the run's typed outcomes, never from the sanitized evidence.
"""

from __future__ import annotations

from pathlib import Path

from .checks import Check, Reason
from .decoded import compare_decoded_mp4
from .errors import MediaError
from .verdicts import CheckResult
from .workload import OutcomeLog

WATCHED, TIMED = "quality", "measured"
_POINTS = ("mp4.video", "mp4.audio")


def _identical(reference: Path, path: Path) -> bool:
    try:
        decoded = compare_decoded_mp4(reference, path)
    except MediaError:
        return False
    points = [p for p in decoded.points if p.name in _POINTS]
    return len(points) == len(_POINTS) and all(p.equal for p in points)


def _files(outcomes: OutcomeLog, track: str, candidate: str, kind: str
           ) -> list[tuple[int | None, Path]]:
    return [(o.sample.seed, o.media_path) for o in outcomes.of(track, candidate, kind)
            if o.sample.ok and o.media_path is not None]


def timed_output_check(outcomes: OutcomeLog, track: str, candidate: str) -> CheckResult | None:
    """Pass when every timed MP4 decodes identical to the watched one of its seed; None while
    either side has not run (the verdict then lists the check as open)."""
    watched: dict[int | None, Path] = {}
    for seed, path in _files(outcomes, track, candidate, WATCHED):
        watched.setdefault(seed, path)
    pairs = [(watched[seed], path) for seed, path in _files(outcomes, track, candidate, TIMED)
             if seed in watched]
    if not pairs:
        return None
    differing = [path.name for reference, path in pairs if not _identical(reference, path)]
    if differing:
        return CheckResult(track, candidate, Check.TIMED_OUTPUT, "fail",
                           Reason.OUTPUT_DIFFERS_WHEN_UNOBSERVED,
                           f"timed outputs differ from the watched one: {', '.join(differing)}")
    return CheckResult(track, candidate, Check.TIMED_OUTPUT, "pass", None,
                       f"{len(pairs)} timed outputs decode identical to the watched one")
