"""What the sanitizer gathers from the machine it runs on (identifiers.gather: the environment,
the host name, the interfaces' addresses, which it reads with `ip -j addr` in a subprocess)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ref2va_accept.evidence.sanitize import Sanitizer
from ref2va_accept.evidence.sanitize._identifiers import environment_values, gather


def test_environment_values_are_found_by_name_and_shape() -> None:
    env = {
        "GIT_URL": "https://bot:glpat-abc123def456@git.corp.example/ml/r.git",
        "BUILD_URL": "https://ci.corp.example/job/r/7/", "NODE_NAME": "gpu-node-3",
        "WORKSPACE": "/lustre/ws/r", "JOB_NAME": "ml/r-nightly", "HF_TOKEN": "hf_shortish1",
        "MY_SECRET": "true", "AUTH_MODE": "basic", "API_KEY": "123456", "REF2VA_HIDE": "aurora,x",
        "HOSTNAME": "fake-host.example", "PATH": "/usr/bin", "LANG": "C.UTF-8",
    }
    found = environment_values(env)
    values = dict(found.values)
    assert values[env["GIT_URL"]] == "<url>" and values[env["BUILD_URL"]] == "<url>"
    assert values["glpat-abc123def456"] == "<secret>" and values["hf_shortish1"] == "<secret>"
    assert values["ml/r-nightly"] == values["aurora"] == "<hidden>"
    assert "true" not in values and "basic" not in values and "123456" not in values
    assert "x" not in values and "/usr/bin" not in values and "C.UTF-8" not in values
    assert {"git.corp.example", "git", "ci.corp.example", "ci"} <= set(found.hosts)
    assert "bot" in found.users and found.roots == (("/lustre/ws/r", "<workspace>"),)
    everything = gather(env)
    assert {"gpu-node-3", "fake-host.example", "fake-host"} <= set(everything.hosts)


def test_for_this_host_hides_what_the_machine_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("socket.gethostname", lambda: "vm")
    monkeypatch.setattr("socket.getfqdn", lambda: "vm.lab.example.org")
    monkeypatch.setattr("getpass.getuser", lambda: "root")
    env = {"USER": "zqx", "GIT_URL": "https://ci:tok3n-abc@git.example.org/r.git"}
    sanitizer = Sanitizer.for_this_host(repo=Path("/srv/r"), evidence=Path("/srv/r/evidence"),
                                        environ=env)
    text = "vm ran /srv/r/x.py as zqx (root@vm) for the root cause; https://ci:tok3n-abc@git.example.org/r.git"
    assert sanitizer.text(text) == ("<host> ran <repo>/x.py as <user> (<user>@<host>) for the root "
                                    "cause; <url>")
