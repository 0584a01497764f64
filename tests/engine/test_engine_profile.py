"""Launch profiles: the strict reading, and the CLI's one-line refusal of a bad one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from engine.reference.errors import ProfileError
from engine.reference.profile import load_profile, read_profile_yaml
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


SHIPPED = sorted((REPO_ROOT / "engine" / "profiles").rglob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_shipped_profile_parses_in_the_engine(path: Path) -> None:
    raw = read_profile_yaml(path)
    assert raw["engine"] == path.parent.name  # the folder names the engine kind
    if raw["engine"] == "reference":
        assert load_profile(path).name == raw["name"]
    else:  # read strictly, then refused only for being another engine's
        with pytest.raises(ProfileError, match=f"profile is for engine '{raw['engine']}'"):
            load_profile(path)


def test_shipped_profiles_cover_both_engine_kinds() -> None:
    assert {p.parent.name for p in SHIPPED} == {"reference", "vllm-omni"}


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ("name: a\ndeclared: baseline\nengine: reference\nname: b\n", 4, "name"),
        ("name: a\ndeclared: baseline\nengine: reference\nargs:\n  dtype: float32\n"
         "  seed-salt: 0\n  dtype: bfloat16\n", 7, "dtype"),
        ("name: a\ndeclared: baseline\nengine: reference\nenv: {A: '1', A: '2'}\n", 4, "A"),
    ],
    ids=["top-level", "args", "flow-mapping"],
)
def test_a_duplicate_key_is_refused_with_file_and_line(
    tmp_path: Path, text: str, line: int, key: str
) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert str(caught.value).startswith(f"{path}:{line}: duplicate key '{key}'")


def test_serve_refuses_a_duplicate_key_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(B0_PROFILE.read_text() + "declared: lossy\n")
    result = _serve(path)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"{path}:" in lines[0] and "duplicate key 'declared'" in lines[0]
