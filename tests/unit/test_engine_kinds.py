"""The engine-kind adapter: one object per kind of the contract, holding what differs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import get_args

import pytest

from ref2va_accept.campaign import EngineSpec
from ref2va_accept.campaign import LaunchProfile as JudgeLaunchProfile
from ref2va_accept.campaign.identity import SourcePin, pin_violations
from ref2va_accept.engines import KINDS, LOOPBACK, engine_kind
from ref2va_accept.evidence import EngineKindName
from ref2va_contract.launch import ENGINE_KINDS, REFERENCE_ENGINE, VLLM_OMNI_ENGINE

pytestmark = pytest.mark.fast


def test_one_adapter_per_kind_of_the_contract() -> None:
    assert tuple(KINDS) == ENGINE_KINDS == get_args(EngineKindName)
    assert all(engine_kind(name).name == name for name in ENGINE_KINDS)
    # What campaigns and profiles accept is exactly those kinds.
    assert get_args(EngineSpec.model_fields["kind"].annotation) == ENGINE_KINDS
    assert get_args(JudgeLaunchProfile.model_fields["engine"].annotation) == ENGINE_KINDS


def test_an_unknown_kind_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown engine kind 'sglang' \(known: reference, "
                                         r"vllm-omni\)"):
        engine_kind("sglang")


def test_vllm_argv_is_serve_model_omni_on_loopback(tmp_path: Path) -> None:
    argv = engine_kind(VLLM_OMNI_ENGINE).argv(["vllm"], "/models/h3", tmp_path / "b0.yaml",
                                              ["--usp", "4"], LOOPBACK, 8123)
    assert argv == ("vllm", "serve", "/models/h3", "--omni", "--host", "127.0.0.1", "--port",
                    "8123", "--usp", "4")
    assert engine_kind(VLLM_OMNI_ENGINE).default_command() == ["vllm"]


def test_reference_argv_passes_the_profile_file(tmp_path: Path) -> None:
    kind = engine_kind(REFERENCE_ENGINE)
    argv = kind.argv(kind.default_command(), "m", tmp_path / "b0.yaml", ["--ignored"], LOOPBACK,
                     8000)
    assert argv == (sys.executable, "-m", "engine.reference", "serve", "--config",
                    str(tmp_path / "b0.yaml"), "--host", "127.0.0.1", "--port", "8000")


def test_launch_environment_defaults_per_kind() -> None:
    assert dict(engine_kind(VLLM_OMNI_ENGINE).env_defaults) == {
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
    assert dict(engine_kind(REFERENCE_ENGINE).env_defaults) == {}
    assert engine_kind(VLLM_OMNI_ENGINE).server_side_timeouts
    assert not engine_kind(REFERENCE_ENGINE).server_side_timeouts


@pytest.mark.parametrize("name", ENGINE_KINDS)
def test_the_pin_fields_are_source_pin_fields_and_required(name: str) -> None:
    kind = engine_kind(name)
    assert set(kind.pin_fields) <= set(SourcePin.model_fields)
    missing = pin_violations(name, {})
    assert [loc for loc, _ in missing] == [(f,) for f in kind.pin_fields]
    assert kind.pin_form in pin_violations(name, "1.0")[0][1]
