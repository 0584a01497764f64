"""The evidence's record models (evidence/_*_records.py): the published schema is the one they
generate, the closed sets they spell out are their writers', and what they read dumps back
unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest

from ref2va_accept.cli import _schema as cli_schema
from ref2va_accept.cli import main
from ref2va_accept.evidence import (
    SCHEMA_PATH,
    SECTIONS,
    Bundle,
    EvidenceLogError,
    LatencyData,
    LatencyRatioCheck,
    LatencyStopped,
    LedgerEntry,
    NoData,
    Sample,
    check_record,
    payload,
    schema_text,
)
from ref2va_accept.evidence import _bundle_records as bundle_records
from ref2va_accept.evidence import _closed_sets as records

pytestmark = pytest.mark.fast


# -- the published schema ------------------------------------------------------------------------

def test_the_committed_schema_is_the_one_the_records_generate() -> None:
    problem = cli_schema.stale_schema()
    assert problem is None, f"{problem} (src/ref2va_accept/schemas/evidence.schema.json)"


def test_a_schema_that_differs_or_is_missing_names_the_command_that_writes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    published = tmp_path / "evidence.schema.json"
    monkeypatch.setattr(cli_schema, "SCHEMA_PATH", published)
    assert "is missing; run `ref2va-accept schema`" in str(cli_schema.stale_schema())
    published.write_text(schema_text().replace('"sample_id"', '"sample"', 1))
    assert "run `ref2va-accept schema` to regenerate it" in str(cli_schema.stale_schema())
    assert main(["schema", "--check"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ref2va-accept schema: evidence.schema.json is not the schema")
    assert main(["schema"]) == 0 and published.read_text() == schema_text()
    assert main(["schema", "--check"]) == 0 and cli_schema.stale_schema() is None


def test_the_schema_generated_refuses_what_the_models_refuse(tmp_path: Path) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
    good = _bundle()
    assert list(validator.iter_errors(good)) == []
    for path, value in ((("checks", 0, "data", "interval", "verdict"), "passed"),
                        (("checks", 0, "reason"), "open_checks"),  # a verdict's reason
                        (("samples",), [{"sample_id": "s"}]),
                        (("status",), "done")):
        bad = json.loads(json.dumps(good))
        target = bad
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        assert list(validator.iter_errors(bad)), path
        with pytest.raises(ValueError):
            Bundle.model_validate(bad)


# -- the closed sets: defined once in evidence/_closed_sets.py, used by their writers -------------

def test_the_closed_sets_are_those_of_the_modules_that_write_them() -> None:
    from ref2va_accept.tensors import _comparison as comparison

    assert set(get_args(records.PointStatus)) == set(get_args(comparison.Status))


def test_the_sections_are_the_bundles_optional_keys() -> None:
    optional = {name for name, field in Bundle.model_fields.items() if not field.is_required()}
    assert optional == set(bundle_records.SECTION_KEYS) == SECTIONS


# -- reading and dumping back --------------------------------------------------------------------

def _latency_check() -> dict[str, Any]:
    from ref2va_accept.judging import judge_latency
    from tests.unit.latency_doubles import INSTANCE, latency_run

    runs = [latency_run("b0", [300], warmups=[340, 305]), latency_run("fast", [140], [150]),
            latency_run("b0", [310]), latency_run("fast", [139]),
            latency_run("b0", [295]), latency_run("fast", [142])]
    check = next(c for c in judge_latency("5s-lossless", "fast", runs, INSTANCE)
                 if c.name == "latency_ratio")
    recorded: dict[str, Any] = json.loads(json.dumps(check.json_dict()))
    return recorded


def _bundle() -> dict[str, Any]:
    return {"schema": "ref2va-evidence/1", "run_id": "20260101T000000Z-abcdef",
            "status": "complete", "started_at": "2026-01-01T00:00:00+00:00",
            "finished_at": "2026-01-01T00:10:00+00:00", "harness_version": "0.1.0",
            "environment": {"python": "3.11.7", "implementation": "cpython",
                            "machine": "x86_64", "system": "Linux",
                            "packages": {"torch": None}},
            "campaign": None, "verdicts": [], "checks": [_latency_check()], "instances": [],
            "samples": [], "media": [], "notes": []}


def test_a_latency_check_reads_into_typed_figures_and_dumps_back_unchanged() -> None:
    raw = _latency_check()
    check = check_record(raw)
    assert isinstance(check, LatencyRatioCheck) and isinstance(check.data, LatencyData)
    interval = check.data.interval
    assert interval is not None and interval.verdict == "supported"
    assert interval.interval.lower is not None and interval.interval.lower < interval.target
    assert [i.arm for i in check.data.instances] == ["b0", "fast"] * 3
    assert check.json_dict() == raw
    stopped = check_record({**raw, "status": "open", "data": {"stopped_on": "x"}})
    assert isinstance(stopped.data, LatencyStopped)


def test_numbers_keep_the_type_they_were_written_with() -> None:
    raw = _latency_check()
    raw["data"]["instances"][0]["value_s"] = 300  # an int stays an int, a float a float
    back = check_record(raw).json_dict()
    assert back == raw and isinstance(back["data"]["instances"][0]["value_s"], int)
    assert json.dumps(back) == json.dumps(raw)


def test_a_check_name_selects_its_data_and_an_empty_data_is_no_data() -> None:
    raw = {"track": "t", "arm": "c1", "name": "lossless_gate", "status": "fail",
           "reason": "candidate_request_failed", "detail": "timeout", "data": {}}
    assert isinstance(check_record(raw).data, NoData)
    with pytest.raises(ValueError, match=r"b0_media\.data\.sample_id"):
        check_record({**raw, "name": "b0_media"})  # media checks always record their sample
    with pytest.raises(ValueError, match="does not match any of the expected tags"):
        check_record({**raw, "name": "lossless_gates"})
    with pytest.raises(ValueError, match="a verdict's reason"):
        check_record({**raw, "reason": "open_checks"})


def test_an_absent_key_stays_absent_and_a_null_stays_null() -> None:
    # A writer that leaves a key out is read back without it, not with a null put in.
    launched = {"arm": "b0", "instance": "i1", "argv": [], "env": {}, "port": 1,
                "startup_timeout_s": 60, "shutdown_grace_s": 5.0, "log": "i1.log",
                "track": "5s-lossless", "run": "r"}
    typed = payload("instance", launched)
    assert typed.cleanup is None and typed.json_dict() == launched
    sample = Sample.model_validate({**_sample(), "dump_dir": None})
    assert sample.json_dict()["dump_dir"] is None and "dump_dir" not in Sample.model_validate(
        _sample()).json_dict()


def _sample() -> dict[str, Any]:
    return {"sample_id": "s", "arm": "b0", "track": "t", "kind": "measured", "index": 0,
            "seed": 1, "started_at": "2026-01-01T00:00:00+00:00", "ok": True, "failure": None,
            "detail": None, "status": 200, "latency_s": 1.0, "ttfb_s": 0.5, "body_bytes": 1,
            "sha256": None, "content_type": None, "server_request_id": None,
            "server_model": None, "inference_time_s": None, "stage_durations": None,
            "peak_memory_mb": None, "media_file": None, "extra": {},
            "request": {"fields": {}, "references": []}}


def test_an_earlier_ledger_entry_keeps_the_keys_this_judge_does_not_know() -> None:
    older = {"schema": "ref2va-ledger/1", "kind": "attempt", "run_id": "r", "run_status":
             "complete", "retired_field": {"x": 1}}
    entry = LedgerEntry.model_validate(older)
    assert entry.run_id == "r" and entry.json_dict() == older
    without_kind = {k: v for k, v in older.items() if k != "kind"}
    entry = LedgerEntry.model_validate(without_kind)  # before run entries: an attempt
    assert entry.kind == "attempt" and entry.json_dict() == without_kind
    with pytest.raises(ValueError, match="schema"):
        LedgerEntry.model_validate({**older, "schema": "ref2va-ledger/2"})


def test_an_unknown_section_or_event_is_named() -> None:
    with pytest.raises(EvidenceLogError, match="event 3: unknown section 'hostname'"):
        payload("section", {"key": "hostname", "value": "x"}, "event 3")
    with pytest.raises(EvidenceLogError, match="event 4: unknown evidence event 'gossip'"):
        payload("gossip", {}, "event 4")
    with pytest.raises(EvidenceLogError, match="event 1: start event lacks run_id"):
        payload("start", {k: v for k, v in _bundle().items() if k != "run_id"}, "event 1")
