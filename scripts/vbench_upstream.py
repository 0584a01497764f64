"""Upstream VBench's own dimension code on a clip and a folder of checkpoints; prints JSON.

Runs in the environment scripts/vbench_env.sh builds (VBench 0.1.5 needs torchvision), never in
the judge's. tests/unit/test_vbench_upstream.py compares what this prints with the judge's own
scores of the same frames made with the same checkpoint files:

    python scripts/vbench_upstream.py --cache DIR --gif CLIP.gif --frames PNG_DIR --image REF.png

``--cache`` is laid out as VBench's cache folder (ref2va-accept scorers standins writes one). The
clip is given twice, losslessly: as a GIF for the dimensions that read it with VBench's
``load_video`` (PIL) and as a folder of PNGs for those that read frames with OpenCV (VBench reads
an MP4 with decord or OpenCV, whose colour conversions are not what is compared here). Each
dimension is computed by VBench's function for it; where VBench only offers a loop over a JSON of
video paths, the loop's own building blocks are called (named below). Networks are the ones VBench
builds: OpenAI's ``clip.load``, pyiqa's MUSIQ, VBench's RAFT and AMT-S from their checkpoints;
DINO's ViT is built from DreamSim's copy of DINO's code, because ``torch.hub.load`` of DINO's
repository needs that repository, which nothing here may download; DreamSim (i2v_background) is
built by ``dreamsim(pretrained=True)`` from its folder, which holds torch.hub's copy of DINO.
"""

# Each dimension imports its VBench module only when its checkpoints are there.
# ruff: noqa: PLC0415
from __future__ import annotations

import argparse
import json
import os
import warnings
from pathlib import Path
from typing import Any

from ref2va_accept.quality._weight_names import VBENCH_LAYOUT

# scripts/vbench_env.sh installs the judge there too: the cache layout is the judge's own.
LAYOUT = VBENCH_LAYOUT


def _dino(path: Path) -> Any:
    import torch
    from dreamsim.feature_extraction.vision_transformer import vit_base

    model = vit_base(patch_size=16, num_classes=0)  # what DINO's hubconf builds for dino_vitb16
    model.load_state_dict(torch.load(path, map_location="cpu"), strict=True)
    return model.eval()


def upstream_scores(cache: Path, gif: str, frames: str, image: str) -> dict[str, Any]:
    import cv2
    import numpy as np
    from easydict import EasyDict

    out: dict[str, Any] = {}
    have = {name: (cache / rel).exists() for name, rel in LAYOUT.items()}
    device = "cpu"

    # temporal_flickering: cal_score's own steps (it opens an MP4 with OpenCV; here the frames).
    from vbench import temporal_flickering as tf
    bgr = [cv2.imread(str(p), cv2.IMREAD_COLOR) for p in sorted(Path(frames).glob("*.png"))]
    out["temporal_flickering"] = (255.0 - np.mean(tf.mae_seq(bgr)).item()) / 255.0

    if have["dino_vitb16"]:
        from vbench.subject_consistency import subject_consistency
        from vbench2_beta_i2v.i2v_subject import i2v_subject

        dino = _dino(cache / LAYOUT["dino_vitb16"])
        out["subject_consistency"] = subject_consistency(dino, [gif], device, False)[0]
        out["i2v_subject"] = float(i2v_subject(dino, [(image, gif)], device)[0])
    if have["dreamsim"]:
        from dreamsim import dreamsim
        from vbench2_beta_i2v.i2v_background import i2v_background

        # compute_i2v_background's own call, with the folder named and the CPU given (it leaves
        # both to DreamSim's defaults, ./models and cuda).
        folder = str(cache / LAYOUT["dreamsim"])
        model, _ = dreamsim(pretrained=True, device=device, cache_dir=folder)
        out["i2v_background"] = float(i2v_background(model, [(image, gif)], device)[0])
    if have["clip_vitb32"]:
        import clip
        from vbench.background_consistency import background_consistency

        model, preprocess = clip.load(str(cache / LAYOUT["clip_vitb32"]), device=device)
        out["background_consistency"] = background_consistency(model, preprocess, [gif], device,
                                                               False)[0]
    if have["clip_vitl14"] and have["laion_aesthetic"]:
        import clip
        from vbench.aesthetic_quality import get_aesthetic_model, laion_aesthetic

        model, _ = clip.load(str(cache / LAYOUT["clip_vitl14"]), device=device)
        head = get_aesthetic_model(str((cache / LAYOUT["laion_aesthetic"]).parent)).to(device)
        out["aesthetic_quality"] = float(laion_aesthetic(head, model, [gif], device)[0])
    if have["musiq_spaq"]:
        from pyiqa.archs.musiq_arch import MUSIQ
        from vbench.imaging_quality import technical_quality

        musiq = MUSIQ(pretrained_model_path=str(cache / LAYOUT["musiq_spaq"]))
        musiq.training = False  # what compute_imaging_quality sets
        out["imaging_quality"] = float(technical_quality(musiq, [gif], device)[0])
    if have["amt_s"]:
        import vbench
        from vbench.motion_smoothness import MotionSmoothness

        config = Path(vbench.__file__).parent / "third_party/amt/cfgs/AMT-S.yaml"
        motion = MotionSmoothness(str(config), str(cache / LAYOUT["amt_s"]), device)
        out["motion_smoothness"] = float(motion.motion_score(frames))
    if have["raft"]:
        from vbench.dynamic_degree import DynamicDegree

        args = EasyDict({"model": str(cache / LAYOUT["raft"]), "small": False,
                         "mixed_precision": False, "alternate_corr": False})
        dynamic = DynamicDegree(args, device)
        # infer's own loop, run once: each pair's score as its get_score returns it (infer keeps
        # them to itself), recorded on the way through.
        pairs: list[float] = []
        score = dynamic.get_score

        def recorded(img: Any, flo: Any) -> float:
            value: float = score(img, flo)
            pairs.append(value)
            return value

        dynamic.get_score = recorded
        out["dynamic_degree"] = 1.0 if dynamic.infer(frames) else 0.0
        out["dynamic_degree_pairs"] = pairs
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--gif", required=True)
    parser.add_argument("--frames", required=True)
    parser.add_argument("--image", required=True)
    args = parser.parse_args()
    os.environ.setdefault("TQDM_DISABLE", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = upstream_scores(args.cache, args.gif, args.frames, args.image)
    print(json.dumps(scores))


if __name__ == "__main__":
    main()
