"""Shapes that identify a machine, a person or a secret on any machine, needing no knowledge of it.

Each function takes text and returns it with the shape replaced by a label. The rules that keep
ordinary text intact are decided here, once:

- an absolute path is one of two or more components after a start that is not part of a word, a
  relative path or a URL (`file:///x/y` is a path; `http://h/x/y` is not); an HTTP route (after a
  method, or under `/v1/`...) is not a path. A path keeps its last name only: `<abs>/name`, or
  `<abs>/<user>` for a home folder itself (`/home/bob`, `/workspace/bob`);
- a dotted quad is an IPv4 address when every part is 0-255 without a leading zero, it is not
  part of a longer dotted number (`1.2.3.4.5`) or glued to a word (`v24.1.0.3`), and no version
  word (`version`, `v`, `driver`, `firmware`, `fw`, `release`, `build`, `cann`, `rev`, `kernel`,
  `bios`, alone or as a key's part: `npu_driver`) comes before it in the same clause (48
  characters, not past a newline, `;` or `|`) without an address word (`ip`, `addr`, `listen`,
  `connect`, `peer`, `http`, `server`, `via`, `host=`...) after it. A JSON value is also a version
  under a version-named key or field, or anywhere under `source_pin`, `host_identity`,
  `packages`. An IP that ends a sentence (`10.0.0.1.`) is one;
- a secret is recognised by its shape (`hf_`, `ghp_`, `AKIA...`, `xoxb-`, `glpat-`, `sk-`, JWTs,
  private key blocks), by a URL's credentials, after `Bearer`/`Basic`, or as the value assigned
  to a secret-named key (`token=`, `api_key:`, `"password": "..."`, `--hf-token X`): any value
  for a password, one of 16+ characters mixing letters and digits for the others.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# A path component stops at whitespace, quotes, brackets, list and assignment separators, a
# backslash (an escape in JSON text), '&' (an entity in HTML) and glob characters.
_COMP = r"[^\s'\"`<>:,;|()\[\]{}=\\&*?/]+"
# Where an absolute path may start: after `://` (file:///x) or after anything that does not
# make it part of a word, a relative path, a placeholder (`<repo>/x`, `&lt;repo&gt;/x`) or `~/x`;
# after an HTML tag (`<pre>/x/y`) it may.
# A JSON or ANSI escape just before (`\\n/x/y`, `\x1b[1m/x/y`) does not make it part of a word.
ESCAPED = r"(?<=\\[ntr])|(?<=\dm)"
LABELS = ("repo", "evidence", "workspace", "abs", "user", "host", "ip", "mac", "email", "secret",
           "url", "hidden")
PATH_START = (r"(?:(?<=://)|" + ESCAPED + r"|(?<![\w.~</$-]))(?<!&gt;)(?<!&#62;)"
              + "".join(f"(?<!<{label}>)" for label in LABELS))
# What may follow a known root for it to be that root: the end of the path or a further component.
PATH_END = r"(?![^\s'\"`<>:,;|()\[\]{}=\\&*?/])"
ABS_PATH = re.compile(PATH_START + r"(/" + _COMP + r"(?:/" + _COMP + r")+/?)")
TAIL = re.compile(r"(?:/" + _COMP + r")*/?")
_METHOD_BEFORE = re.compile(r"(?:GET|POST|PUT|DELETE|PATCH|HEAD|OPTIONS) $")
_ROUTE = re.compile(r"/v\d+(?:/|$)")
HOME_DIRS = frozenset({"home", "Users", "users", "workspace", "scratch", "u", "people"})

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
IPV4 = re.compile(r"(?<![\w.])" + r"\.".join([_OCTET] * 4) + r"(?!\w|\.\d)")
VERSION_WORD = re.compile(r"(?i)(?<![a-z])(?:v|ver|version|versions|driver|firmware|fw|release|"
                          r"build|cann|rev|revision|kernel|bios)(?![a-z])")
_ADDRESS_WORD = re.compile(r"(?i)(?<![a-z])(?:ip|ipv4|inet|addr\w*|listen\w*|connect\w*|bind|bound|"
                           r"peer\w*|https?|server|proxy|gateway|dns|via|route|remote|client|"
                           r"host(?:name)?\s*[=:@])(?![a-z])")
# An IPv6 address with '::' or the full eight groups; a clock time (12:34:56) or a C++/process
# name such as `vLLM-Omni::DiffusionWorker` is not one.
IPV6 = re.compile(
    r"(?<![\w:.])(?:"
    r"(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}"
    r"|(?:[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4})*)?::(?:[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4})*)?"
    r")(?![\w:])")
# Six (Ethernet) to twenty (InfiniBand) pairs of hex digits, one separator throughout.
MAC = re.compile(r"(?<![\w:-])[0-9A-Fa-f]{2}([:-])(?:[0-9A-Fa-f]{2}\1){4,18}[0-9A-Fa-f]{2}"
                 r"(?![\w:-])")

EMAIL = re.compile(r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?![\w-])")
# user@host as a shell prompt or scp target prints it (no domain; an email is matched first).
_USER_AT_HOST = re.compile(r"(?<![\w.%+@-])([a-z_][a-z0-9_.-]{0,31})@([A-Za-z][\w-]*)"
                           r"(?![\w.@-])")
_NOT_A_HOST = re.compile(r"(?i)(?:sha\d*|md5|blake\d*|v?\d.*|latest|main|head)$")
URL_CREDENTIALS = re.compile(
    r"(?i)\b([a-z][a-z0-9+.-]*://)([^/\s:@'\"<>]+)(?::([^/\s@'\"<>]*))?@")
TOKENS = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"
    r"|(?<![A-Za-z0-9])(?:"
    r"hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}|xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{35}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r")(?![A-Za-z0-9])")
_BEARER = re.compile(r"(?i)\b(bearer|basic|token)(\s+)([A-Za-z0-9._~+/=-]{16,})")
# A key that names a secret: one of these words, not inside a longer word (`monkey`, `author`).
SECRET_WORD = (r"(?<![A-Za-z])(?:token|secret|passw(?:or)?d|credentials?|auth|"
               r"api[_-]?key|access[_-]?key|private[_-]?key|key)s?(?![a-z])")
SECRET_NAME = re.compile(r"(?i)[A-Za-z0-9_.-]*?" + SECRET_WORD)
_VALUE = r"([^\s'\",;&<>]+)"
# The key starts where a name may (so the scan is not retried inside every word).
_ASSIGNED = re.compile(r"(?i)(?<![A-Za-z0-9_.-])([A-Za-z0-9_.-]*?" + SECRET_WORD
                       + r"[A-Za-z0-9_.-]*)(\"?\s*[=:]\s*[\"']?)" + _VALUE)
_FLAG = re.compile(r"(?i)(--[A-Za-z0-9_.-]*?" + SECRET_WORD + r"[A-Za-z0-9_.-]*)(\s+)" + _VALUE)
_PASSWORD = re.compile(r"(?i)passw(?:or)?d")
_SECRET_SHAPE = re.compile(r"[A-Za-z0-9+/=_.~-]{16,}")


def abs_paths(text: str, name: Callable[[str], str]) -> str:
    """Every absolute path as `<abs>/last-name` (`name` rewrites the kept name)."""

    def replace(match: re.Match[str]) -> str:
        path = match.group(1)
        start = match.start(1)
        if _ROUTE.match(path) or _METHOD_BEFORE.search(text, max(0, start - 8), start):
            return path
        dots = len(path) - len(path.rstrip("."))
        core = path[: len(path) - dots] if dots else path
        parts = [p for p in core.split("/") if p]
        if not parts:
            return path
        if len(parts) == 2 and parts[0] in HOME_DIRS:
            return "<abs>/<user>" + "." * dots
        return f"<abs>/{name(parts[-1])}" + "." * dots

    return ABS_PATH.sub(replace, text)


def is_version_context(before: str) -> bool:
    """A version word earlier in the same clause (48 characters, not past a newline, `;` or `|`)
    and no address word after it: `NPU driver 24.1.0.3`, `npu_driver: drift, frozen '24.1.0.3'`."""
    clause = re.split(r"[\n;|]", before)[-1][-48:]
    words = list(VERSION_WORD.finditer(clause))
    return bool(words) and not _ADDRESS_WORD.search(clause, words[-1].end())


def ipv4(text: str, context: str = "") -> str:
    """Dotted quads that are addresses (not versions) as `<ip>`; `context` precedes `text`."""

    def replace(match: re.Match[str]) -> str:
        before = context + text[max(0, match.start() - 48): match.start()]
        return match.group(0) if is_version_context(before) else "<ip>"

    return IPV4.sub(replace, text)


def addresses(text: str, context: str = "") -> str:
    text = MAC.sub("<mac>", text)
    text = ipv4(text, context)
    return IPV6.sub("<ip>", text)


def _assigned(match: re.Match[str]) -> str:
    key, separator, value = match.groups()
    if value.startswith("<"):
        return match.group(0)
    if _PASSWORD.search(key) or looks_secret(value):
        return f"{key}{separator}<secret>"
    return match.group(0)


def looks_secret(value: str) -> bool:
    """16+ characters of a token's alphabet, with letters and digits."""
    return (_SECRET_SHAPE.fullmatch(value) is not None and any(c.isdigit() for c in value)
            and any(c.isalpha() for c in value))


def _user_at_host(match: re.Match[str]) -> str:
    if _NOT_A_HOST.match(match.group(2)):
        return match.group(0)
    return "<user>@<host>"


def secrets(text: str) -> str:
    """Credentials in URLs, token shapes, Bearer values and secret-named assignments."""

    def credentials(match: re.Match[str]) -> str:
        scheme, _user, password = match.groups()
        return f"{scheme}<user>:<secret>@" if password is not None else f"{scheme}<secret>@"

    text = URL_CREDENTIALS.sub(credentials, text)
    text = TOKENS.sub("<secret>", text)
    text = _BEARER.sub(r"\1\2<secret>", text)
    text = _ASSIGNED.sub(_assigned, text)
    return _FLAG.sub(_assigned, text)


def people(text: str) -> str:
    """E-mail addresses as `<email>`, `user@host` as `<user>@<host>`."""
    text = EMAIL.sub("<email>", text)
    return _USER_AT_HOST.sub(_user_at_host, text)


_AT_KNOWN_HOST = re.compile(r"(?<![\w.%+@<-])[A-Za-z_][\w.-]{0,31}@(?=<host>)")


def at_known_host(text: str) -> str:
    """`bob@<host>`, once a known host is replaced (even one shaped like a version, `v0`)."""
    return _AT_KNOWN_HOST.sub("<user>@", text)


def tilde_users(text: str) -> str:
    """`~bob/...` as `~<user>/...` (`~/...` is the home folder and stays)."""
    return re.sub(r"(?<![\w~/.-])~[A-Za-z_][\w.-]*(?=/)", "~<user>", text)
