"""The model files the VBench scorers read, by the names a campaign's ``scorer_weights`` uses.

Kept apart from :mod:`ref2va_accept.quality` (which loads OpenCV, scipy and torch) so that loading
a campaign can check its keys without them. :data:`WEIGHT_DIMENSIONS` says which VBench
dimensions each file serves, for the message that refuses an unknown key.
"""

from __future__ import annotations

from typing import Final

# Each name is one file: an image tower, a head, a flow or interpolation network (the aesthetic
# dimension needs two: CLIP ViT-L/14 and the LAION linear head on its embedding).
WEIGHT_DIMENSIONS: Final[dict[str, tuple[str, ...]]] = {
    "dino_vitb16": ("subject_consistency", "i2v_subject"),
    "clip_vitb32": ("background_consistency",),
    "clip_vitl14": ("aesthetic_quality",),
    "laion_aesthetic": ("aesthetic_quality",),
    "musiq_spaq": ("imaging_quality",),
    "dreamsim": ("i2v_background",),
    "raft": ("dynamic_degree",),
    "amt_s": ("motion_smoothness",),
}
WEIGHT_NAMES: Final[tuple[str, ...]] = tuple(WEIGHT_DIMENSIONS)

# Where VBench keeps each file in its cache folder (``~/.cache/vbench``, or $VBENCH_CACHE_DIR),
# as its ``init_submodules`` downloads them: a campaign that names that folder
# (``scorer_weights_dir``) finds every file here unless it gives another path. DreamSim is not in
# VBench's cache: VBench++ calls ``dreamsim(pretrained=True)``, which unzips its ensemble
# checkpoint into ``./models`` of the folder it ran in and points torch.hub there too (DINO's
# repository and weights land beside it); ``dreamsim_model`` is where to copy that folder.
VBENCH_LAYOUT: Final[dict[str, str]] = {
    "dino_vitb16": "dino_model/dino_vitbase16_pretrain.pth",
    "clip_vitb32": "clip_model/ViT-B-32.pt",
    "clip_vitl14": "clip_model/ViT-L-14.pt",
    "laion_aesthetic": "aesthetic_model/emb_reader/sa_0_4_vit_l_14_linear.pth",
    "musiq_spaq": "pyiqa_model/musiq_spaq_ckpt-358bb6af.pth",
    "raft": "raft_model/models/raft-things.pth",
    "amt_s": "amt_model/amt-s.pth",
    "dreamsim": "dreamsim_model",
}


def unknown_weight_message(name: str) -> str:
    """The line that refuses ``name``, listing the names there are and what each serves."""
    known = "; ".join(f"{n} ({', '.join(dims)})" for n, dims in WEIGHT_DIMENSIONS.items())
    return f"one of the scorers' weights names: {known}; found {name!r}"
