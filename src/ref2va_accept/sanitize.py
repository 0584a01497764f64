"""Keep host names, user names, IP addresses and absolute paths out of the evidence.

The evidence is published; the host's identity is not. Strings are rewritten on the way into the
JSON, and every text file in a run folder (logs, the HTML report) is rewritten when the run ends.
Known roots become stable placeholders (`<repo>`, `<evidence>`, `~`); any other absolute path
keeps only its last component, behind `<abs>/`.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.])")
# An IPv6 address with '::' or the full eight groups; a clock time (12:34:56) or a C++/process
# name such as `vLLM-Omni::DiffusionWorker` is not one.
_IPV6 = re.compile(
    r"(?<![\w:.])(?:"
    r"(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}"
    r"|(?:[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4})*)?::(?:[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4})*)?"
    r")(?![\w:])"
)
_ABS_ROOTS = (
    "home|root|tmp|work|usr|opt|var|etc|mnt|data|srv|media|run|Users|private|scratch|nfs|"
    "lib|lib64|bin|sbin|proc|sys|models|weights|cache|ssd|share|export|nvme|disk\\d*|storage"
)
_ABS_PATH = re.compile(
    r"(?<![\w.~<>-])(/(?:" + _ABS_ROOTS + r")(?:/[^\s'\"<>:,;|()\[\]{}=]*)*)"
)
TEXT_SUFFIXES = (".json", ".jsonl", ".log", ".txt", ".html", ".htm", ".css", ".js", ".csv")


def _last_component(match: re.Match[str]) -> str:
    path = match.group(1).rstrip("/")
    name = path.rsplit("/", 1)[-1]
    return f"<abs>/{name}" if name else "<abs>"


@dataclass(frozen=True)
class Sanitizer:
    """Replacements for one machine, most specific first."""

    literal: tuple[tuple[str, str], ...]
    words: tuple[tuple[re.Pattern[str], str], ...]

    @classmethod
    def for_this_host(cls, *, repo: Path | None = None, evidence: Path | None = None) -> Sanitizer:
        literal: list[tuple[str, str]] = []
        for root, label in ((evidence, "<evidence>"), (repo, "<repo>")):
            if root is not None:
                for variant in {str(root), str(root.resolve())}:
                    literal.append((variant, label))
        home = os.path.expanduser("~")
        if home not in ("/", "~"):
            literal.append((home, "~"))
        tmp = tempfile.gettempdir()
        if tmp not in ("/", ""):
            literal.append((tmp, "<tmp>"))
        # Longest first, so that /work/main/evidence wins over /work/main.
        literal.sort(key=lambda pair: len(pair[0]), reverse=True)
        words: list[tuple[re.Pattern[str], str]] = []
        names = {socket.gethostname(), socket.getfqdn()}
        for host in sorted((n for n in names if len(n) >= 3), key=len, reverse=True):
            words.append((re.compile(rf"(?<![\w-]){re.escape(host)}(?![\w-])"), "<host>"))
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = ""
        if len(user) >= 2:
            # Only word characters bound a user name: `pytest-of-alice` must lose it too.
            words.append((re.compile(rf"(?<!\w){re.escape(user)}(?!\w)"), "<user>"))
        return cls(tuple(literal), tuple(words))

    def text(self, value: str) -> str:
        for needle, label in self.literal:
            value = value.replace(needle, label)
        value = _ABS_PATH.sub(_last_component, value)
        for pattern, label in self.words:
            value = pattern.sub(label, value)
        value = _IPV4.sub("<ip>", value)
        return _IPV6.sub("<ip>", value)

    def value(self, obj: Any) -> Any:
        """A JSON-ready value with every string (keys included) sanitized."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {self.text(str(k)): self.value(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.value(v) for v in obj]
        return obj

    def files(self, folder: Path, suffixes: Iterable[str] = TEXT_SUFFIXES) -> int:
        """Rewrite every text file below folder in place; returns how many changed."""
        changed = 0
        wanted = tuple(suffixes)
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or path.is_symlink() or not path.name.endswith(wanted):
                continue
            raw = path.read_text(encoding="utf-8", errors="replace")
            clean = self.text(raw)
            if clean != raw:
                tmp = path.with_name(path.name + ".sanitizing")
                tmp.write_text(clean, encoding="utf-8")
                tmp.replace(path)
                changed += 1
        return changed
