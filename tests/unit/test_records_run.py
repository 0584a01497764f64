"""A real run's evidence through the record models: evidence.json reads into records.Bundle and
dumps back to the very same text, and its event log projects to the same bundle."""

from __future__ import annotations

import json
from pathlib import Path

from ref2va_accept.evidence import (
    EVENTS_FILE,
    EVIDENCE_FILE,
    B0MediaCheck,
    Bundle,
    CleanupCheck,
    bundle_text,
    project,
    read_events,
)
from tests.unit.plugin_sessions import run_in_checkout
from tests.unit.suite_runner import CHEAP_STEPS, campaign_variant, only_run


def test_a_real_runs_bundle_reads_into_the_records_and_dumps_back_unchanged(
        tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    campaign = campaign_variant(tmp_path / "c", steps=CHEAP_STEPS)
    result = run_in_checkout("tests/acceptance/test_b0_output.py", "-m", "lossless and 5s",
                             "--campaign", str(campaign), "--evidence-dir", str(evidence))
    assert result.returncode == 0, result.stdout[-3000:]
    run = only_run(evidence)
    text = (run / EVIDENCE_FILE).read_text()
    bundle = Bundle.model_validate_json(text)
    # Byte for byte: evidence.json is the records' own dump (records.bundle_text).
    assert bundle_text(bundle) == text
    assert bundle.json_dict() == json.loads(text)
    assert project(read_events(run / EVENTS_FILE)) == bundle
    # Typed all the way down: what a reader gets is attributes, never keys.
    assert bundle.status == "complete" and bundle.campaign is not None
    media = bundle.checks_of(B0MediaCheck)
    assert [(c.track, c.status) for c in media] == [("5s-lossless", "pass")]
    sample = bundle.samples[0]
    assert sample.ok and sample.latency_s is not None and sample.sample_id == \
        media[0].data.sample_id
    assert bundle.media_of(sample.sample_id) is not None
    assert all(i.cleanup is not None and i.cleanup.clean for i in bundle.instances)
    assert {c.data.instance for c in bundle.checks_of(CleanupCheck)} == {
        i.instance for i in bundle.instances}
    assert bundle.disk is not None and bundle.host_identity is not None
