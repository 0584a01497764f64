"""From campaign to launch: the real server's command line, devices and environment."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ref2va_accept.arms import Arms, build_request, describe_exit
from ref2va_accept.campaign import load_campaign
from ref2va_accept.core import CampaignError
from ref2va_accept.evidence import EvidenceBundle
from ref2va_accept.evidence.sanitize import Sanitizer
from ref2va_accept.planning import plan_track

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]


def _copy_910c(tmp_path: Path, fill: bool) -> Path:
    for rel in ("fixtures/inputs/prompt.txt", "fixtures/inputs/reference.png",
                "fixtures/inputs/reference.wav"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    shutil.copytree(ROOT / "engine/profiles/vllm-omni", tmp_path / "engine/profiles/vllm-omni")
    text = (ROOT / "fixtures/campaigns/910c.yaml").read_text()
    if fill:
        text = text.replace(
            '"<FILL: MiniMax-H3 checkpoint id or path as passed to vllm serve>"', "MiniMax/H3"
        ).replace(
            '"<FILL: vllm-omni wheel version + sha256 (and vllm, torch_npu, CANN versions)>"',
            "vllm-omni==0.30.0",
        )
    path = tmp_path / "fixtures/campaigns/910c.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _arms(campaign_path: Path, tmp_path: Path, track: str) -> Arms:
    bundle = EvidenceBundle.create(tmp_path / "evidence", "run", Sanitizer((), ()))
    campaign = load_campaign(campaign_path)
    return Arms(campaign, plan_track(campaign, track), bundle)


def test_vllm_omni_arm_launches_vllm_serve_omni_on_the_campaign_devices(tmp_path: Path) -> None:
    arms = _arms(_copy_910c(tmp_path, fill=True), tmp_path, "15s-lossy")
    spec = arms.launch_spec(arms.plan.arm("b0"))
    assert spec.argv[:7] == ("vllm", "serve", "MiniMax/H3", "--omni", "--host", "127.0.0.1",
                             "--port")
    flags = spec.argv[8:]
    assert flags.count("--omni") == 0
    def value(flag: str) -> str:
        return flags[flags.index(flag) + 1]

    assert value("--task-type") == "ref2va" and value("--ulysses-degree") == "4"
    assert "--trust-remote-code" in flags
    assert value("--worker-extension-cls") == "engine.vllm_omni.extension.Ref2VADiagnostics"
    assert "--enforce-eager" in flags
    assert spec.env["ASCEND_RT_VISIBLE_DEVICES"] == "0,1,2,3"
    assert spec.env["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    assert spec.env["VLLM_OMNI_VIDEO_SYNC_TIMEOUT"] == "3720"
    assert spec.startup_timeout_s == 2100


def test_unfilled_placeholders_refuse_to_start_naming_them(tmp_path: Path) -> None:
    arms = _arms(_copy_910c(tmp_path, fill=False), tmp_path, "5s-lossless")
    with pytest.raises(CampaignError, match=r"unfilled: engine\.model$") as caught:
        arms.start("b0")
    # What only a run on the host can fill does not stop the run that fills it.
    for later in ("comparison_points", "source_pin", "scorer_weights"):
        assert later not in str(caught.value)


def test_request_carries_the_track_shape_inputs_and_seed(tmp_path: Path) -> None:
    campaign = load_campaign(_copy_910c(tmp_path, fill=True))
    plan = plan_track(campaign, "15s-lossless")
    request = build_request(plan, plan.arm("b0"), 42)
    fields = dict(request.fields)
    assert (fields["width"], fields["height"], fields["num_frames"]) == ("1344", "768", "362")
    assert fields["seed"] == "42" and fields["num_inference_steps"] == "50"
    assert '"task":"ref2va"' in fields["extra_params"]
    assert [r.mime for r in request.references] == ["image/png", "audio/wav"]


@pytest.mark.parametrize(("code", "said"), [
    (70, "exit code 70"), (0, "exit code 0"), (-9, "signal 9 (SIGKILL)"),
    (-15, "signal 15 (SIGTERM)"), (-200, "signal 200")])
def test_an_engine_exit_is_named_by_its_code_or_its_signal(code: int, said: str) -> None:
    assert describe_exit(code) == said
