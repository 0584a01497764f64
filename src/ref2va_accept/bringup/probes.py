"""The bring-up's looks at the host that are not engine requests: the serve command's help, the
inputs as ffprobe reads them, a server process's environment, a too-short reference audio."""

from __future__ import annotations

import io
import os
import re
import wave
from collections.abc import Mapping, Sequence
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


def ffprobe_duration(path: Path, env: Mapping[str, str]) -> tuple[float | None, str]:
    """The container duration ffprobe reports (what H3 reads), or None and why not."""
    out, why = run_command(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of",
                            "default=noprint_wrappers=1:nokey=1", str(path)], FFPROBE_TIMEOUT_S,
                           env=env)
    if out is None:
        if why == "ffprobe not found":
            why = "ffprobe not found on PATH (H3 refuses every reference audio without it)"
        return None, why
    try:
        return float(out.strip()), ""
    except ValueError:
        return None, f"ffprobe on {path.name} printed {out.strip()[:80]!r}"


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
