"""A run records the host identity preflight, and a drift from the frozen pins caps every
verdict: the 5 s lossless smoke scenario run as a user runs it, in a pytest session of its own."""

from __future__ import annotations

from pathlib import Path

import yaml


def test_a_run_records_the_preflight_and_a_drift_caps_every_verdict(tmp_path: Path) -> None:
    from ref2va_accept.campaign import freeze
    from tests.unit.plugin_sessions import run_in_checkout
    from tests.unit.suite_runner import CHEAP_STEPS, bundle, campaign_variant

    pin = {"python": "2.7.18", "torch": "2.13.0+cpu", "av": "18.1.0", "av_ffmpeg": "8.1.2"}
    campaign = campaign_variant(tmp_path / "c", steps=CHEAP_STEPS)
    data = yaml.safe_load(campaign.read_text())
    data["engine"]["source_pin"] = pin
    campaign.write_text(yaml.safe_dump(data, sort_keys=False))
    freeze(campaign)  # frozen: the identity alone must cap the verdicts
    result = run_in_checkout("tests/acceptance/test_b0_output.py", "-m", "lossless and 5s",
                             "--campaign", str(campaign), "--evidence-dir", str(tmp_path / "ev"))
    assert result.returncode == 0, result.stdout[-3000:]
    run = bundle(tmp_path / "ev")
    assert run["campaign"]["freeze"]["state"] == "frozen"
    rows = {r["field"]: r for r in run["host_identity"]["rows"]}
    assert rows["python"]["status"] == "DRIFT" and rows["python"]["frozen"] == "2.7.18"
    assert rows["torch"]["status"] == "match"
    failed = [c for c in run["checks"] if c["name"] == "host_identity"]
    assert failed and all(c["status"] == "fail" and c["reason"] == "protocol_deviation"
                          for c in failed)
    assert "python: DRIFT, frozen '2.7.18'" in failed[0]["detail"]
    assert all("protocol_deviation" in v["reasons"] for v in run["verdicts"])
    assert run["device_memory"]["status"] == "not_applicable"
    assert "device_memory_release" not in {c["name"] for c in run["checks"]}
