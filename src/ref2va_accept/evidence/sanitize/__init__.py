"""Keep the host's and its people's identity, and any secret, out of the evidence.

The evidence is published; who ran it, where, and with which credentials is not. Strings are
rewritten on the way into the JSON (`value`), and every text file of a run folder (logs, the HTML
report), and every file name, is rewritten when the run ends (`files`). Two sources:

- what this machine says about itself, gathered at start (`identifiers.gather`): its host names,
  user names, interface addresses and the environment's URLs, secrets and CI values. Each is
  replaced wherever it appears; a name that is also a common word (`root`, `admin`, `main`...) only
  where it names someone (`root@`, `user=root`, a path component, a `user` field);
- shapes that identify anyone anywhere (`patterns`): any absolute path (`<abs>/last-name`), `~user`,
  e-mail addresses, URL credentials, token shapes, secret-named assignments, IPv4 (not versions),
  IPv6 and MAC addresses.

Known roots become `<repo>/...`, `<evidence>/...`, `<workspace>/...` and `~/...` (the home) on a
path boundary only: `/workspace/bob` is not under the root `/workspace/b`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ref2va_accept.core import WriteFailed, atomic_write
from ref2va_accept.evidence.sanitize import _patterns as patterns
from ref2va_accept.evidence.sanitize._identifiers import Identifiers, gather, normal_address

__all__ = ["COMMON_WORDS", "LABELS", "TEXT_SUFFIXES", "Identifiers", "Sanitizer"]

TEXT_SUFFIXES = (".json", ".jsonl", ".log", ".txt", ".html", ".htm", ".css", ".js", ".csv")
LABELS = patterns.LABELS
_SCRIPT = re.compile(r"(<script\b[^>]*>.*?</script\s*>)", re.S | re.I)
_LABEL = re.compile(r"<(" + "|".join(LABELS) + r")>")
# Names too common to replace everywhere: replaced only where they name a user or a host.
COMMON_WORDS = frozenset({
    "root", "admin", "administrator", "user", "users", "test", "tests", "main", "master", "server",
    "host", "node", "worker", "runner", "build", "builder", "jenkins", "gitlab", "github", "ci",
    "docker", "ubuntu", "debian", "centos", "nobody", "daemon", "guest", "default", "dev", "app",
    "built-in", "local", "home", "data", "model", "models", "engine", "video", "audio", "python",
    "an", "as", "at", "be", "by", "do", "go", "he", "if", "in", "is", "it", "me", "my", "no",
    "of", "ok", "on", "or", "so", "to", "up", "us", "we", "id", "pr", *LABELS,
    # The run folder's own words: its layout, JSON keys and ids.
    "logs", "media", "dumps", "events", "samples", "report", "status", "run", "track", "arm",
    "smoke", "measured", "warmup", "reference", "campaign", "b0", "lossless", "lossy",
    # Names the evidence uses for what it pins and encodes (a key in every record of a file).
    "sha256", "sha1", "md5", "h264", "x264", "aac", "mp4", "bf16", "fp16", "fp32"})
# Sections of the evidence whose every dotted quad is a version (pins and their host values).
_VERSION_SECTIONS = frozenset({"source_pin", "host_identity", "packages", "versions"})
_USER_KEYS = r"user|username|login|logname|owner|account|actor|author"
_HOST_KEYS = r"host|hostname|node|node_name|nodename|server|machine"


def _alternation(words: Iterable[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


@dataclass(frozen=True)
class _Compiled:
    values: re.Pattern[str] | None
    value_labels: dict[str, str]
    roots: re.Pattern[str] | None
    root_labels: dict[str, str]
    names: tuple[tuple[re.Pattern[str], str], ...]  # known names, everywhere (whole words)
    contextual: tuple[tuple[re.Pattern[str], str], ...]  # common-word names, in context only
    in_paths: tuple[tuple[re.Pattern[str], str], ...]  # every known name, inside a path's names
    addresses: tuple[tuple[re.Pattern[str], str], ...]  # this machine's, as literals
    users: frozenset[str]
    hosts: frozenset[str]


@dataclass(frozen=True)
class Sanitizer:
    """Replacements for one machine: known roots, extra patterns and gathered identifiers."""

    roots: tuple[tuple[str, str], ...] = ()  # (folder, label), most specific first
    words: tuple[tuple[re.Pattern[str], str], ...] = ()  # extra (pattern, label), applied last
    known: Identifiers = field(default_factory=Identifiers)

    @classmethod
    def for_this_host(cls, *, repo: Path | None = None, evidence: Path | None = None,
                      environ: Mapping[str, str] | None = None) -> Sanitizer:
        known = gather(environ)
        roots: list[tuple[str, str]] = []
        for root, label in ((evidence, "<evidence>"), (repo, "<repo>")):
            if root is not None:
                roots += [(variant, label) for variant in {str(root), str(root.resolve())}]
        roots += list(known.roots)
        home = os.path.expanduser("~")
        if home not in ("/", "~"):
            roots.append((home, "~"))
        return cls(tuple(roots), (), known)

    @cached_property
    def _compiled(self) -> _Compiled:
        known = self.known
        values = {v: label for v, label in known.values if len(v) >= 2}
        roots = {r.rstrip("/"): label for r, label in (*self.roots, *known.roots)
                 if len(r.rstrip("/")) > 1}
        hosts = [h for h in known.hosts if len(h) >= 2]
        users = [u for u in known.users if len(u) >= 2]
        names: list[tuple[re.Pattern[str], str]] = []
        contextual: list[tuple[re.Pattern[str], str]] = []
        in_paths: list[tuple[re.Pattern[str], str]] = []
        for group, label, flags, keys in ((hosts, "<host>", re.I, _HOST_KEYS),
                                          (users, "<user>", 0, _USER_KEYS)):
            common = [n for n in group if n.lower() in COMMON_WORDS]
            rare = [n for n in group if n.lower() not in COMMON_WORDS]
            if rare:
                names.append((re.compile(rf"(?<![\w<]){_rare(rare)}(?![\w>])", flags), label))
            if group:
                in_paths.append((re.compile(rf"(?<![A-Za-z0-9]){_rare(group)}(?![A-Za-z0-9])",
                                            flags), label))
            if common:
                alt = _alternation(common)
                at = (rf"(?<![\w<-])(?:{alt})(?=@)" if label == "<user>"
                      else rf"(?<=@)(?:{alt})(?![\w-])")
                contextual.append((re.compile(at, flags), label))
                contextual.append((re.compile(
                    rf"(?i)(?<![a-z])((?:{keys})[\"']?\s*[=:]\s*[\"']?)(?:{alt})(?![\w-])"),
                    rf"\1{label}"))
        found = [a for a in (normal_address(t) for t in known.addresses) if a]
        macs = [a for a in found if patterns.MAC.fullmatch(a)]
        ips = [a for a in found if a not in macs]
        addresses = tuple((re.compile(r"(?i)(?<![\w:.-])(?:" + _alternation(group)
                                      + r")(?![\w:-]|\.\d)"), label)
                          for group, label in ((macs, "<mac>"), (ips, "<ip>")) if group)
        return _Compiled(
            values=re.compile(_alternation(values)) if values else None,
            value_labels=values,
            roots=(re.compile(r"(?:(?<![\w.-])|" + patterns.ESCAPED + ")(" + _alternation(roots)
                              + ")" + patterns.PATH_END + "(" + patterns.TAIL.pattern + ")")
                   if roots else None),
            root_labels=roots,
            names=tuple(names), contextual=tuple(contextual), in_paths=tuple(in_paths),
            addresses=addresses,
            users=frozenset(users), hosts=frozenset(h.lower() for h in hosts))

    # -- text ------------------------------------------------------------------------------------
    def path_name(self, name: str) -> str:
        """A name kept from a path (its last component, or a known root's tail), names replaced."""
        for pattern, label in self._compiled.in_paths:
            name = pattern.sub(label, name)
        return name

    @cached_property
    def _memo(self) -> dict[tuple[str, str], str]:
        return {}

    def text(self, value: str, key: str = "") -> str:
        """`value` with every identifier replaced; `key` (a JSON key) decides version contexts.

        Remembered per (value, key): a profiler trace repeats the same operator names and types
        hundreds of thousands of times, and every pattern is a pass over the string."""
        memo = self._memo
        found = memo.get((value, key))
        if found is None:
            if len(memo) > 500_000:
                memo.clear()
            found = memo[(value, key)] = self._text(value, key)
        return found

    def _text(self, value: str, key: str) -> str:
        c = self._compiled
        if c.values is not None:
            value = c.values.sub(lambda m: c.value_labels[m.group(0)], value)
        value = patterns.secrets(value)
        value = patterns.people(value)
        if c.roots is not None:
            value = c.roots.sub(self._root, value)
        value = patterns.tilde_users(value)
        value = patterns.abs_paths(value, self.path_name)
        for pattern, label in (*c.names, *c.contextual):
            value = pattern.sub(label, value)
        value = patterns.at_known_host(value)
        for pattern, label in c.addresses:
            value = pattern.sub(label, value)
        value = patterns.addresses(value, f"{key}=" if key else "")
        for pattern, label in self.words:
            value = pattern.sub(label, value)
        return value

    def _root(self, match: re.Match[str]) -> str:
        # The rest of the path is kept, with any known name in it replaced.
        return self._compiled.root_labels[match.group(1)] + self.path_name(match.group(2))

    def value(self, obj: Any, key: str = "", versions: bool = False) -> Any:
        """A JSON-ready value with every string (keys included) sanitized.

        `key` is the value's key (its list's key for an item), the context of the string; a
        string that is a bare dotted quad under a key or `field` that names a version, or
        anywhere below a section of versions (`source_pin`...), is a version.
        """
        if isinstance(obj, str):
            return self._field(obj, key, versions)
        if isinstance(obj, dict):
            field_name = obj.get("field", obj.get("name"))
            named = isinstance(field_name, str) and bool(patterns.VERSION_WORD.search(field_name))
            return {self.text(str(k)): self.value(
                v, str(k), versions or named or str(k) in _VERSION_SECTIONS
                or bool(patterns.VERSION_WORD.search(str(k).replace("_", " "))))
                for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.value(v, key, versions) for v in obj]
        return obj

    def _field(self, text: str, key: str, versions: bool) -> str:
        c = self._compiled
        low = key.lower()
        if (text and not text.startswith("<") and patterns.SECRET_NAME.search(key)
                and (key.isupper() or patterns.looks_secret(text))):
            return "<secret>"  # an environment-style secret-named variable, or a secret's shape
        if re.fullmatch(_USER_KEYS, low) and text in c.users:
            return "<user>"
        if re.fullmatch(_HOST_KEYS, low) and text.lower() in c.hosts:
            return "<host>"
        if versions and patterns.IPV4.fullmatch(text.strip()):
            return text  # a bare four-part version under a version key, field or section
        return self.text(text, key)

    # -- files -----------------------------------------------------------------------------------
    def files(self, folder: Path, suffixes: Iterable[str] = TEXT_SUFFIXES,
              skip: frozenset[Path] = frozenset()) -> int:
        """Rewrite every text file below folder in place and rename every file or folder whose
        name identifies; returns how many files or names changed. JSON (and each JSONL line) is
        sanitized as values, so that keys give their context; other text as text. Files in
        ``skip`` (resolved paths, scrubbed already) are not read. A file whose
        clean copy cannot be written stays as it was and the others go on; then the first such
        failure rises (WriteFailed)."""
        changed = 0
        wanted = tuple(suffixes)
        failed: list[WriteFailed] = []
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or path.is_symlink() or not path.name.endswith(wanted):
                continue
            if skip and path.resolve() in skip:  # scrubbed already during the run
                continue
            raw = path.read_text(encoding="utf-8", errors="replace")
            clean = self._file_text(path.suffix, raw)
            if clean != raw:
                try:  # a full disk: this file stays as it was, no temporary left; go on
                    atomic_write(path, clean, suffix=".sanitizing")
                except WriteFailed as exc:
                    failed.append(exc)
                    continue
                changed += 1
        # Deepest first, so that a folder is renamed after what it holds.
        for path in sorted(folder.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            name = self.text(path.name)
            if name != path.name:
                target = path.with_name(name)
                for n in range(2, 1000):
                    if not target.exists():
                        break
                    target = path.with_name(f"{name}-{n}")
                path.rename(target)
                changed += 1
        if failed:
            raise failed[0]
        return changed

    def _file_text(self, suffix: str, raw: str) -> str:
        if suffix == ".json":
            with contextlib.suppress(ValueError):
                data = json.loads(raw)
                clean = self.value(data)
                return raw if clean == data else json.dumps(clean, indent=2) + "\n"
        if suffix == ".jsonl":
            return "".join(self._json_line(line) for line in raw.splitlines(keepends=True))
        if suffix in (".html", ".htm"):
            return self._html(raw)
        return self.text(raw)

    def _html(self, raw: str) -> str:
        # A <script> element is code, not data: pytest-html's app reads the run's data from an
        # attribute (scrubbed like all text), and its code holds regex literals such as
        # `/^all$/.test(...)` that the path pattern would turn into `<abs>/...`, breaking the
        # report's script (its environment table, summary and results would not render).
        parts = _SCRIPT.split(raw)
        return "".join(part if index % 2 else _LABEL.sub(r"&lt;\1&gt;", self.text(part))
                       for index, part in enumerate(parts))

    def _json_line(self, line: str) -> str:
        try:
            data = json.loads(line)
        except ValueError:
            return self.text(line)
        clean = self.value(data)
        if clean == data:
            return line
        return json.dumps(clean, sort_keys=True) + ("\n" if line.endswith("\n") else "")


def _rare(names: Iterable[str]) -> str:
    return "(?:" + _alternation(names) + ")"
