"""Campaign and launch-profile loading, placeholders, freeze and verify."""

from __future__ import annotations

import copy
import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ref2va_accept.campaign import (
    TRACK_IDS,
    FreezeStatus,
    LaunchProfile,
    LoadedCampaign,
    campaign_files,
    canonical_campaign,
    duration_class,
    freeze,
    load_campaign,
    load_profile,
    lock_path,
    quality_class,
    unfilled_fields,
    verify,
)
from ref2va_accept.core import CampaignError, FreezeError
from ref2va_accept.planning import plan_track
from ref2va_accept.quality._weight_names import WEIGHT_DIMENSIONS, WEIGHT_NAMES

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "fixtures" / "campaigns"

PROFILE = {
    "name": "b0",
    "description": "test baseline",
    "declared": "baseline",
    "engine": "reference",
    "args": {"enforce-eager": True},
    "env": {},
}
INPUT_BYTES = {
    "inputs/prompt.txt": b"A red ball rolls across a blue floor toward a yellow wall.\n",
    # Real media within H3's limits: loading refuses inputs the server would (h3_limits).
    "inputs/reference.png": (REPO / "fixtures" / "inputs" / "reference.png").read_bytes(),
    "inputs/reference.wav": (REPO / "fixtures" / "inputs" / "reference.wav").read_bytes(),
}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _track(seconds: float, frames: int, lossless: bool = True) -> dict[str, Any]:
    points = [{"name": "mp4.video", "source": "mp4", "dtype": "U8", "shape": [frames, 64, 112, 3]}]
    gate = {"threshold": 0.01, "gated": ["vbench.temporal_flickering"]}
    return {
        "comparison_points": points if lossless else [],
        "lossy_gate": None if lossless else gate,
        "duration_s": seconds,
        "num_frames": frames,
        "request": {
            "width": 112,
            "height": 64,
            "fps": 24,
            "num_inference_steps": 50,
            "flow_shift": 12.0,
            "seeds": [42],
            "extra_params": {"task": "ref2va", "duration": seconds, "audio_flow_shift": 3.0},
        },
        "inputs": {
            "prompt": {
                "path": "inputs/prompt.txt",
                "sha256": _sha(INPUT_BYTES["inputs/prompt.txt"]),
            },
            "reference_image": {
                "path": "inputs/reference.png",
                "sha256": _sha(INPUT_BYTES["inputs/reference.png"]),
            },
            "reference_audio": {
                "path": "inputs/reference.wav",
                "sha256": _sha(INPUT_BYTES["inputs/reference.wav"]),
            },
        },
    }


def _campaign() -> dict[str, Any]:
    return {
        "schema_version": 1,
        "name": "unit",
        "engine": {
            "kind": "reference",
            "model": "ref2va-reference",
            "source_pin": {"python": "3.11.7", "torch": "2.13.0", "av": "18.1.0",
                           "av_ffmpeg": "8.1.2"},
            "startup_timeout_s": 60,
        },
        "devices": {"kind": "none"},
        "baseline": {"id": "b0", "profile": "profiles/b0.yaml"},
        "candidates": [
            {"id": "c1", "profile": "profiles/c1.yaml", "request": {"quality": "lossless"}},
        ],
        "tracks": {
            "5s-lossless": _track(5.0, 124),
            "15s-lossy": _track(15.0, 362, lossless=False),
        },
        "protocol": {
            "replication": "request",
            "warmups": 1,
            "repeats": 3,
            "ordering": "ABA",
            "order_seed": 7,
            "timeouts": {"5s": {"request_s": 120}, "15s": {"request_s": 300}},
        },
        "budget": {},
    }


def _write(tmp_path: Path, data: dict[str, Any], name: str = "c.yaml") -> Path:
    """A campaign with its profiles and inputs laid out beside it."""
    (tmp_path / "profiles").mkdir(exist_ok=True)
    (tmp_path / "inputs").mkdir(exist_ok=True)
    (tmp_path / "profiles" / "b0.yaml").write_text(yaml.safe_dump(PROFILE))
    cand = {**PROFILE, "name": "c1", "declared": "lossless"}
    (tmp_path / "profiles" / "c1.yaml").write_text(yaml.safe_dump(cand))
    for rel, data_bytes in INPUT_BYTES.items():
        (tmp_path / rel).write_bytes(data_bytes)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _error(tmp_path: Path, data: dict[str, Any]) -> str:
    path = _write(tmp_path, data)
    with pytest.raises(CampaignError) as info:
        load_campaign(path)
    message = str(info.value)
    assert str(path) in message
    return message


# --------------------------------------------------------------------------- loading


def test_good_campaign_loads(tmp_path: Path) -> None:
    loaded = load_campaign(_write(tmp_path, _campaign()))
    assert loaded.model.tracks["5s-lossless"].num_frames == 124
    assert loaded.model.tracks["5s-lossless"].inputs.reference_image.mime == "image/png"
    assert loaded.model.tracks["15s-lossy"].duration_class == "15s"
    assert loaded.model.tracks["15s-lossy"].quality_class == "lossy"
    assert loaded.resolve("inputs/prompt.txt") == tmp_path / "inputs" / "prompt.txt"


def test_unknown_top_level_key_names_it(tmp_path: Path) -> None:
    message = _error(tmp_path, {**_campaign(), "colour": "red"})
    assert ": colour: unknown key" in message
    assert "budget" in message  # the allowed keys are listed


def test_unknown_nested_key_names_dotted_field(tmp_path: Path) -> None:
    data = _campaign()
    data["tracks"]["5s-lossless"]["request"]["colour"] = "red"
    assert "tracks.5s-lossless.request.colour: unknown key" in _error(tmp_path, data)


def test_wrong_frame_count_names_expected_and_found(tmp_path: Path) -> None:
    data = _campaign()
    data["tracks"]["5s-lossless"]["num_frames"] = 120
    message = _error(tmp_path, data)
    assert "tracks.5s-lossless.num_frames: a 5 s track has 124 frames" in message
    assert "found 120" in message


def test_wrong_fps_names_field(tmp_path: Path) -> None:
    data = _campaign()
    data["tracks"]["15s-lossy"]["request"]["fps"] = 30
    assert "tracks.15s-lossy.request.fps: H3 outputs 24 fps, found 30" in _error(tmp_path, data)


def test_odd_width_names_field(tmp_path: Path) -> None:
    data = _campaign()
    data["tracks"]["5s-lossless"]["request"]["width"] = 113
    message = _error(tmp_path, data)
    assert (
        "tracks.5s-lossless.request.width: a positive even number of pixels, found 113" in message
    )


def test_missing_task_names_field(tmp_path: Path) -> None:
    data = _campaign()
    del data["tracks"]["5s-lossless"]["request"]["extra_params"]["task"]
    assert "tracks.5s-lossless.request.extra_params.task: 'ref2va'" in _error(tmp_path, data)


def test_duplicate_candidate_id_names_field(tmp_path: Path) -> None:
    data = _campaign()
    data["candidates"].append({"id": "c1", "profile": "profiles/c1.yaml"})
    assert "candidates[1].id: a unique id" in _error(tmp_path, data)


def test_baseline_id_must_be_b0(tmp_path: Path) -> None:
    data = _campaign()
    data["baseline"]["id"] = "base"
    assert "baseline.id: 'b0', found 'base'" in _error(tmp_path, data)


@pytest.mark.parametrize(("change", "message"), [
    # A campaign written before the instance design: refused, naming both ways forward.
    ({"replication": None}, "ordering 'ABA' is a request-level design: with replication "
                            "'instance' use ordering 'interleaved', or set replication: request"),
    ({"replication": "instance", "ordering": "interleaved"},
     "replication 'instance' needs instances_per_arm"),
    ({"ordering": "interleaved"}, "ordering 'interleaved' belongs to replication 'instance'"),
    ({"instances_per_arm": 3}, "instances_per_arm applies to replication 'instance' only"),
    ({"steady_fraction": 0.05, "max_warmups": 3}, "warmups must be at least 2, got 1"),
    ({"warmups": 2, "steady_fraction": 0.05}, "steady_fraction needs max_warmups"),
    ({"warmups": 2, "max_warmups": 3}, "max_warmups above warmups needs steady_fraction"),
    ({"warmups": 2, "max_warmups": 1, "steady_fraction": 0.05}, "max_warmups 1 is below warmups 2"),
])
def test_protocol_design_must_be_whole(tmp_path: Path, change: dict[str, Any],
                                       message: str) -> None:
    data = _campaign()
    for key, value in change.items():
        if value is None:
            data["protocol"].pop(key, None)
        else:
            data["protocol"][key] = value
    found = _error(tmp_path, data)
    assert message in found and found.count("\n") == 0, found


def test_instance_design_loads_into_the_plan(tmp_path: Path) -> None:
    data = _campaign()
    data["protocol"].update(replication="instance", instances_per_arm=4, ordering="interleaved",
                            warmups=2, max_warmups=5, steady_fraction=0.1, repeats=2)
    settings = plan_track(load_campaign(_write(tmp_path, data)), "5s-lossless").latency
    assert (settings.replication, settings.instances_per_arm, settings.warmups,
            settings.max_warmups, settings.steady_fraction, settings.repeats) == (
        "instance", 4, 2, 5, 0.1, 2)


def test_timeouts_must_cover_every_duration_class(tmp_path: Path) -> None:
    data = _campaign()
    del data["protocol"]["timeouts"]["15s"]
    assert "protocol.timeouts: a timeout set for each duration class" in _error(tmp_path, data)


def test_every_error_is_listed_one_per_line(tmp_path: Path) -> None:
    data = _campaign()
    data["protocol"]["repeats"] = 0
    data["engine"]["startup_timeout_s"] = -1
    lines = _error(tmp_path, data).splitlines()
    assert len(lines) == 2
    assert any("protocol.repeats" in line for line in lines)
    assert any("engine.startup_timeout_s" in line for line in lines)


def test_arm_may_not_override_the_matched_request(tmp_path: Path) -> None:
    data = _campaign()
    data["candidates"][0]["request"]["num_inference_steps"] = 8
    assert "candidates[0].request.num_inference_steps" in _error(tmp_path, data)


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("schema_version: 1\nname: [unclosed\nengine: {}\n")
    with pytest.raises(CampaignError, match=r"bad\.yaml: line \d+"):
        load_campaign(path)


def test_duplicate_yaml_key_rejected(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("schema_version: 1\nname: a\nname: b\n")
    with pytest.raises(CampaignError, match=r"dup\.yaml: line 3.*duplicate key 'name'"):
        load_campaign(path)


def test_non_mapping_top_level_rejected(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(
        CampaignError, match=r"list\.yaml: top level: a mapping of keys, found list"
    ):
        load_campaign(path)


def test_missing_file_names_path(tmp_path: Path) -> None:
    with pytest.raises(CampaignError, match=r"nowhere\.yaml: file not found"):
        load_campaign(tmp_path / "nowhere.yaml")


def test_relative_path_stays_relative_in_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _campaign()
    data["protocol"]["repeats"] = 0
    _write(tmp_path, data)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CampaignError) as info:
        load_campaign("c.yaml")
    assert str(info.value).startswith("c.yaml: protocol.repeats")
    assert str(tmp_path) not in str(info.value)


def test_placeholders_are_listed_and_load_fine(tmp_path: Path) -> None:
    data = _campaign()
    data["engine"]["model"] = "<FILL: checkpoint>"
    data["tracks"]["5s-lossless"]["inputs"]["prompt"]["sha256"] = "<FILL: prompt sha>"
    loaded = load_campaign(_write(tmp_path, data))
    assert unfilled_fields(loaded) == [
        "engine.model",
        "tracks.5s-lossless.inputs.prompt.sha256",
    ]


def test_placeholder_in_a_number_field_is_rejected(tmp_path: Path) -> None:
    data = _campaign()
    data["protocol"]["repeats"] = "<FILL: repeats>"
    assert "allowed only where text is expected" in _error(tmp_path, data)


def test_arms_for_puts_baseline_first_and_filters_candidates(tmp_path: Path) -> None:
    data = _campaign()
    data["candidates"].append({"id": "c2", "profile": "profiles/c1.yaml", "tracks": ["15s-lossy"]})
    loaded = load_campaign(_write(tmp_path, data))
    assert [a.id for a in loaded.arms_for("5s-lossless")] == ["b0", "c1"]
    assert [a.id for a in loaded.arms_for("15s-lossy")] == ["b0", "c1", "c2"]


def test_track_id_helpers() -> None:
    assert TRACK_IDS == ("5s-lossless", "5s-lossy", "15s-lossless", "15s-lossy")
    assert [duration_class(t) for t in TRACK_IDS] == ["5s", "5s", "15s", "15s"]
    assert [quality_class(t) for t in TRACK_IDS] == ["lossless", "lossy", "lossless", "lossy"]
    with pytest.raises(CampaignError):
        duration_class("10s-lossless")


# --------------------------------------------------------------------------- profiles


def test_profile_unknown_key_names_profile_file(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({**PROFILE, "flags": {}}))
    with pytest.raises(CampaignError, match=r"p\.yaml: flags: unknown key"):
        load_profile(path)


def test_profile_through_campaign_names_profile_file(tmp_path: Path) -> None:
    loaded = load_campaign(_write(tmp_path, _campaign()))
    (tmp_path / "profiles" / "c1.yaml").write_text(yaml.safe_dump({**PROFILE, "declared": "x"}))
    with pytest.raises(CampaignError, match=r"profiles/c1\.yaml: declared"):
        loaded.profile(loaded.model.candidates[0])


def test_baseline_profile_must_declare_baseline(tmp_path: Path) -> None:
    loaded = load_campaign(_write(tmp_path, _campaign()))
    (tmp_path / "profiles" / "b0.yaml").write_text(yaml.safe_dump({**PROFILE, "declared": "lossy"}))
    with pytest.raises(CampaignError, match=r"b0\.yaml: declared: 'baseline' for B0"):
        loaded.profile(loaded.model.baseline)


def test_profile_cli_args_follow_the_flag_rules() -> None:
    prof = LaunchProfile.model_validate(
        {**PROFILE, "args": {"enforce-eager": True, "log-stats": False, "usp": 4,
                             "diffusion-offload-config": {"mode": "layer"}}}
    )  # fmt: skip
    assert prof.cli_args() == [
        "--enforce-eager", "--usp", "4", "--diffusion-offload-config", '{"mode":"layer"}',
    ]  # fmt: skip


def test_profile_flag_with_dashes_rejected(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({**PROFILE, "args": {"--usp": 4}}))
    with pytest.raises(CampaignError, match=r"p\.yaml: args\.--usp: a flag name without"):
        load_profile(path)


def test_unknown_scorer_weights_name_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    data = _campaign()
    # What the 910C campaign once said: one key for CLIP ViT-L/14 and the LAION head together.
    data["scorer_weights"] = {"dino_vitb16": {"path": "/m/dino.pt", "sha256": "0" * 64},
                              "clip_vitl14_laion": {"path": "/m/clip.pt", "sha256": "1" * 64}}
    message = _error(tmp_path, data)
    assert "scorer_weights.clip_vitl14_laion" in message and "found 'clip_vitl14_laion'" in message
    # Every name there is, with what it serves; the known key beside it is not blamed.
    for name in WEIGHT_NAMES:
        assert name in message
    assert "laion_aesthetic (aesthetic_quality)" in message
    assert "scorer_weights.dino_vitb16" not in message
    data["scorer_weights"] = {n: {"path": f"/m/{n}.pt", "sha256": "0" * 64} for n in WEIGHT_NAMES}
    load_campaign(_write(tmp_path, data))


def test_scorer_weights_are_found_in_vbench_cache_layout(tmp_path: Path) -> None:
    from ref2va_accept.quality._weight_names import VBENCH_LAYOUT

    data = _campaign()
    data["scorer_weights_dir"] = "cache"
    data["scorer_weights"] = {"raft": {"sha256": "0" * 64},
                              "amt_s": {"path": "elsewhere/amt.pth", "sha256": "0" * 64},
                              "dreamsim": {"path": "/abs/models", "sha256": "0" * 64},
                              "dino_vitb16": {"path": "<FILL: where>", "sha256": "0" * 64}}
    loaded = load_campaign(_write(tmp_path, data))
    paths = loaded.scorer_weight_paths()
    folder = loaded.folder / "cache"
    assert paths["raft"] == folder / VBENCH_LAYOUT["raft"]
    assert paths["amt_s"] == folder / "elsewhere" / "amt.pth"
    assert paths["dreamsim"] == Path("/abs/models")
    assert "dino_vitb16" not in paths  # a placeholder path names no file: its dimension is open
    # Without the folder, a name with no path of its own cannot be found: refused when loading.
    del data["scorer_weights_dir"]
    message = _error(tmp_path, data)
    assert "scorer_weights.raft.path" in message and "scorer_weights_dir" in message
    assert "scorer_weights.amt_s" not in message


def test_weight_names_are_what_the_vbench_dimensions_read() -> None:
    from ref2va_accept.quality._vbench import MODEL_DIMENSIONS

    read: dict[str, set[str]] = {}
    for dimension, (names, _) in MODEL_DIMENSIONS.items():
        for name in names:
            read.setdefault(name, set()).add(dimension)
    assert {n: set(d) for n, d in WEIGHT_DIMENSIONS.items()} == read


# --------------------------------------------------------------------------- shipped files


def test_shipped_910c_loads_with_host_fields_unfilled() -> None:
    loaded = load_campaign(SHIPPED / "910c.yaml")
    unfilled = unfilled_fields(loaded)
    pin = [f for f in unfilled if f.startswith("engine.source_pin.")]
    # Every host-read identity field but vLLM-Omni's version, which the suite is written for.
    assert len(pin) == 12 and "engine.source_pin.vllm_omni.version" not in pin
    assert unfilled[: 1 + len(pin)] == ["engine.model", *pin]
    rest = unfilled[1 + len(pin):]
    # The rest only the host knows: comparison-point shapes read off its B0, and where the
    # VBench models lie on its disk.
    assert rest and all(
        (".comparison_points[" in f and f.endswith(".shape")) or f.startswith("scorer_weights")
        for f in rest)
    assert loaded.profile(loaded.model.baseline).declared == "baseline"
    assert verify(SHIPPED / "910c.yaml").cap_reason is not None
    # Every model file a VBench dimension reads is named (to be filled in), and nothing else.
    assert set(loaded.model.scorer_weights) == set(WEIGHT_NAMES)


def test_shipped_reference_campaign_loads() -> None:
    loaded = load_campaign(SHIPPED / "reference.yaml")
    assert unfilled_fields(loaded) == []
    assert set(loaded.model.tracks) == set(TRACK_IDS)
    assert loaded.engine_workdir() == REPO


def test_shipped_910c_b0_profile_pins_the_baseline_flags() -> None:
    args = load_profile(REPO / "engine/profiles/vllm-omni/b0.yaml").args
    assert args["enforce-eager"] is True
    assert args["cache-backend"] == "none"
    assert (args["ulysses-degree"], args["cfg-parallel-size"], args["num-gpus"]) == (4, 1, 4)
    assert isinstance(args["diffusion-offload-config"], dict)


# --------------------------------------------------------------------------- freeze / verify


def test_freeze_then_verify_is_clean(tmp_path: Path) -> None:
    path = _write(tmp_path, _campaign())
    target = freeze(path)
    assert target == lock_path(path) == tmp_path / "c.lock.json"
    lock = json.loads(target.read_text())
    assert set(lock["files"]) == set(campaign_files(load_campaign(path)))
    status = verify(path)
    assert status == FreezeStatus("frozen", (), (), _sha(target.read_bytes()))
    assert status.ok and status.cap_reason is None


def test_changed_input_byte_is_drift_naming_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, _campaign())
    freeze(path)
    image = tmp_path / "inputs" / "reference.png"
    image.write_bytes(b"X" + image.read_bytes()[1:])
    status = verify(path)
    assert status.state == "drifted" and status.cap_reason == "protocol_deviation"
    assert any(p.startswith("file inputs/reference.png: pinned sha256") for p in status.problems)


def test_changed_protocol_field_is_named(tmp_path: Path) -> None:
    data = _campaign()
    path = _write(tmp_path, data)
    freeze(path)
    data["protocol"]["repeats"] = 4
    path.write_text(yaml.safe_dump(data))
    assert verify(path).problems == ("protocol.repeats: locked 3, now 4",)


def test_changed_seed_names_deepest_path(tmp_path: Path) -> None:
    data = _campaign()
    path = _write(tmp_path, data)
    freeze(path)
    data["tracks"]["15s-lossy"]["request"]["seeds"] = [43]
    path.write_text(yaml.safe_dump(data))
    assert verify(path).problems == ("tracks.15s-lossy.request.seeds[0]: locked 42, now 43",)


def test_no_lock_is_not_frozen(tmp_path: Path) -> None:
    status = verify(_write(tmp_path, _campaign()))
    assert status.state == "not_frozen"
    assert status.cap_reason == "protocol_not_frozen"
    assert status.lock_sha256 is None


def test_freeze_refuses_a_mismatched_pin_naming_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, _campaign())
    (tmp_path / "inputs" / "reference.wav").write_bytes(b"other audio")
    with pytest.raises(FreezeError, match=r"file inputs/reference\.wav: pinned sha256"):
        freeze(path)
    assert not lock_path(path).exists()


def test_freeze_refuses_placeholders_and_missing_files(tmp_path: Path) -> None:
    data = _campaign()
    data["engine"]["source_pin"]["torch"] = "<FILL: source>"
    path = _write(tmp_path, data)
    (tmp_path / "profiles" / "c1.yaml").unlink()
    with pytest.raises(FreezeError) as info:
        freeze(path)
    assert "engine.source_pin.torch: unfilled placeholder" in str(info.value)
    assert "file profiles/c1.yaml: missing" in str(info.value)


def test_malformed_lock_names_it(tmp_path: Path) -> None:
    path = _write(tmp_path, _campaign())
    lock_path(path).write_text("{not json")
    with pytest.raises(CampaignError, match=r"c\.lock\.json: malformed lock"):
        verify(path)


def test_unfilled_after_freeze_caps_as_deviation() -> None:
    status = FreezeStatus("frozen", (), ("engine.model",), "0" * 64)
    assert not status.ok and status.cap_reason == "protocol_deviation"


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: _shuffled(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rng=st.randoms(use_true_random=False))
def test_canonical_hash_ignores_yaml_key_order(tmp_path: Path, rng: random.Random) -> None:
    def digest(data: dict[str, Any]) -> str:
        loaded: LoadedCampaign = load_campaign(_write(tmp_path, data))
        body = json.dumps(canonical_campaign(loaded), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(body.encode()).hexdigest()

    data = _campaign()
    assert digest(_shuffled(copy.deepcopy(data), rng)) == digest(data)


def test_shipped_reference_campaign_is_frozen_and_clean() -> None:
    # CI judges against this campaign: an edit without a new freeze would cap every verdict.
    status = verify(SHIPPED / "reference.yaml")
    assert status.ok, status.problems
