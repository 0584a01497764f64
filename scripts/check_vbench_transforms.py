"""Check the judge's VBench preprocessing against transforms built with torchvision.

The judge reimplements VBench's input transforms in plain torch (``quality/_models.py``) so that it
needs no torchvision. This script builds each transform the way VBench's source defines it
(``vbench/utils.py``: ``dino_transform``, ``clip_transform``; ``vbench/imaging_quality.py``:
``transform(mode='longer')``; ``vbench2_beta_i2v/utils.py``: ``dino_transform_internet``,
``dreamsim_transform`` and their ``_Image`` variants for the reference image), feeds both the same
frames as VBench's ``load_video`` would (``torch.Tensor(frames)``: float32, T,C,H,W) and prints
the largest difference per transform. Exit 1 when any differs by more than ``--tolerance``.

Run it where torchvision is installed (the host). On a CPU-only torch with a CUDA torchvision
wheel, ``--stub-torchvision-ops`` skips registering torchvision's compiled operators (nms and the
like), which these transforms never call.

    python scripts/check_vbench_transforms.py [--tolerance 0] [--stub-torchvision-ops]
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

log = logging.getLogger("check_vbench_transforms")
SIZES = [(768, 1344), (64, 112), (480, 640), (1080, 1920), (333, 517)]


def vbench_transforms(tv: Any) -> tuple[dict[str, Callable[[Any], Any]],
                                        dict[str, Callable[[Any], Any]]]:
    """(video-frame transforms, reference-image transforms), by the judge's function names."""
    t = tv.transforms
    bicubic = t.InterpolationMode.BICUBIC
    to01 = t.Lambda(lambda x: x.float().div(255.0))
    imagenet = t.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    clip = t.Normalize((0.48145466, 0.4578275, 0.40821073),
                       (0.26862954, 0.26130258, 0.27577711))

    def musiq_longer(x: Any) -> Any:
        _, _, h, w = x.size()
        if max(h, w) > 512:
            scale = 512.0 / max(h, w)
            x = t.Resize(size=(int(scale * h), int(scale * w)), antialias=False)(x)
        return x / 255.0

    frames = {
        "dino_input": t.Compose([t.Resize(224, antialias=False), to01, imagenet]),
        "clip_input": t.Compose([t.Resize(224, interpolation=bicubic, antialias=False),
                                 t.CenterCrop(224), to01, clip]),
        "musiq_input": musiq_longer,
        # VBench++ leaves antialias to torchvision's default here.
        "dino_i2v_input": t.Compose([t.Resize(256, interpolation=bicubic), t.CenterCrop(224),
                                     to01, imagenet]),
        "dreamsim_input": t.Compose([t.Resize((224, 224), interpolation=bicubic), to01]),
    }
    images = {
        "dino_i2v_image": t.Compose([t.Resize(256, interpolation=bicubic), t.CenterCrop(224),
                                     t.ToTensor(), imagenet]),
        "dreamsim_image": t.Compose([t.Resize((224, 224), interpolation=bicubic), t.ToTensor()]),
    }
    return frames, images


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tolerance", type=float, default=0.0)
    parser.add_argument("--stub-torchvision-ops", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    # Imported here: the stub must be in place before torchvision registers its operators.
    import torch  # noqa: PLC0415

    if args.stub_torchvision_ops:
        torch.library.register_fake = lambda *a, **k: (lambda f: f)
    try:
        import torchvision  # noqa: PLC0415
    except (ImportError, RuntimeError) as exc:
        log.error("torchvision cannot be imported (%s); install it, or see "
                  "--stub-torchvision-ops", " ".join(str(exc).split())[:200])
        return 2
    from PIL import Image  # noqa: PLC0415

    from ref2va_accept.quality import _models as models  # noqa: PLC0415

    frame_tf, image_tf = vbench_transforms(torchvision)
    rng = np.random.default_rng(0)
    worst: dict[str, float] = {}
    for h, w in SIZES:
        frame = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        frame[: h // 2] = frame[: h // 2] // 4 + 100  # a smoother half beside the noise
        video = torch.Tensor(frame[None]).permute(0, 3, 1, 2)
        pairs = [(name, getattr(models, name)(frame), tf(video)) for name, tf in frame_tf.items()]
        pairs += [(name, getattr(models, name)(frame), tf(Image.fromarray(frame))[None])
                  for name, tf in image_tf.items()]
        for name, ours, theirs in pairs:
            if tuple(ours.shape) != tuple(theirs.shape):
                log.error("%s on %dx%d: shape %s, VBench %s", name, w, h, tuple(ours.shape),
                          tuple(theirs.shape))
                return 1
            worst[name] = max(worst.get(name, 0.0), float((ours - theirs).abs().max()))
    log.info("torchvision %s, torch %s, frames %s", torchvision.__version__, torch.__version__,
             ", ".join(f"{w}x{h}" for h, w in SIZES))
    for name, diff in worst.items():
        log.info("%-16s max |judge - VBench| = %.3g", name, diff)
    return 0 if max(worst.values()) <= args.tolerance else 1


if __name__ == "__main__":
    raise SystemExit(main())
