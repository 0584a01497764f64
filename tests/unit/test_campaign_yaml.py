"""The judge's YAML reading: a duplicate mapping key is an error naming the file, line and key.

PyYAML keeps the last of two equal keys without a word, so a campaign or profile with one would
mean different things to a reader that keeps the first, or to a person reading the file top down.
The judge refuses it instead, in campaign files and launch profiles alike, at any depth.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from ref2va_accept.campaign import LoadedCampaign, load_campaign, load_profile, read_mapping
from ref2va_accept.core import CampaignError

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[2]
CAMPAIGNS = sorted((REPO / "fixtures" / "campaigns").glob("*.yaml"))
PROFILES = sorted((REPO / "engine" / "profiles").rglob("*.yaml"))


def _line_of(lines: list[str], start: str, after: int = 0) -> int:
    """The 0-based index of the first line at or after `after` that starts with `start`."""
    return next(i for i in range(after, len(lines)) if lines[i].startswith(start))


def _error(path: Path, load: object = read_mapping) -> str:
    with pytest.raises(CampaignError) as info:
        if load is read_mapping:
            read_mapping(path, str(path))
        elif load is load_campaign:
            load_campaign(path)
        else:
            load_profile(path)
    return str(info.value)


# --------------------------------------------------------------------------- campaign files


def test_top_level_duplicate_in_a_campaign_names_file_line_and_key(tmp_path: Path) -> None:
    lines = (REPO / "fixtures/campaigns/reference.yaml").read_text().splitlines()
    first = _line_of(lines, "name:")
    path = tmp_path / "campaign.yaml"
    path.write_text("\n".join([*lines, "name: another-name"]) + "\n")
    assert _error(path, load_campaign) == (
        f"{path}: line {len(lines) + 1}, column 1: invalid YAML: duplicate key 'name' "
        f"(first at line {first + 1})"
    )


def test_nested_duplicate_in_a_campaign_names_its_own_line(tmp_path: Path) -> None:
    lines = (REPO / "fixtures/campaigns/reference.yaml").read_text().splitlines()
    first = _line_of(lines, "      flow_shift:", after=_line_of(lines, "tracks:"))
    indent = len(lines[first]) - len(lines[first].lstrip())
    lines.insert(first + 1, " " * indent + "flow_shift: 3.0")
    path = tmp_path / "campaign.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert _error(path, load_campaign) == (
        f"{path}: line {first + 2}, column {indent + 1}: invalid YAML: duplicate key "
        f"'flow_shift' (first at line {first + 1})"
    )


def test_duplicates_in_flow_mappings_and_list_items_are_found(tmp_path: Path) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text("top:\n  env: {A: '1', B: '2', A: '3'}\n")
    assert _error(flow) == (
        f"{flow}: line 2, column 25: invalid YAML: duplicate key 'A' (first at line 2)"
    )
    items = tmp_path / "items.yaml"
    items.write_text("arms:\n  - id: a\n  - id: b\n    tracks: []\n    id: c\n")
    assert _error(items) == (
        f"{items}: line 5, column 5: invalid YAML: duplicate key 'id' (first at line 3)"
    )


def test_keys_are_compared_as_yaml_resolves_them(tmp_path: Path) -> None:
    # 1 and '1' are different keys (an int and a string), as PyYAML reads them.
    distinct = tmp_path / "distinct.yaml"
    distinct.write_text("1: a\n'1': b\n")
    assert read_mapping(distinct, "distinct.yaml") == yaml.safe_load(distinct.read_text())
    # `yes` and `true` both resolve to the boolean true under YAML 1.1: the same key twice.
    same = tmp_path / "same.yaml"
    same.write_text("yes: 1\ntrue: 2\n")
    assert _error(same) == (
        f"{same}: line 2, column 1: invalid YAML: duplicate key True (first at line 1)"
    )


def test_merge_keys_read_as_pyyaml_reads_them(tmp_path: Path) -> None:
    # A key of the mapping itself overrides a merged one: that is not a duplicate.
    path = tmp_path / "merge.yaml"
    path.write_text(
        "base: &base {a: 1, b: 2}\nmore: &more {c: 3}\n"
        "one:\n  <<: *base\n  b: 20\nmany:\n  <<: [*base, *more]\n  a: 10\n"
    )
    data = read_mapping(path, "merge.yaml")
    assert data == yaml.safe_load(path.read_text())
    assert data["one"] == {"a": 1, "b": 20}
    assert data["many"] == {"a": 10, "b": 2, "c": 3}
    twice = tmp_path / "twice.yaml"
    twice.write_text("base: &base {a: 1}\none:\n  <<: *base\n  <<: *base\n")
    assert _error(twice) == (
        f"{twice}: line 4, column 3: invalid YAML: duplicate key '<<' (first at line 3)"
    )


def test_an_unhashable_key_is_a_located_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "list-key.yaml"
    path.write_text("ok: 1\n? [a, b]\n: 2\n")
    assert _error(path) == f"{path}: line 2, column 3: invalid YAML: found unhashable key"


# --------------------------------------------------------------------------- launch profiles


def test_duplicate_in_a_profile_names_the_profile(tmp_path: Path) -> None:
    shipped = REPO / "engine/profiles/reference/b0.yaml"
    lines = shipped.read_text().splitlines()
    first = _line_of(lines, "declared:")
    path = tmp_path / "b0.yaml"
    path.write_text("\n".join([*lines, "declared: lossy"]) + "\n")
    assert load_profile(shipped).declared == "baseline"
    assert _error(path, load_profile) == (
        f"{path}: line {len(lines) + 1}, column 1: invalid YAML: duplicate key 'declared' "
        f"(first at line {first + 1})"
    )


def test_nested_duplicate_in_a_profile_through_the_campaign(tmp_path: Path) -> None:
    """The campaign's own profile loading refuses it too, naming the profile as written."""
    shipped = load_campaign(REPO / "fixtures/campaigns/reference.yaml")
    folder = tmp_path / "fixtures" / "campaigns"
    folder.mkdir(parents=True)
    shutil.copytree(REPO / "engine/profiles/reference", tmp_path / "engine/profiles/reference")
    arm = shipped.model.baseline
    profile = folder / arm.profile
    text = profile.read_text()
    assert "\nenv: {}\n" in text, "the shipped baseline profile changed; adapt this test"
    profile.write_text(text.replace("\nenv: {}\n", "\nenv:\n  A: '1'\n  A: '2'\n"))
    loaded = LoadedCampaign(path=folder / "reference.yaml", model=shipped.model)
    with pytest.raises(CampaignError) as info:
        loaded.profile(arm)
    last = len(profile.read_text().splitlines())
    assert str(info.value) == (
        f"{loaded.display(arm.profile)}: line {last}, column 3: invalid YAML: duplicate key 'A' "
        f"(first at line {last - 1})"
    )


# --------------------------------------------------------------------------- shipped files


@pytest.mark.parametrize("path", CAMPAIGNS + PROFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_file_reads_as_pyyaml_reads_it(path: Path) -> None:
    assert read_mapping(path, str(path)) == yaml.safe_load(path.read_text(encoding="utf-8"))


def test_every_shipped_campaign_and_profile_loads() -> None:
    assert CAMPAIGNS and len(PROFILES) >= 2, "no shipped files found"
    for campaign in CAMPAIGNS:
        load_campaign(campaign)
    for profile in PROFILES:
        load_profile(profile)
