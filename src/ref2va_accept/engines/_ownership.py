"""Is the server that answers on an instance's port the instance itself?

A health check alone trusts whoever answers: with the chosen port taken by another server between
`free_port` and the engine's bind (another run, a leftover, a port-squatting process), the engine
fails to bind while the other server answers `/health`, and its output would be judged as ours.
Two proofs, checked once the port first answers and before any request is sent:
- the listening socket on the port belongs to a process of the instance (its tree or its tag);
  when none does, the processes that hold it are named;
- the reference engine echoes the nonce the judge gave it (`INSTANCE_NONCE_ENV` ->
  `INSTANCE_NONCE_HEADER`); vLLM-Omni has no such echo, so for it the socket's owner alone.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping

import psutil

from ref2va_contract.api import INSTANCE_NONCE_HEADER


def new_nonce() -> str:
    return secrets.token_hex(16)


def _listens_on(connections: Iterable[object], port: int) -> bool:
    return any(getattr(c, "status", None) == psutil.CONN_LISTEN
               and getattr(getattr(c, "laddr", None), "port", None) == port for c in connections)


def _name(pid: int | None) -> str:
    if pid is None:
        return "a process this user cannot see"
    try:
        return f"{psutil.Process(pid).name()}[{pid}]"
    except psutil.Error:
        return f"pid {pid}"


def foreign_server_problem(port: int, own: Iterable[psutil.Process],
                           headers: Mapping[str, str], nonce: str | None) -> str | None:
    """Why the server answering on `port` is not the instance (None when it is).

    `own` are the instance's processes; `headers` the first 200 answer's (any case); `nonce` the
    value the engine must echo, None for an engine kind that echoes none.
    """
    own = list(own)
    own_pids = {p.pid for p in own}
    owner = False
    for proc in own:
        try:
            owner = owner or _listens_on(proc.net_connections(kind="tcp"), port)
        except psutil.Error:
            continue
    problems: list[str] = []
    if not owner:
        # (When the instance listens, another holder shares its socket: an inherited descriptor,
        # which the cleanup audit reports if it outlives the instance.)
        try:
            others = sorted({c.pid or 0 for c in psutil.net_connections(kind="tcp")
                             if _listens_on([c], port) and c.pid not in own_pids})
        except psutil.Error:
            others = []
        problems.append("no process of the instance listens on it"
                        + (", it is held by " + ", ".join(_name(pid or None) for pid in others)
                           if others else ""))
    if nonce is not None:
        echoed = {k.lower(): v for k, v in headers.items()}.get(INSTANCE_NONCE_HEADER.lower())
        if echoed != nonce:
            problems.append(f"{INSTANCE_NONCE_HEADER} was "
                            + ("absent" if echoed is None else "another instance's nonce"))
    if not problems:
        return None
    return f"the server answering on port {port} is not this instance: " + "; ".join(problems)
