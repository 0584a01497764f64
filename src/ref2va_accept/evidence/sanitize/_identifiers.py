"""What identifies this machine and its users, gathered once when a run starts.

Host names (FQDN and short, from the resolver, `/etc/hostname` and the environment's HOSTNAME,
HOST, COMPUTERNAME, NODE_NAME and CI runner names), user names (getpass, USER, LOGNAME, USERNAME,
SUDO_USER, the uid's passwd entry, CI actors), the interfaces' addresses (IPv4, IPv6, MAC; from
`ip -j addr` when present, else `/sys/class/net` and `/proc/net`), and environment values:
any value that is a URL, any value of a variable whose name names a secret (token, secret,
password, key, credential, auth), CI's well-known identifying variables, and whatever
`REF2VA_HIDE` lists (comma-separated: site names, project names).
"""

from __future__ import annotations

import contextlib
import getpass
import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ref2va_accept.evidence.sanitize._patterns import SECRET_NAME

HIDE_ENV = "REF2VA_HIDE"
HOST_VARS = ("HOSTNAME", "HOST", "COMPUTERNAME", "NODE_NAME", "RUNNER_NAME", "CI_SERVER_HOST",
             "AGENT_MACHINENAME", "AGENT_NAME")
USER_VARS = ("USER", "LOGNAME", "USERNAME", "SUDO_USER", "GITHUB_ACTOR", "GITHUB_TRIGGERING_ACTOR",
             "GITLAB_USER_LOGIN", "BUILD_USER_ID", "CHANGE_AUTHOR", "BUILD_REQUESTEDFOR")
ROOT_VARS = ("WORKSPACE", "GITHUB_WORKSPACE", "RUNNER_WORKSPACE", "CI_PROJECT_DIR",
             "CI_BUILDS_DIR", "BUILD_SOURCESDIRECTORY", "AGENT_BUILDDIRECTORY", "JENKINS_HOME")
# Identifying values of CI systems that are neither URLs nor secrets (job, repository, people).
NAMED_VARS = ("JOB_NAME", "JOB_BASE_NAME", "BUILD_TAG", "GITHUB_REPOSITORY",
              "GITHUB_REPOSITORY_OWNER", "CI_PROJECT_PATH", "CI_PROJECT_NAMESPACE",
              "CI_RUNNER_DESCRIPTION", "GITLAB_USER_NAME", "BUILD_USER", "GIT_AUTHOR_NAME",
              "GIT_COMMITTER_NAME", "CHANGE_AUTHOR_DISPLAY_NAME", "BUILD_REQUESTEDFOREMAIL",
              "GITLAB_USER_EMAIL", "BUILD_USER_EMAIL", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL",
              "CHANGE_AUTHOR_EMAIL")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://\S+$")
# Values a secret-named variable may hold that are settings, not secrets.
_SETTINGS = frozenset({"true", "false", "none", "null", "yes", "no", "on", "off", "enabled",
                       "disabled", "default", "required", "optional", "basic", "bearer",
                       "token", "oauth", "oauth2", "kerberos", "ldap", "local", "auto"})
NOT_HOSTS = frozenset({"localhost", "localhost.localdomain", "localdomain", "ip6-localhost"})


@dataclass(frozen=True)
class Identifiers:
    """Values to hide, as found on one machine (or planted by a test)."""

    hosts: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    addresses: tuple[str, ...] = ()  # this machine's IPv4, IPv6 and MAC addresses
    values: tuple[tuple[str, str], ...] = ()  # (value, label): replaced wherever they appear
    roots: tuple[tuple[str, str], ...] = ()  # (folder, label): replaced on a path boundary


def _host_variants(name: str) -> list[str]:
    name = name.strip().rstrip(".")
    if len(name) < 2 or name.lower() in NOT_HOSTS or _is_address(name):
        return []
    short = name.split(".", 1)[0]
    return [name] + ([short] if short != name and len(short) >= 2 else [])


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True


def host_names(environ: Mapping[str, str]) -> list[str]:
    found = [socket.gethostname(), socket.getfqdn()]
    with contextlib.suppress(OSError):
        found.append(Path("/etc/hostname").read_text(encoding="utf-8").strip())
    found += [environ.get(name, "") for name in HOST_VARS]
    return [v for name in found for v in _host_variants(name)]


def user_names(environ: Mapping[str, str]) -> list[str]:
    found = [environ.get(name, "") for name in USER_VARS]
    with contextlib.suppress(KeyError, OSError):
        found.append(getpass.getuser())
    with contextlib.suppress(ImportError, KeyError, AttributeError):
        import pwd  # noqa: PLC0415 - not on every platform

        found.append(pwd.getpwuid(os.getuid()).pw_name)
    return [name.strip() for name in found if len(name.strip()) >= 2]


def _ip_json() -> list[str]:
    """Addresses from `ip -j addr` (iproute2), empty when it is absent or fails."""
    tool = shutil.which("ip")
    if tool is None:
        return []
    try:
        out = subprocess.run([tool, "-j", "addr"], capture_output=True, text=True, timeout=5,
                             check=True).stdout
        links = json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError):
        return []
    found: list[str] = []
    for link in links if isinstance(links, list) else []:
        found.append(str(link.get("address", "")))
        found += [str(a.get("local", "")) for a in link.get("addr_info", [])]
    return found


def _proc_addresses() -> list[str]:
    found: list[str] = []
    names = [name for _, name in socket.if_nameindex()] if hasattr(socket, "if_nameindex") else []
    for name in names:
        with contextlib.suppress(OSError):
            found.append(Path("/sys/class/net", name, "address").read_text().strip())
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            raw = line.split()[0] if line.split() else ""
            if len(raw) == 32:
                found.append(":".join(raw[i:i + 4] for i in range(0, 32, 4)))
    with contextlib.suppress(OSError):
        # fib_trie lists each local IPv4 address on the line before "/32 host LOCAL".
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
        found += [lines[i - 1].split()[-1] for i, line in enumerate(lines)
                  if "/32 host LOCAL" in line and i > 0]
    with contextlib.suppress(OSError):
        found += [str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)]
    return found


def normal_address(text: str) -> str | None:
    """An address as written in logs (compressed IPv6, lower-case MAC); None for loopback,
    unspecified or all-zero ones, which the generic patterns replace anyway."""
    text = text.strip().split("%", 1)[0]
    if re.fullmatch(r"[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5,19}", text):
        return None if set(text) <= {"0", ":"} else text.lower()
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    return None if address.is_loopback or address.is_unspecified else address.compressed


def interface_addresses() -> list[str]:
    found = _ip_json() + _proc_addresses()
    return sorted({a for a in (normal_address(t) for t in found) if a})


def _hidden_value(value: str) -> bool:
    """A secret-named variable's value worth hiding: 6+ characters, not a plain setting/number."""
    plain = value.strip().lower()
    return len(plain) >= 6 and plain not in _SETTINGS and not plain.replace(".", "").isdigit()


def environment_values(environ: Mapping[str, str]) -> Identifiers:
    hosts: list[str] = []
    users: list[str] = []
    values: list[tuple[str, str]] = []
    roots: list[tuple[str, str]] = []
    for name, raw in environ.items():
        value = raw.strip()
        if not value:
            continue
        if name in ROOT_VARS and value.startswith("/") and value != "/":
            roots.append((value.rstrip("/"), "<workspace>"))
        elif name in NAMED_VARS and len(value) >= 3:
            values.append((value, "<hidden>"))
        elif _URL.match(value):
            values.append((value, "<url>"))
            parts = urlsplit(value)
            hosts += _host_variants(parts.hostname or "")
            users += [parts.username] if parts.username and len(parts.username) >= 2 else []
            if parts.password and len(parts.password) >= 4:
                values.append((parts.password, "<secret>"))
        elif SECRET_NAME.search(name) and _hidden_value(value):
            values.append((value, "<secret>"))
    for value in environ.get(HIDE_ENV, "").split(","):
        if len(value.strip()) >= 2:
            values.append((value.strip(), "<hidden>"))
    return Identifiers(hosts=tuple(hosts), users=tuple(users), values=tuple(values),
                       roots=tuple(roots))


def gather(environ: Mapping[str, str] | None = None) -> Identifiers:
    """Everything this machine and its environment tell about who and where it is."""
    env = os.environ if environ is None else environ
    found = environment_values(env)
    return Identifiers(
        hosts=_unique([*host_names(env), *found.hosts]),
        users=_unique([*user_names(env), *found.users]),
        addresses=tuple(interface_addresses()),
        values=found.values,
        roots=found.roots,
    )


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(i for i in items if i))
