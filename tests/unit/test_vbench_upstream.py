"""Our model-based VBench scores against upstream VBench's own code, to 1e-6 relative.

The same frames and the same stand-in checkpoints (quality/_standins.py) go through the judge's
scorers here and through VBench 0.1.5's dimension functions (scripts/vbench_upstream.py) in the
environment scripts/vbench_env.sh builds, since VBench needs torchvision, which does not load
beside the judge's CPU torch. MUSIQ (pyiqa) needs it too, so the judge's imaging_quality is
computed in that environment as well, and so is i2v_background: DreamSim needs torchvision too.
Its stand-in is the folder DreamSim's first run leaves (three backbones, a LoRA adapter, and
torch.hub's copy of DINO's repository and weights), made in that environment. There, with every
stand-in in the folder, `scorers check` must find all eight model-based dimensions ready.

Building that environment takes about four minutes and 6 GB, so the comparison runs with
REF2VA_UPSTREAM=1, which CI sets (.ci/run); without the variable every test here is reported
skipped, never passed. When the environment cannot be built the check did not run: skipped with
the reason, or failed where REF2VA_REQUIRE_UPSTREAM=1 (CI sets that too).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ref2va_accept.cli import default_paths
from ref2va_accept.quality import score_frames
from ref2va_accept.quality._consistency import load_reference_image
from tests.unit.standin_store import lay_out_standins

ROOT = Path(__file__).resolve().parents[2]
RELATIVE = 1e-6
# What the judge's environment builds; musiq_spaq is made in VBench's (it needs pyiqa).
HERE = ("dino_vitb16", "clip_vitb32", "clip_vitl14", "laion_aesthetic", "raft", "amt_s")
pytestmark = [
    pytest.mark.heavy,  # large scorer models: after the timed self-tests (./ref2va)
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.skipif(os.environ.get("REF2VA_UPSTREAM") != "1",
                       reason="the comparison with upstream VBench is opt-in (REF2VA_UPSTREAM=1)"),
]


@pytest.fixture(scope="module")
def vbench_python() -> str:
    given = os.environ.get("REF2VA_VBENCH_PYTHON")
    if given:
        return given
    build = subprocess.run([str(ROOT / "scripts/vbench_env.sh")], cwd=ROOT, capture_output=True,
                           text=True, timeout=1800, check=False)
    if build.returncode != 0:
        why = f"VBench's environment could not be built: {build.stderr.strip()[-800:]}"
        if os.environ.get("REF2VA_REQUIRE_UPSTREAM") == "1":
            pytest.fail(why)
        pytest.skip(why + " (the comparison with upstream VBench did not run)")
    return str(ROOT / build.stdout.strip().splitlines()[-1])


def _clip(folder: Path) -> tuple[list[np.ndarray], Path, Path, Path]:
    """13 frames of 128x224 (7:4, as 768x1344) with a moving pattern, in a 216-colour palette so
    that the GIF holds them exactly; the frames as read back, a GIF, PNGs, a reference PNG."""
    from PIL import Image, ImageSequence

    levels = np.array([0, 51, 102, 153, 204, 255], np.uint8)
    palette = np.array([[r, g, b] for r in levels for g in levels for b in levels], np.uint8)
    yy, xx = np.mgrid[0:128, 0:224]
    pictures = []
    for t in range(13):
        r = ((xx + 7 * t) // 16 + yy // 32) % 6
        g = ((yy + 3 * t) // 24 + (xx - 5 * t) // 40) % 6
        b = ((xx // 28) * (yy // 32) + t // 3) % 6
        index = (r * 36 + g * 6 + b).astype(np.uint8)
        picture = Image.fromarray(index, mode="P")
        picture.putpalette(palette.ravel().tolist())
        pictures.append(picture)
    gif = folder / "clip.gif"
    pictures[0].save(gif, save_all=True, append_images=pictures[1:], duration=125, loop=0,
                     optimize=False, disposal=1)
    with Image.open(gif) as opened:  # as VBench's load_video reads it
        frames = [np.array(f.convert("RGB"), np.uint8) for f in ImageSequence.Iterator(opened)]
    assert len(frames) == 13
    pngs = folder / "frames"
    pngs.mkdir()
    for i, frame in enumerate(frames):
        Image.fromarray(frame).save(pngs / f"{i:04d}.png")
    reference = folder / "reference.png"
    edited = frames[0].copy()
    edited[40:90, 60:160] = [204, 51, 0]
    Image.fromarray(edited).save(reference)
    return frames, gif, pngs, reference


def _relative(ours: float, theirs: float) -> float:
    return abs(ours - theirs) / max(abs(theirs), 1e-12)


@pytest.fixture(scope="module")
def compared(vbench_python: str, tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[dict[str, Any], dict[str, Any]]:
    folder = tmp_path_factory.mktemp("upstream")
    cache = folder / "vbench-cache"
    lay_out_standins(tmp_path_factory, cache, HERE)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    made = subprocess.run([vbench_python, "-m", "ref2va_accept.cli", "scorers", "standins",
                           str(cache), "--names", "musiq_spaq,dreamsim"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert made.returncode == 0, made.stderr[-2000:]
    dreamsim_made = re.search(r'dreamsim: \{sha256: "([0-9a-f]{64})"', made.stdout)
    assert dreamsim_made, made.stdout[-2000:]
    frames, gif, pngs, reference = _clip(folder)
    upstream = subprocess.run([vbench_python, str(ROOT / "scripts/vbench_upstream.py"),
                               "--cache", str(cache), "--gif", str(gif), "--frames", str(pngs),
                               "--image", str(reference)], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=1200, check=False)
    assert upstream.returncode == 0, upstream.stderr[-3000:]
    theirs = json.loads(upstream.stdout.strip().splitlines()[-1])
    # Ours: every dimension the judge's environment can build, here; MUSIQ in VBench's.
    paths = default_paths(cache)
    ref = load_reference_image(reference)
    scores = score_frames(frames, fps=8, reference_image=ref,
                          weights={n: paths[n] for n in HERE}, include_proxies=False)
    ours: dict[str, Any] = {s.scorer.removeprefix("vbench."): s for s in scores
                            if s.scorer.startswith("vbench.")}
    there = subprocess.run(
        [vbench_python, "-c", _THERE, str(cache), str(pngs), str(reference)], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=600, check=False)
    assert there.returncode == 0, there.stderr[-2000:]
    for dimension, score in json.loads(there.stdout.strip().splitlines()[-1]).items():
        ours[f"{dimension}_there"] = score
    ours["_cache"], ours["_dreamsim_made"] = cache, dreamsim_made.group(1)
    return ours, theirs


# The judge's imaging_quality and i2v_background, in VBench's environment (pyiqa and DreamSim
# need torchvision); the DreamSim folder's identity once both sides have loaded it.
_THERE = """
import json, sys
from pathlib import Path
import numpy as np
from PIL import Image
from ref2va_accept.core._hashing import tree_sha256
from ref2va_accept.quality import score_frames
from ref2va_accept.cli._scorers_check import default_paths
from ref2va_accept.quality._consistency import load_reference_image
pngs = sorted(Path(sys.argv[2]).glob("*.png"))
frames = [np.array(Image.open(p).convert("RGB")) for p in pngs]
paths = default_paths(Path(sys.argv[1]))
weights = {n: paths[n] for n in ("musiq_spaq", "dreamsim")}
scores = score_frames(frames, fps=8, include_proxies=False, weights=weights,
                      reference_image=load_reference_image(Path(sys.argv[3])))
out = {}
for dim in ("imaging_quality", "i2v_background"):
    s = {x.scorer: x for x in scores}["vbench." + dim]
    out[dim] = {"status": s.status, "value": s.value, "detail": s.detail,
                "weights": [w.json_dict() for w in s.weights]}
out["i2v_background"]["folder_after"] = tree_sha256(paths["dreamsim"])
print(json.dumps(out))
"""


@pytest.mark.parametrize("dimension", ["temporal_flickering", "subject_consistency",
                                       "background_consistency", "aesthetic_quality",
                                       "motion_smoothness", "i2v_subject"])
def test_our_score_is_upstream_vbench_to_1e6(compared: tuple[dict[str, Any], dict[str, Any]],
                                            dimension: str) -> None:
    ours, theirs = compared
    score = ours[dimension]
    assert score.status == "ok", score.detail
    assert _relative(score.value, theirs[dimension]) <= RELATIVE, (score.value, theirs[dimension])


def test_dynamic_degree_and_each_pair_score_are_upstream_vbench(
        compared: tuple[dict[str, Any], dict[str, Any]]) -> None:
    ours, theirs = compared
    score = ours["dynamic_degree"]
    assert score.status == "ok", score.detail
    assert score.value == theirs["dynamic_degree"]
    pairs = score.extra["pair_scores"]
    assert len(pairs) == len(theirs["dynamic_degree_pairs"]) == 12
    for mine, upstream in zip(pairs, theirs["dynamic_degree_pairs"], strict=True):
        assert _relative(mine, upstream) <= RELATIVE, (mine, upstream)


def test_imaging_quality_is_upstream_vbench(compared: tuple[dict[str, Any], dict[str, Any]]
                                            ) -> None:
    ours, theirs = compared
    there = ours["imaging_quality_there"]
    assert there["status"] == "ok", there["detail"]
    assert _relative(there["value"], theirs["imaging_quality"]) <= RELATIVE


def test_i2v_background_is_upstream_vbench(compared: tuple[dict[str, Any], dict[str, Any]]
                                           ) -> None:
    # DreamSim from its stand-in folder, through dreamsim(pretrained=True) on both sides: LoRA
    # adapter, torch.hub's DINO, CLIP and OpenCLIP backbones; VBench++'s i2v_background upstream.
    ours, theirs = compared
    there = ours["i2v_background_there"]
    assert there["status"] == "ok", there["detail"]
    assert _relative(there["value"], theirs["i2v_background"]) <= RELATIVE
    assert there["weights"][0]["name"] == "dreamsim_model"
    # Loaded twice (VBench's side, then ours): torch.hub imported DINO's code from the folder and
    # keeps its bookkeeping there, and the identity is still the one the stand-in was made with.
    assert there["weights"][0]["sha256"] == ours["_dreamsim_made"]
    assert there["folder_after"] == ours["_dreamsim_made"]


def test_check_finds_every_dimension_ready_on_a_folder_of_standins(
        vbench_python: str, compared: tuple[dict[str, Any], dict[str, Any]]) -> None:
    cache = compared[0]["_cache"]  # every stand-in: the judge's six, MUSIQ and DreamSim
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    check = subprocess.run([vbench_python, "-m", "ref2va_accept.cli", "scorers", "check",
                            "--dir", str(cache), "--json"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=900, check=False)
    assert check.returncode == 0, (check.stdout[-2000:], check.stderr[-2000:])
    report = json.loads(check.stdout)
    assert len(report["dimensions"]) == 8
    assert all(d["ready"] for d in report["dimensions"].values()), report["dimensions"]
