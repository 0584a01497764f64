"""Check a :class:`MediaProbe` against what the run expected: the problems it names.

Each problem has a stable ``code`` (what the gates and the evidence record) and a one-line
``message`` saying what was expected and what was found.
"""

from __future__ import annotations

from dataclasses import dataclass

from ref2va_accept.evidence import MediaProbe, MediaProblem, VideoStream
from ref2va_accept.media._container import is_mp4_family, one_line

AAC_FRAME_SAMPLES = 1024
FPS_TOLERANCE = 1e-3

__all__ = [
    "AAC_FRAME_SAMPLES",
    "FPS_TOLERANCE",
    "FrameCount",
    "MediaExpectation",
    "MediaProblem",
    "audio_video_tolerance_s",
    "check_media",
]


@dataclass(frozen=True)
class MediaExpectation:
    num_frames: int
    fps: float
    width: int
    height: int
    sample_rate: int = 32000
    channels: int = 2
    audio: bool = True
    video_codec: str = "h264"
    audio_codec: str = "aac"


@dataclass(frozen=True)
class FrameCount:
    """The frames a decoding pass found against what the file and the run say there should be.

    ``declared`` is the container's own count (None when it declares none), ``expected`` the
    run's (a campaign track's ``num_frames``; None when not given). A metric computed over fewer
    frames than these describes a prefix of the video, not the video.
    """

    name: str  # basename of the file
    decoded: int
    declared: int | None
    expected: int | None = None

    @property
    def target(self) -> int | None:
        """The count the decoded one must reach: the run's when given, else the container's."""
        return self.expected if self.expected is not None else self.declared

    def problem(self) -> str | None:
        """One line naming the file, frames found against each count they miss; None when every
        known count agrees, and a line too when no count is known (nothing to check against)."""
        if self.target is None:
            return (f"{self.name}: {self.decoded} frames decoded and the container declares no "
                    "frame count to check them against; give the expected count")
        misses = []
        if self.declared is not None and self.decoded != self.declared:
            misses.append(f"the container declares {self.declared}")
        if self.expected is not None and self.decoded != self.expected:
            misses.append(f"{self.expected} expected")
        if not misses:
            return None
        return f"{self.name}: {self.decoded} frames decoded, " + " and ".join(misses)

    @property
    def partial(self) -> bool:
        """Fewer frames than every known count, and some: a prefix a partial score may cover."""
        known = [n for n in (self.declared, self.expected) if n is not None]
        return bool(known) and 0 < self.decoded < min(known)

    def partial_text(self) -> str:
        return f"partial: {self.decoded} of {self.target} frames"


def audio_video_tolerance_s(sample_rate: int, fps: float) -> float:
    """How far the decoded audio duration may sit from the decoded video duration.

    Two AAC frames (2 * 1024 samples) cover encoder priming (one frame, normally hidden by the edit
    list but exposed by muxers that write none) plus end padding (under one frame, always decoded).
    Half a video frame covers the server rounding the audio length to the nearest video frame.
    Anything beyond that is a real mismatch. (What PyAV actually shows of priming and padding is
    described in :mod:`ref2va_accept.media._probing`.)
    """
    if sample_rate <= 0 or fps <= 0:
        raise ValueError(f"sample_rate and fps must be positive, got {sample_rate} and {fps}")
    return 2 * AAC_FRAME_SAMPLES / sample_rate + 0.5 / fps


def _check_video(
    video: VideoStream, expect: MediaExpectation | None, problems: list[MediaProblem]
) -> None:
    codec = expect.video_codec if expect is not None else "h264"
    if video.codec != codec:
        problems.append(
            MediaProblem(code="video_codec",
                         message=f"expected video codec {codec}, found {video.codec}")
        )
    if expect is not None and video.frames_decoded != expect.num_frames:
        problems.append(
            MediaProblem(
                code="frame_count",
                message=f"expected {expect.num_frames} frames, decoded {video.frames_decoded}",
            )
        )
    elif video.frames_decoded < 1:
        problems.append(MediaProblem(code="frame_count",
                                     message="expected at least 1 frame, decoded 0"))
    elif video.frames_declared is not None and video.frames_declared != video.frames_decoded:
        # A header promising more frames than decode yields is a truncated or damaged mdat.
        problems.append(
            MediaProblem(
                code="frame_count",
                message=(f"header declares {video.frames_declared} frames, "
                         f"decoded {video.frames_decoded}"),
            )
        )
    if expect is None:
        return
    if abs(video.fps - expect.fps) > FPS_TOLERANCE:
        problems.append(MediaProblem(code="fps",
                                     message=f"expected {expect.fps:g} fps, found {video.fps:g}"))
    if (video.width, video.height) != (expect.width, expect.height):
        problems.append(
            MediaProblem(
                code="resolution",
                message=(f"expected {expect.width}x{expect.height}, "
                         f"found {video.width}x{video.height}"),
            )
        )


def _check_audio(
    probe_: MediaProbe, expect: MediaExpectation | None, problems: list[MediaProblem]
) -> None:
    audio = probe_.audio
    if expect is not None and not expect.audio:
        if audio is not None:
            problems.append(
                MediaProblem(
                    code="unexpected_audio_stream",
                    message=f"expected no audio stream, found {audio.codec} {audio.sample_rate} Hz",
                )
            )
        return
    if audio is None:
        problems.append(MediaProblem(code="no_audio_stream",
                                     message="expected an AAC audio stream, found none"))
        return
    codec = expect.audio_codec if expect is not None else "aac"
    if audio.codec != codec:
        problems.append(
            MediaProblem(code="audio_codec",
                         message=f"expected audio codec {codec}, found {audio.codec}")
        )
    if expect is not None and audio.sample_rate != expect.sample_rate:
        problems.append(
            MediaProblem(
                code="audio_sample_rate",
                message=f"expected {expect.sample_rate} Hz audio, found {audio.sample_rate} Hz",
            )
        )
    if expect is not None and audio.channels != expect.channels:
        problems.append(
            MediaProblem(
                code="audio_channels",
                message=f"expected {expect.channels} audio channels, found {audio.channels}"
                f" ({audio.layout or 'unknown layout'})",
            )
        )
    video = probe_.video
    if video is None or video.fps <= 0 or audio.sample_rate <= 0:
        return
    tolerance = audio_video_tolerance_s(audio.sample_rate, video.fps)
    gap = audio.duration_s - video.duration_s
    if abs(gap) > tolerance:
        problems.append(
            MediaProblem(
                code="audio_duration",
                message=f"expected audio as long as the video ({video.duration_s:.4f} s"
                f" +/- {tolerance:.4f} s), found {audio.duration_s:.4f} s"
                f" ({audio.samples_decoded} samples)",
            )
        )


def check_media(probe: MediaProbe, expect: MediaExpectation | None = None) -> list[MediaProblem]:
    """List every way ``probe`` falls short; an empty list means the file is complete.

    Without ``expect``: an H.264 stream with at least one decoded frame (and as many as its header
    declares), an AAC stream, no decode errors, and audio as long as the video. With ``expect``:
    also the exact frame count, fps, size, sample rate, channels and codecs, or no audio at all
    when ``expect.audio`` is False.
    """
    problems: list[MediaProblem] = []
    if not is_mp4_family(probe.container):
        problems.append(
            MediaProblem(code="not_mp4",
                         message=f"expected an MP4 container, found '{probe.container}'")
        )
    problems.extend(
        MediaProblem(code="decode_error", message=f"expected a clean decode, got {one_line(error)}")
        for error in probe.decode_errors
    )
    if probe.video is None:
        problems.append(
            MediaProblem(code="no_video_stream",
                         message="expected an H.264 video stream, found none")
        )
    else:
        _check_video(probe.video, expect, problems)
    _check_audio(probe, expect, problems)
    return problems
