"""The evidence carries no host or user names, addresses, absolute paths or secrets, and ordinary
text (versions, routes, clock times, the word "root") survives. Each rule both ways."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ref2va_accept.evidence.sanitize import Identifiers, Sanitizer

pytestmark = pytest.mark.fast

KNOWN = Identifiers(
    hosts=("npu-host-07.lab.example.org", "npu-host-07", "gp", "built-in"),
    users=("alice", "root"),
    addresses=("192.0.2.15", "fe80::fc:ff:fe00:1", "42:62:04:05:13:4a"),
    values=(("https://bot:t0ken-x9@git.example.com/org/repo.git", "<url>"),
            ("s3cr3t-value-123", "<secret>")),
    roots=(("/workspace/b", "<workspace>"),),
)
ROOTS = (("/srv/checkouts/ref2va/evidence/run1", "<evidence>"),
         ("/srv/checkouts/ref2va", "<repo>"), ("/home/alice", "~"))


@pytest.fixture
def sanitizer() -> Sanitizer:
    return Sanitizer(ROOTS, (), KNOWN)


HIDDEN = [
    # known roots, on a path boundary only
    ("log at /srv/checkouts/ref2va/evidence/run1/logs/a.log", "log at <evidence>/logs/a.log"),
    ("File /srv/checkouts/ref2va/src/x.py, line 3", "File <repo>/src/x.py, line 3"),
    ("cache in /home/alice/.cache/h3", "cache in ~/.cache/h3"),
    ("/workspace/b/y and /workspace/b", "<workspace>/y and <workspace>"),
    ("/workspace/bob/x", "<abs>/x"),  # not under the root /workspace/b
    ("/srv/checkouts/ref2va-old/x.py", "<abs>/x.py"),
    # any absolute path, whatever its root, keeps its last name
    ("model /data/models/MiniMax-H3 loaded", "model <abs>/MiniMax-H3 loaded"),
    ("/lustre/proj/u1/ckpt.pt /gpfs/a/b /dev/shm/x/y", "<abs>/ckpt.pt <abs>/b <abs>/y"),
    ("/model/H3/w.safetensors and /cfs/t/u.bin", "<abs>/w.safetensors and <abs>/u.bin"),
    ("/workspace/carol/run/log.txt", "<abs>/log.txt"),
    ("home folders /home/bob and /workspace/carol/", "home folders <abs>/<user> and <abs>/<user>"),
    ("file:///mnt/weights/dino.pth", "file://<abs>/dino.pth"),
    ("PYTHONPATH=/opt/x/lib:/data/y/src", "PYTHONPATH=<abs>/lib:<abs>/src"),
    ("saved to /data/run/out.mp4.", "saved to <abs>/out.mp4."),
    ('"line\\n/srv/checkouts/ref2va/src/x.py"', '"line\\n<repo>/src/x.py"'),
    ("\x1b[1m/data/a/b.py", "\x1b[1m<abs>/b.py"),
    ("tmp /tmp/pytest-of-root/pytest-3", "tmp <abs>/pytest-3"),
    ("kept name /data/alice-runs/pytest-of-root", "kept name <abs>/pytest-of-<user>"),
    # ~user
    ("~carol/data and ~/x", "~<user>/data and ~/x"),
    # people
    ("mail bob.smith@corp.example.com please", "mail <email> please"),
    ("bob@gpu12:~$ ls", "<user>@<host>:~$ ls"),
    ("carol@gp:~$ ls", "<user>@<host>:~$ ls"),
    # credentials and secrets
    ("https://carol:pa55word@github.com/o/r.git", "https://<user>:<secret>@github.com/o/r.git"),
    ("https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/o/r",
     "https://<secret>@github.com/o/r"),
    ("hf_abcdefghijklmnopqrstuvwxyz012345 AKIAIOSFODNN7EXAMPLE", "<secret> <secret>"),
    ("xoxb-1234567890-abcdefghij glpat-abcdefghij0123456789", "<secret> <secret>"),
    ("token=9f86d081884c7d659a2feaa0c55ad015", "token=<secret>"),
    ('secret: "aGVsbG8gd29ybGQgc2VjcmV0MTIz"', 'secret: "<secret>"'),
    ("password=hunter2 PASSWD: x", "password=<secret> PASSWD: <secret>"),
    ('{"api_key": "a1b2c3d4e5f6g7h8i9j0"}', '{"api_key": "<secret>"}'),
    ("Authorization: Bearer abcdefghijklmnop0123456789", "Authorization: Bearer <secret>"),
    ("--hf-token abcdefgh12345678ijkl", "--hf-token <secret>"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----", "<secret>"),
    # addresses
    ("serving on http://10.1.2.3:8000/v1/videos/sync", "serving on http://<ip>:8000/v1/videos/sync"),
    ("connect to 10.1.2.3. Then", "connect to <ip>. Then"),
    ("bound [::1]:8000 and fe80::1", "bound [<ip>]:8000 and <ip>"),
    ("2001:db8::8a2e:370:7334", "<ip>"),
    ("mac aa:bb:cc:dd:ee:ff AA-BB-CC-DD-EE-FF", "mac <mac> <mac>"),
    ("listening on 192.0.2.15 mac 42:62:04:05:13:4a", "listening on <ip> mac <mac>"),
    # known names: FQDN, short (two characters too), users
    ("worker on npu-host-07.lab.example.org", "worker on <host>"),
    ("started by alice on npu-host-07", "started by <user> on <host>"),
    ("tmp dir pytest-of-alice", "tmp dir pytest-of-<user>"),
    ("gp is up; GP too", "<host> is up; <host> too"),
    # a common word as a name: only where it names someone
    ("root@gp:~# ls; user=root; /home/root", "<user>@<host>:~# ls; user=<user>; <abs>/<user>"),
    ("NODE_NAME=built-in", "NODE_NAME=<host>"),
    # the environment's values
    ("git https://bot:t0ken-x9@git.example.com/org/repo.git", "git <url>"),
    ("export X=s3cr3t-value-123", "export X=<secret>"),
]


@pytest.mark.parametrize(("raw", "clean"), HIDDEN)
def test_identifying_text_is_replaced(sanitizer: Sanitizer, raw: str, clean: str) -> None:
    assert sanitizer.text(raw) == clean
    assert sanitizer.text(clean) == clean  # sanitizing twice changes nothing


SURVIVES = [
    "POST /v1/videos/sync HTTP/1.1",
    "GET /health 200",
    "http://example.com/a/b/c",
    "vLLM-Omni::DiffusionWorker-0 exited",
    "12:34:56 step 3/50 at 0.5 s/step",
    "relative fixtures/inputs/reference.png and ./x/y",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "alicea and malice are other words",
    "the root cause is in the root folder",
    "built-in defaults",
    # versions: after a version word, as a longer dotted number, or not an address at all
    "NPU driver 24.1.0.3, firmware: 7.5.0.1, version=1.2.3.4, v24.1.0.3",
    '"npu_driver": "24.1.0.3", "cann": "8.0.0.1"',
    "1.2.3.4.5 and 256.1.1.1 and 01.02.03.04",
    "key=abc and the token is short",
    '{"key": "host_identity", "value": 3}',
    "image@sha256:abcd torch@2.13.0",
    "~5 s and ~/x",
    "<repo>/src/x.py &lt;abs&gt;/y.log",
]


@pytest.mark.parametrize("text", SURVIVES)
def test_ordinary_text_is_left_alone(sanitizer: Sanitizer, text: str) -> None:
    assert sanitizer.text(text) == text


def test_version_rule_decides_on_context_both_ways(sanitizer: Sanitizer) -> None:
    assert sanitizer.text("driver 24.1.0.3") == "driver 24.1.0.3"
    assert sanitizer.text("host 24.1.0.3") == "host <ip>"
    assert sanitizer.text("npu_driver: drift, frozen '24.1.0.3', host '24.1.0.4'") == \
        "npu_driver: drift, frozen '24.1.0.3', host '24.1.0.4'"
    assert sanitizer.text("driver loaded; peer 24.1.0.3") == "driver loaded; peer <ip>"
    assert sanitizer.text("driver connected to 24.1.0.3") == "driver connected to <ip>"
    # This machine's own address is hidden even where a version word would keep a dotted quad.
    assert sanitizer.text("build 192.0.2.15, build 192.0.2.16") == "build <ip>, build 192.0.2.16"
    assert sanitizer.text("24.1.0.3", key="npu_driver") == "24.1.0.3"
    assert sanitizer.text("24.1.0.3", key="address") == "<ip>"
    assert sanitizer.value({"firmware": ["7.5.0.1"], "peer": "7.5.0.1"}) == {
        "firmware": ["7.5.0.1"], "peer": "<ip>"}
    # An identity row: the field names a version, so its bare values are versions; its free
    # text is judged by its own words.
    row = {"field": "npu_driver", "frozen": "24.1.0.3", "host": "24.1.0.4",
           "source": "npu-smi on 10.1.2.3"}
    assert sanitizer.value(row) == row | {"source": "npu-smi on <ip>"}
    assert sanitizer.value({"source_pin": {"mindie_sd": "1.0.0.1"}}) == {
        "source_pin": {"mindie_sd": "1.0.0.1"}}


def test_nested_values_and_keys_are_sanitized(sanitizer: Sanitizer) -> None:
    value = {"/home/alice/x": ["10.0.0.1", {"host": "npu-host-07"}], "n": 3, "ok": True}
    assert sanitizer.value(value) == {"~/x": ["<ip>", {"host": "<host>"}], "n": 3, "ok": True}


def test_fields_name_their_content(sanitizer: Sanitizer) -> None:
    assert sanitizer.value({"user": "root", "owner": "root", "note": "root", "node": "built-in",
                            "HF_TOKEN": "x1", "MY_PASSWORD": "abc", "key": "host_identity",
                            "cache_key": "9f86d081884c7d659a2f"}) == {
        "user": "<user>", "owner": "<user>", "note": "root", "node": "<host>",
        "HF_TOKEN": "<secret>", "MY_PASSWORD": "<secret>", "key": "host_identity",
        "cache_key": "<secret>"}


def test_files_in_a_run_folder_are_rewritten_and_renamed(sanitizer: Sanitizer,
                                                          tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "b0.log").write_text("listening on 192.168.1.20 as alice\n")
    (tmp_path / "report.html").write_text("<td>/home/alice/ref2va/tests/t.py on gp</td>")
    (tmp_path / "media" / "npu-host-07").mkdir(parents=True)
    (tmp_path / "media" / "npu-host-07" / "clip-alice.mp4").write_bytes(b"\x00/home/alice")
    assert sanitizer.files(tmp_path) == 4
    assert (tmp_path / "logs" / "b0.log").read_text() == "listening on <ip> as <user>\n"
    # In HTML a label is text, not a tag the browser would swallow.
    assert (tmp_path / "report.html").read_text() == "<td>~/ref2va/tests/t.py on &lt;host&gt;</td>"
    # Names are renamed; media is not text, its bytes stay.
    assert (tmp_path / "media" / "<host>" / "clip-<user>.mp4").read_bytes() == b"\x00/home/alice"
    assert sanitizer.files(tmp_path) == 0


def test_sanitized_json_stays_valid(sanitizer: Sanitizer) -> None:
    text = json.dumps({"path": "/home/alice/a \"b\".txt", "ip": "127.0.0.1"})
    assert json.loads(sanitizer.text(text)) == {"path": '~/a "b".txt', "ip": "<ip>"}


def test_report_environment_table_is_an_allowlist() -> None:
    from ref2va_accept.plugin._reporting import pytest_metadata

    metadata = {"Python": "3.11.7", "Platform": "Linux", "Packages": {"pytest": "8"},
                "Plugins": {"html": "4"}, "GIT_URL": "https://u:t@h/r.git", "NODE_NAME": "n1",
                "BUILD_URL": "https://ci/x", "WORKSPACE": "/ws", "JAVA_HOME": "/opt/j"}
    same = metadata
    pytest_metadata(metadata, None)  # type: ignore[arg-type]
    assert same is metadata  # changed in place: an xdist worker sends back the same dict
    assert set(metadata) == {"Python", "Platform", "Packages", "Plugins", "ref2va-accept"}
    assert metadata["Packages"]["pytest"] and "pydantic" in metadata["Packages"]


def test_a_reports_script_is_code_and_stays_as_written(tmp_path: Path) -> None:
    # pytest-html's app is an inline script with regex literals; scrubbed as text, its
    # `/^all$/.test(...)` became `<abs>/...` and the report's tables never rendered.
    script = ("<script>function f(c,r){switch(true){\n"
              "case /^all$/.test(c) || c === null && /^all$/.test(r):\n"
              "  return '/usr/share/x';}}</script>")
    page = (f"<html><head>{script}</head><body>"
            "<div data-jsonblob=\"log at /home/alice/run/x.log\">from /lustre/alice/m</div>"
            "</body></html>")
    (tmp_path / "report.html").write_text(page)
    Sanitizer((), ()).files(tmp_path)
    clean = (tmp_path / "report.html").read_text()
    assert script in clean
    assert "/home/alice" not in clean and "/lustre/alice" not in clean
    assert "&lt;abs&gt;/x.log" in clean and "&lt;abs&gt;/m" in clean
