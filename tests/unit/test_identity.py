"""Host identity: the structured source_pin, the probes' parsers on recorded/synthetic outputs,
match / DRIFT / unfilled / not found, a missing tool, the checks it adds and the CLI."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from ref2va_accept.campaign import Campaign, load_campaign, unfilled_fields, validate_model
from ref2va_accept.campaign.identity import (
    HostProbes,
    IdentityToolMissing,
    SourcePin,
    compare,
    flatten_pin,
    identity_checks,
    parse_cann_install_info,
    parse_npu_smi_board,
    parse_tool_version,
    preflight,
    read_host,
    vllm_omni_origin,
)
from ref2va_accept.campaign.identity._host_check import import_rows
from ref2va_accept.cli import _main as cli
from ref2va_accept.core import CampaignError, Check
from ref2va_accept.judging import judge
from ref2va_accept.timing import latency_verdict
from tests.unit.check_records import make_check

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
DEVICES = ROOT / "fixtures" / "devices"
CAMPAIGNS = ROOT / "fixtures" / "campaigns"
WHEEL_SHA = "141cb0c7b9c07970e5c92a99aab9696e81682dbfa3d2bfcde359c3c1533385f4"


def _fixture(name: str) -> str:
    first, _, rest = (DEVICES / name).read_text().partition("\n")
    assert first.startswith("# source: ")
    return rest


FFMPEG = ("ffmpeg version 6.1.1-3ubuntu5 Copyright (c) 2000-2023 the FFmpeg developers\n"
          "built with gcc 13 (Ubuntu 13.2.0-23ubuntu3)\n")
FFPROBE = FFMPEG.replace("ffmpeg version", "ffprobe version")
CANN_INFO = ("package_name=Ascend-cann-toolkit\nversion=8.3.RC1\n"
             "innerversion=V100R001C23SPC001B235\narch=aarch64\nos=linux\n"
             "path=/usr/local/Ascend/ascend-toolkit/8.3.RC1/aarch64-linux\n")


# --------------------------------------------------------------------------- parsers


def test_board_output_gives_driver_and_firmware() -> None:
    assert parse_npu_smi_board(_fixture("synthetic-npu-smi-info-t-board_a3.txt")) == (
        "25.2.0", "7.7.0.6.236")


@pytest.mark.parametrize("text", [
    "", "Error: the device does not exist\n",
    "NPU ID : 0\nSoftware Version : 25.2.0\nFirmware Version : NA\n",
])
def test_board_output_without_versions_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="Firmware Version"):
        parse_npu_smi_board(text)


def test_tool_version_is_the_token_after_version() -> None:
    assert parse_tool_version("ffmpeg", FFMPEG) == "6.1.1-3ubuntu5"
    assert parse_tool_version("ffprobe", FFPROBE) == "6.1.1-3ubuntu5"
    with pytest.raises(ValueError, match="ffprobe version X"):
        parse_tool_version("ffprobe", FFMPEG)
    with pytest.raises(ValueError, match="first line"):
        parse_tool_version("ffmpeg", "bash: ffmpeg: command not found\n")


def test_cann_install_info_version_line() -> None:
    assert parse_cann_install_info(CANN_INFO) == "8.3.RC1"
    with pytest.raises(ValueError, match="version="):
        parse_cann_install_info("package_name=Ascend-cann-toolkit\n")


@pytest.mark.parametrize(("direct_url", "sha", "commit"), [
    (json.dumps({"url": "file:///w/x.whl", "archive_info": {"hashes": {"sha256": WHEEL_SHA}}}),
     WHEEL_SHA, None),
    (json.dumps({"url": "file:///w/x.whl", "archive_info": {"hash": f"sha256={WHEEL_SHA}"}}),
     WHEEL_SHA, None),
    (json.dumps({"url": "https://github.com/x/y", "vcs_info": {"vcs": "git",
                                                            "commit_id": "a1b2c3d4e5f6"}}),
     None, "a1b2c3d4e5f6"),
    (json.dumps({"url": "file:///src/vllm-omni", "dir_info": {"editable": True}}), None, None),
    (None, None, None),
    ("{not json", None, None),
])
def test_vllm_omni_origin_from_direct_url(direct_url: str | None, sha: str | None,
                                          commit: str | None) -> None:
    got_sha, got_commit, note = vllm_omni_origin(direct_url)
    assert (got_sha, got_commit) == (sha, commit)
    if sha is None and commit is None:
        assert note  # says why, and what the operator can do


# --------------------------------------------------------------------------- the pin model

def _reference_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((CAMPAIGNS / "reference.yaml").read_text())
    return data


def _error(data: dict[str, Any]) -> str:
    with pytest.raises(CampaignError) as info:
        validate_model(Campaign, data, "c.yaml")
    return str(info.value)


def test_bare_string_pin_is_refused_showing_the_structured_form() -> None:
    data = _reference_data()
    data["engine"]["source_pin"] = "reference-engine@repo"
    message = _error(data)
    assert "c.yaml: engine.source_pin: a structured pin for engine kind reference" in message
    assert "python:" in message and "av_ffmpeg" in message
    data["engine"]["kind"] = "vllm-omni"
    message = _error(data)
    assert "vllm_omni: {version:" in message and "npu_firmware" in message


def test_pin_fields_are_checked_per_engine_kind() -> None:
    data = _reference_data()
    data["engine"]["source_pin"] = {"python": "3.11.7", "torch": "2.13.0", "cann": "8.3.RC1"}
    message = _error(data)
    assert "engine.source_pin.av: required for engine kind reference" in message
    assert "engine.source_pin.cann: not part of the reference pin" in message
    data["engine"]["source_pin"]["typo"] = "1"
    assert "unknown key" in _error({**data, "engine": {**data["engine"], "source_pin": {
        "python": "3.11.7", "torch": "2.13.0", "av": "1", "av_ffmpeg": "1", "typo": "1"}}})


def _omni_pin(**changes: Any) -> dict[str, Any]:
    pin: dict[str, Any] = {
        "vllm_omni": {"version": "0.30.0", "wheel_sha256": WHEEL_SHA},
        "vllm": "0.30.0", "vllm_ascend": "0.30.0rc1", "torch": "2.8.0", "torch_npu": "2.8.0",
        "cann": "8.3.RC1", "mindiesd": "2.2.0", "npu_driver": "25.2.0",
        "npu_firmware": "7.7.0.6.236", "ffmpeg": "6.1.1-3ubuntu5", "ffprobe": "6.1.1-3ubuntu5",
        "python": "3.11.13"}
    return pin | changes


def test_vllm_omni_source_needs_a_wheel_hash_or_a_commit() -> None:
    data = _reference_data()
    data["engine"]["kind"] = "vllm-omni"
    data["engine"]["source_pin"] = _omni_pin(vllm_omni={"version": "0.30.0"})
    assert "wheel_sha256 or source_commit" in _error(data)
    data["engine"]["source_pin"] = _omni_pin(vllm_omni={"version": "0.30.0",
                                                        "wheel_sha256": "abc"})
    assert "64 lowercase hex digits" in _error(data)
    data["engine"]["source_pin"] = _omni_pin(vllm_omni={"version": "0.30.0",
                                                        "source_commit": "a1b2c3d"})
    campaign = validate_model(Campaign, data, "c.yaml")
    assert flatten_pin(campaign.engine.source_pin)["vllm_omni.source_commit"] == "a1b2c3d"


def test_placeholders_in_the_pin_block_freezing_field_by_field() -> None:
    campaign = load_campaign(CAMPAIGNS / "reference.yaml")
    assert not [f for f in unfilled_fields(campaign) if f.startswith("engine.source_pin")]
    data = _reference_data()
    data["engine"]["source_pin"]["torch"] = "<FILL: pip show torch>"
    model = validate_model(Campaign, data, "c.yaml")
    assert model.engine.source_pin.model_dump(mode="json")["torch"] == "<FILL: pip show torch>"
    # The dump keeps only the fields the campaign set (so the lock holds no nulls).
    assert set(model.engine.source_pin.model_dump(mode="json")) == {"python", "torch", "av",
                                                                     "av_ffmpeg"}


# --------------------------------------------------------------------------- probes


class FakeMetadata:
    def __init__(self, versions: Mapping[str, str], files: Mapping[tuple[str, str], str]) -> None:
        self.versions, self.files = versions, files

    def version(self, dist: str) -> str | None:
        return self.versions.get(dist)

    def read_text(self, dist: str, name: str) -> str | None:
        return self.files.get((dist, name))


def _runner(outputs: Mapping[str, str | None], missing: Sequence[str] = ()) -> Any:
    calls: list[str] = []

    def run(argv: Sequence[str]) -> tuple[str | None, str]:
        key = " ".join(argv)
        calls.append(key)
        if argv[0] in missing:
            raise FileNotFoundError(argv[0])
        out = outputs.get(key)
        return (out, "") if out is not None else (None, f"{key} exited 1: no such device")

    run.calls = calls  # type: ignore[attr-defined]
    return run


def _host(tmp_path: Path, *, missing: Sequence[str] = (), board: str | None = None,
          direct_url: str | None = None, versions: Mapping[str, str] | None = None
          ) -> HostProbes:
    toolkit = tmp_path / "Ascend" / "ascend-toolkit" / "latest" / "aarch64-linux"
    toolkit.mkdir(parents=True, exist_ok=True)
    (toolkit / "ascend_toolkit_install.info").write_text(CANN_INFO)
    board_text = board if board is not None else _fixture("synthetic-npu-smi-info-t-board_a3.txt")
    outputs = {
        "ffmpeg -version": FFMPEG, "ffprobe -version": FFPROBE,
        "npu-smi info -m": _fixture("synthetic-npu-smi-info-m_a3-2card.txt"),
        "npu-smi info -t board -i 0": board_text,
        "npu-smi info -t board -i 1": board_text,
    }
    if direct_url is None:
        direct_url = json.dumps({"url": "file:///wheels/vllm_omni-0.30.0-py3-none-any.whl",
                                 "archive_info": {"hashes": {"sha256": WHEEL_SHA}}})
    dists = {"vllm-omni": "0.30.0", "vllm": "0.30.0", "vllm-ascend": "0.30.0rc1",
             "torch": "2.8.0", "torch-npu": "2.8.0", "mindiesd": "2.2.0"}
    return HostProbes(
        run=_runner(outputs, missing),
        packages=FakeMetadata(dists | dict(versions or {}),
                              {("vllm-omni", "direct_url.json"): direct_url}),
        env={"ASCEND_TOOLKIT_HOME": str(tmp_path / "Ascend" / "ascend-toolkit" / "latest")},
        python="3.11.13", cann_roots=(), machine="aarch64", av_ffmpeg=lambda: "8.1.2")


def _omni(**changes: Any) -> dict[str, str]:
    return flatten_pin(SourcePin.model_validate(_omni_pin(**changes)))


def test_every_vllm_omni_field_matches_a_host_that_has_the_pinned_stack(tmp_path: Path) -> None:
    frozen = _omni()
    result = compare("vllm-omni", frozen, read_host("vllm-omni", frozen, _host(tmp_path),
                                                    [0, 1, 2, 3]))
    assert [(r.field, r.status) for r in result.rows if r.status != "match"] == []
    assert result.ok and result.exit_code == 0
    assert {r.field for r in result.rows} == {
        "vllm_omni.version", "vllm_omni.wheel_sha256", "vllm", "vllm_ascend", "torch",
        "torch_npu", "cann", "mindiesd", "npu_driver", "npu_firmware", "ffmpeg", "ffprobe",
        "python"}
    cann = next(r for r in result.rows if r.field == "cann")
    assert cann.source == "$ASCEND_TOOLKIT_HOME/aarch64-linux/ascend_toolkit_install.info"
    assert str(tmp_path) not in json.dumps(result.json_dict())


def test_drift_unfilled_and_not_found_are_each_named(tmp_path: Path) -> None:
    frozen = _omni(torch_npu="2.7.1", mindiesd="<FILL: pip show mindiesd>")
    host = _host(tmp_path, direct_url=None, versions={})
    host.packages = FakeMetadata({"vllm-omni": "0.30.0", "vllm": "0.30.0",
                                  "vllm-ascend": "0.30.0rc1", "torch": "2.8.0",
                                  "torch-npu": "2.8.0"}, {})
    result = compare("vllm-omni", frozen, read_host("vllm-omni", frozen, host, [0, 1, 2, 3]))
    status = {r.field: r.status for r in result.rows}
    assert status["torch_npu"] == "DRIFT"
    assert status["mindiesd"] == "unfilled"
    assert status["vllm_omni.wheel_sha256"] == "not found"
    assert status["torch"] == "match"
    assert not result.ok and result.exit_code == 1
    detail = result.detail()
    assert "torch_npu: DRIFT, frozen '2.7.1', host '2.8.0'" in detail
    assert "no direct_url.json" in detail and "--vllm-omni-wheel" in detail


def test_a_wheel_file_given_by_the_operator_is_hashed(tmp_path: Path) -> None:
    wheel = tmp_path / "vllm_omni-0.30.0-py3-none-any.whl"
    wheel.write_bytes(b"not really a wheel")
    frozen = _omni(vllm_omni={"version": "0.30.0",
                              "wheel_sha256": hashlib.sha256(b"not really a wheel").hexdigest()})
    host = _host(tmp_path)
    host.vllm_omni_wheel = wheel
    result = compare("vllm-omni", frozen, read_host("vllm-omni", frozen, host, [0, 1]))
    assert result.ok
    row = next(r for r in result.rows if r.field == "vllm_omni.wheel_sha256")
    assert row.source == f"sha256 of {wheel.name}"


def test_cards_that_disagree_never_match(tmp_path: Path) -> None:
    host = _host(tmp_path)
    other = _fixture("synthetic-npu-smi-info-t-board_a3.txt").replace("7.7.0.6.236", "7.7.0.5.1")
    host.run = _runner({"npu-smi info -m": _fixture("synthetic-npu-smi-info-m_a3-2card.txt"),
                        "npu-smi info -t board -i 0": _fixture(
                            "synthetic-npu-smi-info-t-board_a3.txt"),
                        "npu-smi info -t board -i 1": other})
    values = host.npu([0, 1, 2, 3])
    assert values["npu_driver"].value == "25.2.0"
    assert values["npu_firmware"].value == "NPU 0: 7.7.0.6.236, NPU 1: 7.7.0.5.1"
    # Only the cards that carry assigned devices are asked.
    calls = host.run.calls  # type: ignore[attr-defined]
    host.run = _runner({"npu-smi info -m": _fixture("synthetic-npu-smi-info-m_a3-2card.txt"),
                        "npu-smi info -t board -i 1": other})
    assert host.npu([2, 3])["npu_firmware"].value == "7.7.0.5.1"
    assert "npu-smi info -t board -i 1" in calls


def test_unreadable_board_and_unknown_device_are_not_found(tmp_path: Path) -> None:
    host = _host(tmp_path, board="Error: the device does not exist\n")
    assert host.npu([0])["npu_firmware"].value is None
    assert "Firmware Version" in host.npu([0])["npu_firmware"].source
    assert host.npu([7])["npu_driver"].source == "npu-smi info -m lists no logical device 7"


@pytest.mark.parametrize("tool", ["npu-smi", "ffmpeg", "ffprobe"])
def test_a_missing_tool_is_one_error_naming_it(tmp_path: Path, tool: str) -> None:
    frozen = _omni()
    with pytest.raises(IdentityToolMissing, match=rf"^{tool}: not found on PATH"):
        read_host("vllm-omni", frozen, _host(tmp_path, missing=[tool]), [0, 1, 2, 3])


def test_the_reference_pin_needs_no_tool(tmp_path: Path) -> None:
    frozen = {"python": "3.11.7", "torch": "2.13.0+cpu", "av": "18.1.0", "av_ffmpeg": "8.1.2"}
    host = _host(tmp_path, missing=["npu-smi", "ffmpeg", "ffprobe"],
                 versions={"torch": "2.13.0+cpu", "av": "18.1.0"})
    host.python = "3.11.7"
    assert compare("reference", frozen, read_host("reference", frozen, host)).ok
    host.av_ffmpeg = lambda: "7.1"
    result = compare("reference", frozen, read_host("reference", frozen, host))
    assert [(r.field, r.host, r.status) for r in result.problems()] == [
        ("av_ffmpeg", "7.1", "DRIFT")]


@pytest.mark.parametrize("layout", ["ascend-toolkit/latest", "cann"])
def test_cann_default_layouts(tmp_path: Path, layout: str) -> None:
    info = tmp_path / layout / "x86_64-linux" / "ascend_toolkit_install.info"
    info.parent.mkdir(parents=True)
    info.write_text(CANN_INFO.replace("8.3.RC1", "8.5.0"))
    host = HostProbes(env={}, cann_roots=(str(tmp_path / "ascend-toolkit/latest"),
                                          str(tmp_path / "cann")), machine="x86_64")
    got = host.cann()
    assert got.value == "8.5.0" and got.source.endswith("x86_64-linux/ascend_toolkit_install.info")
    empty = HostProbes(env={}, cann_roots=(str(tmp_path / "nowhere"),), machine="x86_64")
    assert empty.cann().value is None and "ascend_toolkit_install.info" in empty.cann().source


# --------------------------------------------------------------------------- checks and CLI


def test_a_drifted_identity_makes_every_track_protocol_deviation(tmp_path: Path) -> None:
    frozen = _omni(torch="2.7.0")
    result = compare("vllm-omni", frozen, read_host("vllm-omni", frozen, _host(tmp_path), [0]))
    checks = identity_checks(result, ["5s-lossless", "15s-lossy"])
    assert {c.track for c in checks} == {"5s-lossless", "15s-lossy"}
    assert all(c.reason == "protocol_deviation" and c.arm == "b0" for c in checks)
    assert "torch: DRIFT, frozen '2.7.0', host '2.8.0'" in checks[0].detail
    latency = make_check("5s-lossless", "c1", Check.LATENCY_RATIO, "pass",
                         latency=latency_verdict([300, 298, 305], [140, 141, 139]))
    verdict = judge("5s-lossless", "lossless", "c1", [*checks, latency])
    assert verdict.verdict == "inconclusive" and "protocol_deviation" in verdict.reasons

    matched = compare("vllm-omni", _omni(), read_host("vllm-omni", _omni(), _host(tmp_path), [0]))
    passing = identity_checks(matched, ["5s-lossless"])
    assert [c.status for c in passing] == ["pass"]
    assert "protocol_deviation" not in judge("5s-lossless", "lossless", "c1",
                                             [*passing, latency]).reasons


def test_reference_campaign_matches_this_machine() -> None:
    # CI runs on a fresh clone of an identical machine: the shipped pin must hold there too.
    result = preflight(load_campaign(CAMPAIGNS / "reference.yaml"))
    assert result.ok, result.table()


def _fake_probes(**kw: Any) -> Any:
    def factory(vllm_omni_wheel: Path | None = None) -> HostProbes:
        probes = HostProbes(vllm_omni_wheel=vllm_omni_wheel)
        for key, value in kw.items():
            setattr(probes, key, value)
        return probes
    return factory


def test_cli_preflight_table_and_exit_codes(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    campaign = str(CAMPAIGNS / "reference.yaml")
    assert cli.main(["preflight", campaign]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["field", "frozen", "host", "status"]
    assert "matches engine.source_pin" in out

    monkeypatch.setattr(cli, "HostProbes", _fake_probes(python="3.12.1"))
    assert cli.main(["preflight", campaign]) == 1
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("python"))
    assert row.split() == ["python", "3.11.7", "3.12.1", "DRIFT"]
    assert "differs from engine.source_pin in 1 field(s)" in out

    assert cli.main(["preflight", campaign, "--json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["ok"] is False and payload["engine_kind"] == "reference"
    assert {r["field"]: r["status"] for r in payload["rows"]}["python"] == "DRIFT"


def _omni_campaign(tmp_path: Path, pin: dict[str, Any]) -> Path:
    shutil.copytree(ROOT / "fixtures" / "inputs", tmp_path / "inputs")
    data = _reference_data()
    data["engine"]["kind"] = "vllm-omni"
    data["engine"]["source_pin"] = pin
    (tmp_path / "campaigns").mkdir()
    path = tmp_path / "campaigns" / "omni.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_cli_preflight_missing_tool_is_exit_2_and_unfilled_is_exit_1(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = _omni_campaign(tmp_path, _omni_pin(mindiesd="<FILL: pip show mindiesd>"))
    host = _host(tmp_path / "host")
    monkeypatch.setattr(cli, "HostProbes", _fake_probes(
        run=host.run, packages=host.packages, env=host.env, python="3.11.13",
        cann_roots=(), machine="aarch64"))
    assert cli.main(["preflight", str(path)]) == 1
    out = capsys.readouterr().out
    assert next(line for line in out.splitlines() if line.startswith("mindiesd")).split()[-1] \
        == "unfilled"

    monkeypatch.setattr(cli, "HostProbes", _fake_probes(
        run=_runner({}, missing=["ffmpeg"]), packages=host.packages, env=host.env))
    assert cli.main(["preflight", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ffmpeg: not found on PATH" in err[0]


def test_shipped_910c_pin_is_placeholders_the_host_fills() -> None:
    data = yaml.safe_load((CAMPAIGNS / "910c.yaml").read_text())
    model = validate_model(Campaign, data, "910c.yaml")
    flat = flatten_pin(model.engine.source_pin)
    assert flat.pop("vllm_omni.version") == "0.30.0"
    # Each still a <FILL: ...> that blocks freezing (a stray "<" would make it a literal value).
    assert len(flat) == 12 and all(re.match(r"^<FILL:[^<>]*>$", v) for v in flat.values()), flat
    assert model.devices.memory_release.timeout_s == 120


# --------------------------------------------------------------------------- in a suite run


def test_the_platform_packages_must_import_where_the_server_runs(tmp_path: Path) -> None:
    # The server's interpreter is the one `vllm` names in its first line.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "vllm").write_text("#!/opt/venv/bin/python3.11\nimport sys\n")
    (bin_dir / "vllm").chmod(0o755)
    outputs = {"/opt/venv/bin/python3.11 -c import torch_npu": "",
               "/opt/venv/bin/python3.11 -c import vllm_ascend": ""}
    probes = HostProbes(run=_runner(outputs), env={"PATH": str(bin_dir)})
    assert probes.server_python() == "/opt/venv/bin/python3.11"
    frozen = _omni()
    rows = {r.field: r for r in import_rows(frozen, probes)}
    assert set(rows) == {"import vllm_ascend", "import torch_npu", "import mindiesd"}
    assert rows["import torch_npu"].status == "match"
    broken = rows["import mindiesd"]
    assert broken.status == "not found" and broken.host is None
    assert broken.source.startswith("import mindiesd in the interpreter of `vllm` on PATH failed")
    assert str(tmp_path) not in broken.source
    # Not pinned, not imported; no `vllm` on PATH: the harness's own interpreter.
    assert import_rows({"python": "3.11.13"}, probes) == ()
    assert HostProbes(env={"PATH": str(tmp_path / "none")}).server_python() == sys.executable
