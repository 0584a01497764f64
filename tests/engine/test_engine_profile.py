"""Launch profiles: the strict reading, and the CLI's one-line refusal of a bad one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from engine.reference.errors import ProfileError
from engine.reference.profile import load_profile
from tests.engine.conftest import B0_PROFILE, REPO_ROOT, engine_command, engine_env, write_profile

pytestmark = pytest.mark.engine


def test_b0_profile_loads_with_its_declared_args() -> None:
    profile = load_profile(B0_PROFILE)
    assert (profile.name, profile.declared, profile.engine) == ("b0", "baseline", "reference")
    assert profile.args.served_model_name == "ref2va-reference"
    assert profile.args.step_cost_ms == 0
    assert profile.args.seed_salt == 0


def test_unknown_arg_is_refused_naming_file_and_flag(tmp_path: Path) -> None:
    path = write_profile(tmp_path / "typo.yaml", **{"cache-backendd": "none"})
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert str(path) in str(caught.value)
    assert "--cache-backendd" in str(caught.value)


def test_profile_for_another_engine_is_refused(tmp_path: Path) -> None:
    raw = yaml.safe_load(B0_PROFILE.read_text())
    raw["engine"] = "vllm-omni"
    path = tmp_path / "real.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ProfileError, match="vllm-omni"):
        load_profile(path)


def test_mistyped_arg_is_refused(tmp_path: Path) -> None:
    path = write_profile(tmp_path / "bad.yaml", **{"enforce-eager": "yes"})
    with pytest.raises(ProfileError, match="enforce-eager"):
        load_profile(path)


def _serve(profile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        engine_command(profile, 1),
        cwd=REPO_ROOT,
        env=engine_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"args": {"no-such-flag": 1}}, "--no-such-flag"),
        ({"engine": "vllm-omni"}, "vllm-omni"),
    ],
    ids=["unknown-arg", "wrong-engine"],
)
def test_serve_refuses_bad_profile_in_one_line(
    tmp_path: Path, change: dict[str, object], expected: str
) -> None:
    raw = yaml.safe_load(B0_PROFILE.read_text())
    for key, value in change.items():
        raw[key] = {**raw[key], **value} if isinstance(value, dict) else value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    result = _serve(path)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert str(path) in lines[0] and expected in lines[0]
