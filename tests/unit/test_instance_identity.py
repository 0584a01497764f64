"""One identity per engine lifetime, and the server that answers must be the instance's own."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ref2va_accept.arms import Arms
from ref2va_accept.arms import _arms as workload
from ref2va_accept.campaign import load_campaign
from ref2va_accept.core import ForeignServerError
from ref2va_accept.engines import InstanceRegistry, free_port
from ref2va_accept.evidence import EvidenceBundle
from ref2va_accept.evidence.sanitize import Sanitizer
from ref2va_accept.planning import plan_track
from tests.unit.suite_runner import (
    CHEAP_STEPS,
    ROOT,
    bundle,
    campaign_variant,
    only_run,
    run_pytest,
)

REFERENCE = ROOT / "fixtures/campaigns/reference.yaml"
TRACK = "5s-lossless"


def _arms(tmp_path: Path, registry: InstanceRegistry) -> Arms:
    evidence = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    campaign = load_campaign(REFERENCE)
    return Arms(campaign, plan_track(campaign, TRACK), evidence, registry)


@pytest.mark.fast
def test_instance_numbers_run_across_the_tests_of_a_session(tmp_path: Path) -> None:
    registry = InstanceRegistry()
    # Two tests of one session: each builds its own Arms over the session's registry.
    first, second = _arms(tmp_path / "a", registry), _arms(tmp_path / "b", registry)
    ids = [arms.launch_spec(arms.plan.arm("b0")).instance_id for arms in (first, second, first)]
    assert ids == [f"{TRACK}.b0.1", f"{TRACK}.b0.2", f"{TRACK}.b0.3"]


def test_a_track_run_gives_every_lifetime_its_own_id_log_and_audit(tmp_path: Path) -> None:
    # The acceptance scenarios of one track: four tests, five engine lifetimes, each test with
    # its own Arms (the counter used to restart in each, and audits overwrote each other).
    evidence = tmp_path / "evidence"
    campaign = campaign_variant(tmp_path / "c", steps=CHEAP_STEPS)
    # In a subprocess: in this process (plugin_sessions.run_in_checkout) the run measured 3 to 5 s
    # slower, three times out of three (issue 43), for a reason not found yet.
    result = run_pytest("tests/acceptance", "-m", "5s and lossless", "--campaign",
                        str(campaign), "--evidence-dir", str(evidence), timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
    instances = bundle(evidence)["instances"]
    ids = [i["instance"] for i in instances]
    assert len(ids) >= 5 and len(set(ids)) == len(ids), ids
    assert all("cleanup" in i and i["cleanup"]["instance"] == i["instance"] for i in instances)
    logs = {p.stem for p in (only_run(evidence) / "logs").iterdir()}
    assert logs == set(ids)
    assert len({i["log"] for i in instances}) == len(ids)


class _Answering(http.server.BaseHTTPRequestHandler):
    """Another server: answers /health with 200 and any generation with 200 and a body."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port on which another HTTP server (of this process, not the instance) answers."""
    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Answering)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        server.shutdown()
        server.server_close()


def test_a_foreign_server_on_the_port_is_its_own_reason_and_is_never_judged(
        tmp_path: Path, held_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workload, "free_port", lambda: held_port)  # the port chosen, then taken
    registry = InstanceRegistry()
    audits: list[object] = []
    registry.subscribe(audits.append)
    arms = _arms(tmp_path, registry)
    with pytest.raises(ForeignServerError, match=f"port {held_port} is not this instance"):
        arms.start("b0")
    checks = arms.evidence.checks_where(track=TRACK, arm="b0")
    assert [(c.name, c.status, c.reason) for c in checks] == [
        ("engine_start", "fail", "foreign_server")]
    assert "no request was sent to it" in checks[0].detail
    assert arms.evidence.record.samples == [] and arms.started == []
    # The instance's own processes are stopped; the port was never its own to free.
    (audit,) = audits
    assert audit.clean, audit.problems  # type: ignore[attr-defined]
