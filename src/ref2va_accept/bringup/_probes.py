"""The bring-up's looks at the host that are not engine requests: the serve command's help, the
reference audio as H3's ffprobe call reads it on the server's PATH, a server process's
environment, a too-short reference audio."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import wave
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ref2va_accept.campaign import MAX_REFERENCE_AUDIO_S, MIN_REFERENCE_AUDIO_S, probe_audio
from ref2va_accept.engines import run_command

HELP_TIMEOUT_S = 600.0  # importing vLLM on a fresh host takes minutes
FFPROBE_TIMEOUT_S = 60.0
_FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")


def help_flags(command: Sequence[str], env: Mapping[str, str], cwd: Path
               ) -> tuple[set[str] | None, str]:
    """Every `--flag` that `COMMAND serve --omni --help=all` prints, or None and why not."""
    out, why = run_command([*command, "serve", "--omni", "--help=all"], HELP_TIMEOUT_S,
                           env=env, cwd=cwd)
    return (None, why) if out is None else (set(_FLAG.findall(out)), "")


# H3's own probe (model_executor/models/minimax_h3/reference_video.py, _probe_audio): it runs
# this with check=True on every reference audio, so without ffprobe every such request fails.
H3_FFPROBE_ENTRIES = "stream=codec_type,codec_name,duration:format=format_name,size,duration"


@dataclass(frozen=True)
class AudioDuration:
    """A reference audio's duration as H3 reads it, or why it could not be read."""

    seconds: float | None
    read_from: str | None  # "stream" (the audio stream's), "format" (the container's fallback)
    problem: str = ""


def h3_duration(out: str) -> AudioDuration:
    """The duration in `ffprobe -of json` output, read as H3 reads it: the first audio stream's
    duration, the container's when the stream has none."""
    try:
        probe = json.loads(out)
    except ValueError:
        return AudioDuration(None, None, f"ffprobe printed no JSON: {out.strip()[:80]!r}")
    if not isinstance(probe, dict):
        return AudioDuration(None, None, f"ffprobe printed {out.strip()[:80]!r}")
    streams = [s for s in probe.get("streams") or [] if isinstance(s, dict)
               and s.get("codec_type") == "audio"]
    if not streams:
        return AudioDuration(None, None, "ffprobe finds no audio stream (H3: media has no "
                             "audio stream)")
    raw, read_from = streams[0].get("duration"), "stream"
    if raw in (None, "", "N/A"):
        raw, read_from = (probe.get("format") or {}).get("duration"), "format"
    if raw in (None, "", "N/A"):
        return AudioDuration(None, None, "ffprobe reads no duration (H3: cannot determine audio "
                             "duration)")
    try:
        return AudioDuration(float(raw), read_from)
    except (TypeError, ValueError):
        return AudioDuration(None, None, f"ffprobe reads the duration {raw!r}")


def ffprobe_duration(path: Path, env: Mapping[str, str]) -> AudioDuration:
    """The duration ffprobe reports as H3 runs and reads it, with the server's environment
    `env` (its PATH decides which ffprobe runs, or that none does)."""
    if shutil.which("ffprobe", path=env.get("PATH", "")) is None:
        return AudioDuration(None, None, "ffprobe not found on the server's PATH (H3 runs it "
                             "with check=True: every request with a reference audio fails, "
                             "HTTP 500)")
    out, why = run_command(["ffprobe", "-v", "error", "-show_entries", H3_FFPROBE_ENTRIES,
                            "-of", "json", str(path)], FFPROBE_TIMEOUT_S, env=env)
    if out is None:
        return AudioDuration(None, None, why)
    return h3_duration(out)


def judge_duration(path: Path) -> float | None:
    """The duration the judge reads by decoding every sample (its own check at load)."""
    try:
        return probe_audio(path).duration_s
    except Exception:
        return None


def within_h3(duration: float) -> bool:
    return MIN_REFERENCE_AUDIO_S <= duration <= MAX_REFERENCE_AUDIO_S


def short_wav(seconds: float = 1.0, rate: int = 32000) -> bytes:
    """A silent stereo WAV shorter than H3's 2 s minimum: upstream must refuse it."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(2)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"\0\0\0\0" * int(seconds * rate))
    return buffer.getvalue()


def process_environment(pid: int) -> dict[str, str] | None:
    """A running process's environment as it was exec'd (Linux /proc), or None."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def kept_entries(inherited: str | None, server: str | None) -> tuple[list[str], list[str]]:
    """(kept, lost): the inherited search path's entries that the server's has, and lacks."""
    entries = [e for e in (inherited or "").split(os.pathsep) if e]
    present = set((server or "").split(os.pathsep))
    return [e for e in entries if e in present], [e for e in entries if e not in present]
