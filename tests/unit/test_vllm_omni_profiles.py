"""The 910C launch profiles: what B0 needs to start on vLLM-Omni 0.30.0, and candidates that
change only what they claim to change."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from ref2va_accept.arms import Arms
from ref2va_accept.campaign import LaunchProfile, freeze, load_campaign, load_profile
from ref2va_accept.core import CampaignError, FreezeError
from ref2va_accept.evidence import EvidenceBundle
from ref2va_accept.evidence.sanitize import Sanitizer
from ref2va_accept.planning import plan_track
from ref2va_contract.launch import WORKDIR_TOKEN

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "engine/profiles/vllm-omni"
BASELINES = ("b0.yaml", "b0-legacy-dlo.yaml")
# Per profile, the launch keys (args and env) it may change against b0.yaml: its declared change.
DECLARED_CHANGES: dict[str, set[str]] = {
    "b0-legacy-dlo.yaml": {"diffusion-offload-config", "enable-distributed-layerwise-offload"},
    "cache-dit.yaml": {"cache-backend", "cache-config"},
    "cache-dit-lossless-guard.yaml": {"cache-backend", "cache-config"},
    "ref-kv-reuse.yaml": {"kv-offload-config"},
    "ref-kv-host-residency.yaml": {"kv-offload-config"},
}


def _profiles() -> list[Path]:
    found = sorted(PROFILES.glob("*.yaml"))
    assert found, f"no profiles under {PROFILES}"
    return found


def _launch(profile: LaunchProfile) -> dict[str, object]:
    return {**{f"args.{k}": v for k, v in profile.args.items()},
            **{f"env.{k}": v for k, v in profile.env.items()}}


def test_every_profile_is_described_here() -> None:
    names = {p.name for p in _profiles()}
    assert names == {"b0.yaml", *DECLARED_CHANGES}


@pytest.mark.parametrize("path", _profiles(), ids=lambda p: p.name)
def test_every_profile_can_start_h3(path: Path) -> None:
    profile = load_profile(path)
    assert profile.engine == "vllm-omni"
    args = profile.args
    # H3's VAEs load checkpoint code: without this flag B0 does not start.
    assert args.get("trust-remote-code") is True
    # Unpinned, the NPU platform picks the attention backend by what the host has installed.
    assert isinstance(args.get("diffusion-attention-backend"), str)
    assert args.get("task-type") == "ref2va"
    assert args.get("enforce-eager") is True
    # The comparison points come from the worker extension in this checkout.
    module, _, cls = str(args.get("worker-extension-cls")).rpartition(".")
    assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), module
    assert f"class {cls}" in (ROOT / (module.replace(".", "/") + ".py")).read_text()
    # The checkout (the extension) and its src/ (the judge/engine contract the extension reads).
    assert profile.env.get("PYTHONPATH") == f"{WORKDIR_TOKEN}:{WORKDIR_TOKEN}/src"


@pytest.mark.parametrize("name", sorted(DECLARED_CHANGES))
def test_a_profile_changes_only_what_it_declares(name: str) -> None:
    base = _launch(load_profile(PROFILES / "b0.yaml"))
    other = _launch(load_profile(PROFILES / name))
    changed = {k.split(".", 1)[1] for k in set(base) | set(other) if base.get(k) != other.get(k)}
    assert changed, f"{name} changes nothing against b0.yaml"
    extra = changed - DECLARED_CHANGES[name]
    assert not extra, f"{name} also changes {extra}"


def test_the_check_above_sees_an_undeclared_change(tmp_path: Path) -> None:
    data = yaml.safe_load((PROFILES / "cache-dit.yaml").read_text())
    data["args"]["ulysses-degree"] = 2
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    base = _launch(load_profile(PROFILES / "b0.yaml"))
    other = _launch(load_profile(tmp_path / "p.yaml"))
    changed = {k.split(".", 1)[1] for k in set(base) | set(other) if base.get(k) != other.get(k)}
    assert "ulysses-degree" in changed - DECLARED_CHANGES["cache-dit.yaml"]


def _campaign_with(tmp_path: Path, candidate_profile: str) -> Path:
    for rel in ("fixtures/inputs", "engine/profiles/vllm-omni"):
        shutil.copytree(ROOT / rel, tmp_path / rel)
    text = (ROOT / "fixtures/campaigns/910c.yaml").read_text()
    text = text.replace("profile: ../../engine/profiles/vllm-omni/cache-dit.yaml",
                        f"profile: ../../engine/profiles/vllm-omni/{candidate_profile}")
    path = tmp_path / "fixtures/campaigns/910c.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["ref-kv-reuse.yaml", "ref-kv-host-residency.yaml"])
def test_a_profile_that_needs_a_later_source_is_refused_naming_why(tmp_path: Path,
                                                                   name: str) -> None:
    assert load_profile(PROFILES / name).needs_source
    campaign = load_campaign(_campaign_with(tmp_path, name))
    arm = next(a for a in campaign.model.candidates if a.id == "cache-dit")
    with pytest.raises(CampaignError, match=r"needs_source: .*--kv-offload-config"):
        campaign.profile(arm)
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    with pytest.raises(CampaignError, match="needs_source"):
        plan = plan_track(campaign, "5s-lossy")
        Arms(campaign, plan, bundle).launch_spec(plan.arm(arm.id))
    with pytest.raises(FreezeError, match=r"ref-kv.*needs_source"):
        freeze(campaign.path)


def test_runnable_profiles_are_accepted(tmp_path: Path) -> None:
    campaign = load_campaign(_campaign_with(tmp_path, "cache-dit.yaml"))
    for arm in campaign.model.arms():
        assert campaign.profile(arm).needs_source is None


def test_workdir_in_a_profile_env_becomes_the_absolute_engine_workdir(tmp_path: Path) -> None:
    campaign = load_campaign(_campaign_with(tmp_path, "cache-dit.yaml"))
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    plan = plan_track(campaign, "5s-lossy")
    spec = Arms(campaign, plan, bundle).launch_spec(plan.arm("b0"))
    assert spec.env["PYTHONPATH"] == f"{tmp_path}:{tmp_path}/src"
    assert spec.cwd == tmp_path
    assert "--worker-extension-cls" in spec.argv and "--trust-remote-code" in spec.argv
