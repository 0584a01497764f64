"""The evidence carries no host names, user names, IP addresses or absolute paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ref2va_accept.sanitize import Sanitizer


@pytest.fixture
def sanitizer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Sanitizer:
    monkeypatch.setattr("socket.gethostname", lambda: "npu-host-07")
    monkeypatch.setattr("socket.getfqdn", lambda: "npu-host-07.lab.example.org")
    monkeypatch.setattr("getpass.getuser", lambda: "alice")
    monkeypatch.setenv("HOME", "/home/alice")
    return Sanitizer.for_this_host(repo=Path("/srv/checkouts/ref2va"),
                                   evidence=Path("/srv/checkouts/ref2va/evidence/run1"))


@pytest.mark.parametrize("raw, clean", [
    ("log at /srv/checkouts/ref2va/evidence/run1/logs/a.log", "log at <evidence>/logs/a.log"),
    ("File /srv/checkouts/ref2va/src/x.py, line 3", "File <repo>/src/x.py, line 3"),
    ("cache in /home/alice/.cache/h3", "cache in ~/.cache/h3"),
    ("model /data/models/MiniMax-H3 loaded", "model <abs>/MiniMax-H3 loaded"),
    ("file:///mnt/weights/dino.pth", "file://<abs>/dino.pth"),
    ("serving on http://10.1.2.3:8000/v1/videos/sync", "serving on http://<ip>:8000/v1/videos/sync"),
    ("bound [::1]:8000 and fe80::1", "bound [<ip>]:8000 and <ip>"),
    ("worker on npu-host-07.lab.example.org", "worker on <host>"),
    ("started by alice on npu-host-07", "started by <user> on <host>"),
    ("tmp dir pytest-of-alice", "tmp dir pytest-of-<user>"),
])
def test_identifying_text_is_replaced(sanitizer: Sanitizer, raw: str, clean: str) -> None:
    assert sanitizer.text(raw) == clean


@pytest.mark.parametrize("text", [
    "POST /v1/videos/sync HTTP/1.1",
    "vLLM-Omni::DiffusionWorker-0 exited",
    "12:34:56 step 3/50",
    "relative fixtures/inputs/reference.png",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "alicea and malice are other words",
])
def test_ordinary_text_is_left_alone(sanitizer: Sanitizer, text: str) -> None:
    assert sanitizer.text(text) == text


def test_nested_values_and_keys_are_sanitized(sanitizer: Sanitizer) -> None:
    value = {"/home/alice/x": ["10.0.0.1", {"host": "npu-host-07"}], "n": 3, "ok": True}
    assert sanitizer.value(value) == {"~/x": ["<ip>", {"host": "<host>"}], "n": 3, "ok": True}


def test_files_in_a_run_folder_are_rewritten(sanitizer: Sanitizer, tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "b0.log").write_text("listening on 192.168.1.20 as alice\n")
    (tmp_path / "report.html").write_text("<td>/home/alice/ref2va/tests/t.py</td>")
    (tmp_path / "clip.mp4").write_bytes(b"\x00/home/alice")
    assert sanitizer.files(tmp_path) == 2
    assert (tmp_path / "logs" / "b0.log").read_text() == "listening on <ip> as <user>\n"
    assert "alice" not in (tmp_path / "report.html").read_text()
    assert (tmp_path / "clip.mp4").read_bytes() == b"\x00/home/alice"  # media is not text


def test_sanitized_json_stays_valid(sanitizer: Sanitizer) -> None:
    text = json.dumps({"path": "/home/alice/a \"b\".txt", "ip": "127.0.0.1"})
    assert json.loads(sanitizer.text(text)) == {"path": '~/a "b".txt', "ip": "<ip>"}
