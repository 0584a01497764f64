"""Property: identifiers of every kind, planted at random into every kind of file a bundle holds
(log text, JSON values and keys, JSONL lines, HTML, file and folder names) through the bundle's own
write paths, are all gone once the run is scrubbed; what must survive (versions, routes, the word
"root") survives; and the bundle still reads back whole."""

from __future__ import annotations

import html
import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ref2va_accept.evidence import EvidenceBundle, rebuild
from ref2va_accept.evidence.sanitize import COMMON_WORDS, Identifiers, Sanitizer

pytestmark = pytest.mark.fast

ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
# What ordinary evidence says; planted names never equal one of these words.
SURVIVORS = ("NPU driver 24.1.0.3", "firmware: 7.5.0.1", "POST /v1/videos/sync HTTP/1.1",
             "the root cause", "step 3/50 at 12:34:56", "vLLM-Omni::DiffusionWorker-0")


def _bundle_words() -> set[str]:
    """Every word an empty bundle writes by itself (keys, schema, package names...)."""
    with tempfile.TemporaryDirectory() as tmp:
        bundle = EvidenceBundle.create(Path(tmp), "20260101T000000Z-abcdef", Sanitizer())
        bundle.finish("complete", lambda checks: [])
        bundle.sanitize_files()
        text = " ".join(p.read_text() for p in bundle.folder.rglob("*") if p.is_file())
    return {w.lower() for w in re.findall(r"[A-Za-z0-9]+", text)}


VOCABULARY = {w.lower() for s in SURVIVORS for w in re.findall(r"[A-Za-z0-9]+", s)} | {
    "engine", "started", "request", "served", "by", "seed", "ok", "html", "td", "tr", "pre",
    "div", "class", "log", "json", "mp4", "jsonl", "measured", "smoke", "instance", "env", "run",
    "argv", "note", "sample", "events", "evidence", "media", "logs", "dumps", "report", "point",
    "enabled", "path", "check", "data", "kind", "value", "key", "host", "identity", "ref2va",
    "lossless", "quality", "h3", "bin", "x", "cache", "weights", "mail", "clone", "git", "example",
    "com", "org", "export", "home", "token", "aws", "hf", "peer", "mac", "listening", "as", "on",
} | _bundle_words()


def _name(min_size: int) -> st.SearchStrategy[str]:
    # A letter first and a digit somewhere: a name, never one of the bundle's own words (`null`).
    return st.text(ALNUM, min_size=min_size, max_size=10).filter(
        lambda s: s[0].isalpha() and any(c.isdigit() for c in s) and s not in COMMON_WORDS
        and s not in VOCABULARY)


@dataclass(frozen=True)
class Planted:
    host: str
    domain: str
    user: str
    other_user: str
    ipv4: str
    ipv6: str
    mac: str
    email: str
    token: str
    aws: str
    url_secret: str
    env_secret: str
    path_dirs: str
    hex_secret: str

    @property
    def fqdn(self) -> str:
        return f"{self.host}.{self.domain}.example"

    def identifiers(self) -> Identifiers:
        return Identifiers(hosts=(self.fqdn, self.host), users=(self.user,),
                           values=((self.env_secret, "<secret>"),))

    def phrases(self) -> list[str]:
        """Each identifier in a context as it would be printed."""
        return [f"engine started on {self.fqdn}", f"served by {self.host}", f"as {self.user}",
                f"listening on {self.ipv4}.", f"peer [{self.ipv6}]:8000", f"mac {self.mac}",
                f"mail {self.email}", f"HF {self.token}", f"aws {self.aws}",
                f"clone https://{self.user}:{self.url_secret}@git.example.com/r.git",
                f"export X={self.env_secret}", f"weights {self.path_dirs}/h3.bin",
                f"home ~{self.other_user}/cache", f"token={self.hex_secret}",
                f"/home/{self.other_user}", f"{self.other_user}@{self.host}"]

    def file_names(self) -> list[str]:
        """Identifiers that can stand in a file name (no '/')."""
        return [self.host, self.user, self.ipv4, self.mac.replace(":", "-"), self.email,
                self.token]

    def leaks(self, text: str) -> list[str]:
        found = [v for v in (self.ipv4 + ".", self.mac, self.email, self.token, self.aws,
                             self.url_secret, self.env_secret, self.path_dirs, self.hex_secret,
                             self.fqdn) if v in text]
        found += [v for v in (self.ipv4, self.ipv6) if re.search(
            rf"(?<![\w.:]){re.escape(v)}(?![\w:]|\.\d)", text)]
        found += [v for v in (self.host, self.user, self.other_user) if re.search(
            rf"(?<![A-Za-z0-9]){re.escape(v)}(?![A-Za-z0-9])", text, re.I)]
        return found


def _mac(raw: bytes, sep: str) -> str:
    return sep.join(f"{b:02x}" for b in raw)


planted = st.builds(
    Planted,
    host=_name(2), domain=_name(3), user=_name(2), other_user=_name(3),
    ipv4=st.tuples(*[st.integers(1, 254)] * 4).map(lambda t: ".".join(map(str, t))),
    ipv6=st.ip_addresses(v=6).filter(
        lambda a: not (a.is_loopback or a.is_unspecified or a.ipv4_mapped or a.sixtofour
                       or a.teredo) and a.exploded.count("0000") < 6).map(lambda a: a.compressed),
    mac=st.binary(min_size=6, max_size=6).filter(lambda b: len(set(b)) > 2).map(
        lambda b: _mac(b, ":")),
    email=st.tuples(_name(3), _name(3)).map(lambda t: f"{t[0]}.x@{t[1]}.example.org"),
    token=st.text(ALNUM + "ABCXYZ", min_size=24, max_size=36).map(lambda s: "hf_" + s),
    aws=st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16).map(
        lambda s: "AKIA" + s),
    url_secret=st.text(ALNUM, min_size=8, max_size=20).map(lambda s: "p" + s),
    env_secret=st.text(ALNUM, min_size=10, max_size=20).map(lambda s: "s3" + s),
    path_dirs=st.tuples(st.sampled_from(["/lustre", "/gpfs", "/dev/shm", "/model", "/cfs",
                                         "/workspace", "/data/team"]), _name(3), _name(3)).map(
        lambda t: f"{t[0]}/{t[1]}/{t[2]}"),
    hex_secret=st.text("0123456789abcdef", min_size=32, max_size=40).filter(
        lambda s: any(c.isalpha() for c in s) and any(c.isdigit() for c in s)),
)


def _sample(index: int, text: str, media_file: str) -> dict[str, Any]:
    """A sample as the workload records it, `text` where a failure's words go."""
    return {"sample_id": f"b0-smoke-{index}", "arm": "b0", "track": "5s-lossless",
            "kind": "smoke", "index": index, "seed": 42, "started_at": "2026-01-01T00:00:00+00:00",
            "ok": True, "failure": text, "detail": text, "status": 200, "latency_s": 1.0,
            "ttfb_s": 0.9, "body_bytes": 12, "sha256": None, "content_type": "video/mp4",
            "server_request_id": None, "server_model": None, "inference_time_s": None,
            "stage_durations": None, "peak_memory_mb": None, "media_file": media_file,
            "extra": {}, "request": {"fields": {"prompt": text}, "references": []}}


def _write_bundle(folder: Path, p: Planted, order: list[int]) -> EvidenceBundle:
    """One bundle written through the bundle's own paths, identifiers planted everywhere."""
    phrases = [p.phrases()[i % len(p.phrases())] for i in order] + p.phrases()
    text = " ; ".join([*phrases, *SURVIVORS])
    bundle = EvidenceBundle.create(folder, "20260101T000000Z-abcdef",
                                   Sanitizer((), (), p.identifiers()))
    names = p.file_names()
    instance = f"5s-lossless.b0.1-{names[order[0] % len(names)]}"
    # JSON values and keys (events.jsonl, evidence.json)
    bundle.add_instance({"arm": "b0", "instance": instance, "argv": text.split(" ; "),
                         "env": {p.user: text, "HOSTNAME": p.fqdn}, "port": 1,
                         "startup_timeout_s": 60.0, "shutdown_grace_s": 5.0,
                         "log": bundle.log_path(instance).name, "track": "5s-lossless",
                         "run": bundle.run_id})
    bundle.note(text)
    bundle.set_section("host_identity", {"engine_kind": "vllm-omni", "ok": True, "rows": [
        {"field": "npu_driver", "frozen": "24.1.0.3", "host": "24.1.0.3", "status": "match",
         "source": text}]})
    # JSONL lines (samples.jsonl) with a media file whose name holds identifiers
    for index, name in enumerate(names):
        media = bundle.media_path("5s-lossless", "b0", f"smoke-{index}-{name}.mp4")
        media.write_bytes(b"\x00\x00\x00\x18ftypmp42")
        bundle.add_sample(_sample(index, text, bundle.relative(media)))
    # an engine's log, a dump folder and its JSON, written raw as the engine writes them
    bundle.log_path(instance).write_text("\n".join(phrases + list(SURVIVORS)) + "\n")
    dump = bundle.dump_dir("5s-lossless", instance, f"quality-{names[-1]}")
    dump.mkdir(parents=True)
    (dump / "enabled_path.json").write_text(json.dumps(
        {"root": f"{p.path_dirs}/h3.bin", "by": p.user, p.host: text}))
    # the HTML report, escaped as pytest-html escapes and raw in an attribute
    (bundle.folder / "report.html").write_text(
        f"<html><body><pre>{html.escape(text)}</pre><div data-x=\"{html.escape(text)}\">"
        f"{p.fqdn}</div></body></html>")
    bundle.finish("complete", lambda checks: [])
    bundle.sanitize_files()
    return bundle


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=planted, order=st.lists(st.integers(0, 50), min_size=1, max_size=6))
def test_planted_identifiers_leave_no_trace_in_any_file(p: Planted, order: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        bundle = _write_bundle(Path(tmp), p, order)
        folder = bundle.folder
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder).as_posix()
            assert not p.leaks(relative), (relative, p.leaks(relative))
            if path.is_file():
                content = path.read_bytes().decode("utf-8", errors="replace")
                assert not p.leaks(content), (relative, p.leaks(content))
        log = next((folder / "logs").iterdir()).read_text()
        for survivor in SURVIVORS:
            assert survivor in log, (survivor, log)
        # Still one consistent bundle: the JSON parses, the event log rebuilds it, and every
        # media file it names is where it says (names were renamed alike).
        data = json.loads((folder / "evidence.json").read_text())
        assert rebuild(folder).json_dict() == data
        assert data["host_identity"]["rows"][0]["frozen"] == "24.1.0.3"
        for sample in data["samples"]:
            assert (folder / sample["media_file"]).is_file(), sample["media_file"]
        assert [json.loads(line) for line in
                (folder / "samples.jsonl").read_text().splitlines()] == data["samples"]


@settings(max_examples=150, deadline=None)
@given(p=planted, noise=st.text(max_size=40))
def test_sanitizing_is_idempotent(p: Planted, noise: str) -> None:
    assume(not p.leaks(noise))  # noise that is itself a bare identifier has no context
    sanitizer = Sanitizer((("/srv/r", "<repo>"),), (), p.identifiers())
    once = sanitizer.text(noise + " " + " ; ".join(p.phrases()) + " " + noise)
    assert sanitizer.text(once) == once
    assert not p.leaks(once)
