"""The models behind the VBench dimensions (built by :mod:`loaders` from VBench's own checkpoint
files), and VBench's preprocessing for each.

Nothing is downloaded: the caller names a file per model, :func:`load_model` builds its network
on the CPU and records the file's sha256. torch is imported here lazily, inside the functions,
because the judge must import without it. What each network takes (float32, NCHW, batch 1;
``LoadedModel.each`` stacks several frames into one batch) and gives back, as VBench calls it:

========================  ==============================================  ====================
name                      input                                           output
========================  ==============================================  ====================
dino_vitb16               [1,3,224,W'] ImageNet-normalised (VBench's      [1, 768] CLS features
                          ``dino_transform``: short side 224, no crop);
                          for i2v_subject [1,3,224,224] (VBench++'s
                          ``dino_transform_internet``: bicubic short side
                          256, centre crop 224)
clip_vitb32, clip_vitl14  [1,3,224,224] CLIP-normalised (``clip_transform``:  ``encode_image``
                          bicubic short side 224, centre crop 224)         features
laion_aesthetic           [1, 768] L2-normalised CLIP ViT-L/14 features   [1, 1] score
musiq_spaq                [1,3,h,w] in [0,1], long side <= 512            [1, 1], 0..100
dreamsim                  [1,3,224,224] in [0,1]                          [1, D] ``embed``
raft                      two [1,3,H8,W8] in [0,255], replicate-padded    [1,2,H8,W8] flow
                          ("sintel" centring) to multiples of 8           (iters=20, test mode)
amt_s                     two [1,3,H16,W16] in [0,1], replicate-padded    [1,3,H16,W16] middle
                          to multiples of 16                               frame (t = 1/2)
========================  ==============================================  ====================

Frames are resized as VBench resizes them: ``load_video`` hands its transforms
``torch.Tensor(frames)``, a float32 tensor, so the resize is never rounded or clamped back to
uint8 (bicubic may overshoot 0..255), then divided by 255. VBench's own dimensions pass
``antialias=False``; VBench++'s i2v transforms leave it to torchvision, whose default has
antialiased tensors since 0.17, so those use ``antialias=True`` (I2V_ANTIALIAS). The reference
image takes VBench++'s PIL path (``Image.open`` -> PIL bicubic resize -> ``ToTensor``) at its own
size: VBench++ crops references to the video's aspect ratio when it prepares its data, so the
campaign's reference images must be prepared that way too. ``scripts/check_vbench_transforms.py``
compares every transform here with torchvision's.
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ref2va_accept.evidence import WeightRecord
from ref2va_accept.quality._imageops import U8
from ref2va_accept.quality._registry import ScorerError, weight_identity
from ref2va_accept.quality._weight_names import WEIGHT_NAMES

log = logging.getLogger(__name__)

__all__ = [
    "MODEL_NAMES",
    "LoadedModel",
    "amt_input",
    "clip_input",
    "dino_i2v_image",
    "dino_i2v_input",
    "dino_input",
    "dreamsim_image",
    "dreamsim_input",
    "load_model",
    "musiq_input",
    "raft_input",
    "unpad",
]

MODEL_NAMES = WEIGHT_NAMES  # the campaign's scorer_weights keys (checked when it loads)
_IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
_CLIP = ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))
F32 = npt.NDArray[np.float32]
# torchvision's tensor Resize default since 0.17; VBench++'s i2v transforms do not set it.
I2V_ANTIALIAS = True


# How many of a model's latest calls it remembers (inputs and output): a video's frames reach
# several dimensions, each with its own preprocessing, so a repeat need not be the very last call.
RECENT_CALLS = 4


@dataclass(frozen=True)
class LoadedModel:
    """A network ready to score with, and the file it was built from.

    A call whose inputs equal one of its :data:`RECENT_CALLS` latest (same shapes, same values)
    gives that call's output again instead of running the network: a held frame (a still video,
    or any frame identical to one before it) costs nothing after its first. The network is a
    function of its inputs, so on the CPU that is bit for bit the output a second run gives
    (tests/unit/test_quality_vbench.py); on a device whose kernels need not be deterministic it
    is one of the outputs a run may give. A 5 s output of a still video took 27 s of CPU through
    CLIP ViT-B/32 here, frame by frame, and takes one frame's worth now (docs/benchmarks.md)."""

    name: str
    identity: WeightRecord
    module: Any  # the network's call (loaders.Network.call); loosely typed: no torch at import
    # What its scores are made with, for the evidence: the code that built the network, the dtype
    # of its parameters (None: it has none) and where it runs. Its inputs are always float32
    # (upstream runs CLIP in fp16 on GPU).
    parameters_dtype: str | None = None
    device: str = "cpu"
    library: str = ""
    # The latest calls, newest last: (inputs, output).
    recent: list[tuple[tuple[Any, ...], F32]] = field(default_factory=list, compare=False,
                                                      repr=False)

    def made_with(self) -> dict[str, Any]:
        return {"parameters": self.parameters_dtype, "inputs": "float32", "device": self.device,
                "network": self.library}

    def __call__(self, *inputs: Any) -> F32:
        import torch  # noqa: PLC0415 - the judge imports torch only when a model is used

        for seen, output in reversed(self.recent):
            if len(seen) == len(inputs) and all(
                    a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
                    for a, b in zip(seen, inputs, strict=True)):
                again: F32 = output.copy()
                return again
        result = self._run(inputs)
        self.recent.append((tuple(x.detach().clone() for x in inputs), result.copy()))
        del self.recent[:-RECENT_CALLS]
        return result

    def each(self, inputs: Sequence[Any]) -> list[F32]:
        """The output of each of ``inputs`` (one frame each, batch 1), from one call of the network
        on the distinct ones stacked into a batch: a batch costs a CPU about 0.6 of its frames
        run one by one (CLIP ViT-B/32, docs/benchmarks.md). A frame repeated in the batch is run
        once; the batch as a whole is one input to ``__call__``, so a batch seen before (a still
        video's) is not run again, and what it gives is what running that batch gives. A frame's
        features from a batch differ from its batch-1 features by float rounding only (about
        1e-6 of a feature): B0 and a candidate are batched alike, and a video is always scored
        with the same batches, so its scores repeat themselves."""
        import torch  # noqa: PLC0415

        distinct: list[Any] = []
        rows: list[int] = []
        for x in inputs:
            row = next((i for i, seen in enumerate(distinct)
                        if seen.shape == x.shape and torch.equal(seen, x)), None)
            if row is None:
                row = len(distinct)
                distinct.append(x)
            rows.append(row)
        if not distinct:
            return []
        out = self(distinct[0] if len(distinct) == 1 else torch.cat(distinct))
        return [out[row:row + 1].copy() for row in rows]

    def _run(self, inputs: tuple[Any, ...]) -> F32:
        import torch  # noqa: PLC0415

        with torch.inference_mode(), warnings.catch_warnings():
            # VBench's RAFT still calls torch.cuda.amp.autocast (disabled) and meshgrid unindexed.
            warnings.simplefilter("ignore", FutureWarning)
            warnings.filterwarnings("ignore", message="torch.meshgrid", category=UserWarning)
            if self.device != "cpu":
                inputs = tuple(x.to(self.device) for x in inputs)
            out = self.module(*inputs)
        if isinstance(out, (tuple, list)):
            out = out[-1]
        if isinstance(out, Mapping):  # AMT returns {"imgt_pred": ...}
            out = out["imgt_pred"]
        result = np.asarray(out.detach().to(torch.float32).cpu().numpy(), np.float32)
        if not np.isfinite(result).all():
            # NaN or inf would become some number downstream (a uint8 cast, a mean): the
            # dimension is in error instead, never scored on them.
            bad = int(result.size - np.count_nonzero(np.isfinite(result)))
            raise ValueError(f"{self.name} ({self.identity.name}) gave {bad} "
                             f"non-finite value(s) of {result.size}")
        return result


def prepare_device(device: str) -> None:
    """Make ``device`` usable for the scorers (cpu, npu:N through torch_npu, cuda:N), or
    ScorerError naming what is missing: a campaign's scoring.device is never swapped for
    another (B0 and the candidate are always scored on the same one)."""
    if device == "cpu":
        return
    kind, _, index = device.partition(":")
    if kind not in ("npu", "cuda") or not index.isdigit():
        raise ScorerError(f"scoring device {device!r}: cpu, npu:N or cuda:N")
    import torch  # noqa: PLC0415

    if kind == "npu":
        try:
            import torch_npu  # noqa: F401, PLC0415
        except ImportError:
            raise ScorerError(f"scoring device {device}: torch_npu does not import here") from None
        available, count = torch.npu.is_available(), torch.npu.device_count()  # type: ignore[attr-defined]
    else:
        available, count = torch.cuda.is_available(), torch.cuda.device_count()
    if not available or int(index) >= count:
        raise ScorerError(f"scoring device {device}: {kind} sees {count if available else 0} "
                          "device(s) here")


def load_model(name: str, path: Path, *, stand_in: bool = False,
               device: str = "cpu") -> LoadedModel:
    """The network of weights ``name`` from VBench's checkpoint file at ``path`` (a folder for
    DreamSim), built by :mod:`loaders`; ScorerError for anything that keeps it from scoring."""
    if name not in MODEL_NAMES:
        raise ScorerError(f"unknown model name {name!r}; expected one of {', '.join(MODEL_NAMES)}")
    path = Path(path)
    if not path.exists():
        raise ScorerError(f"{name}: weights file {path.name} not found")
    identity = weight_identity(path)  # a stand-in's bytes are recognised by themselves
    if stand_in:
        identity = WeightRecord.of(identity.name, identity.sha256, stand_in=True, declared=True)
    if device == "cpu":
        network = _cpu_network(name, path.resolve(), identity.sha256)
    else:
        network = _build(name, path)
        network.module.to(device)  # the call closes over this module: it now runs there
    dtypes = [str(t.dtype).removeprefix("torch.")
              for t in (*network.module.parameters(), *network.module.buffers())
              if t.is_floating_point()]
    log.info("loaded %s from %s (sha256 %s) with %s", name, path.name, identity.sha256[:12],
             network.library)
    return LoadedModel(name, identity, network.call, parameters_dtype=dtypes[0] if dtypes else None,
                       device=device, library=network.library)


def _build(name: str, path: Path) -> Any:
    from ref2va_accept.quality._loaders import build_network  # noqa: PLC0415 - needs torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return build_network(name, path)


@functools.lru_cache(maxsize=len(MODEL_NAMES))
def _cpu_network(name: str, path: Path, sha256: str) -> Any:
    """The network built from these bytes, kept for the process on the CPU: a lossy track scores
    each of its videos with the same weights, and building CLIP ViT-B/32 took 2.4-3.6 s of CPU
    each time. The bytes' sha256 is in the key (other bytes at the same path build anew); at
    most as many stay as there are weights names: what scoring one video holds anyway. On a device
    each video's networks are built and freed as before, leaving the device's memory to the
    engines between scorings."""
    del sha256  # in the key only
    return _build(name, path)


def _tensor(frame: U8) -> Any:
    import torch  # noqa: PLC0415

    return torch.from_numpy(np.ascontiguousarray(frame)).permute(2, 0, 1)[None].to(torch.float32)


def _resize(x: Any, size: tuple[int, int], mode: str, antialias: bool = False) -> Any:
    import torch  # noqa: PLC0415

    if tuple(x.shape[-2:]) == size:
        return x
    return torch.nn.functional.interpolate(x, size=size, mode=mode, align_corners=False,
                                           antialias=antialias)


def _short_side_size(h: int, w: int, short: int) -> tuple[int, int]:
    # torchvision's Resize(int): the long side is truncated, not rounded.
    if h <= w:
        return short, int(short * w / h)
    return int(short * h / w), short


def _normalize(x01: Any, stats: tuple[tuple[float, ...], tuple[float, ...]]) -> Any:
    """torchvision ``Normalize`` of a 0..1 tensor."""
    import torch  # noqa: PLC0415

    mean = torch.tensor(stats[0], dtype=torch.float32).view(1, 3, 1, 1)
    std = torch.tensor(stats[1], dtype=torch.float32).view(1, 3, 1, 1)
    return (x01 - mean) / std


def dino_input(frame: U8) -> Any:
    x = _tensor(frame)
    x = _resize(x, _short_side_size(frame.shape[0], frame.shape[1], 224), "bilinear")
    return _normalize(x / 255.0, _IMAGENET)


def _center_crop(x: Any, size: int) -> Any:
    h, w = x.shape[-2:]
    top, left = round((h - size) / 2.0), round((w - size) / 2.0)
    return x[..., top:top + size, left:left + size]


def clip_input(frame: U8) -> Any:
    x = _tensor(frame)
    x = _resize(x, _short_side_size(frame.shape[0], frame.shape[1], 224), "bicubic")
    return _normalize(_center_crop(x, 224) / 255.0, _CLIP)


def dreamsim_input(frame: U8) -> Any:
    """VBench++ ``dreamsim_transform(224)`` on a video frame: bicubic to 224x224, / 255."""
    return _resize(_tensor(frame), (224, 224), "bicubic", I2V_ANTIALIAS) / 255.0


def dino_i2v_input(frame: U8) -> Any:
    """VBench++ ``dino_transform_internet()`` on a video frame: bicubic short side 256, centre
    crop 224, / 255, ImageNet normalisation."""
    x = _tensor(frame)
    x = _resize(x, _short_side_size(frame.shape[0], frame.shape[1], 256), "bicubic",
                I2V_ANTIALIAS)
    return _normalize(_center_crop(x, 224) / 255.0, _IMAGENET)


def _pil_resize(image: U8, size_hw: tuple[int, int]) -> Any:
    """PIL's bicubic resize (always antialiased), as torchvision's Resize does on a PIL image;
    returns ``ToTensor``'s [1, 3, H, W] float in 0..1."""
    import torch  # noqa: PLC0415
    from PIL import Image  # noqa: PLC0415 - only the reference-image path needs Pillow

    pil = Image.fromarray(np.ascontiguousarray(image), mode="RGB")
    if pil.size != (size_hw[1], size_hw[0]):
        pil = pil.resize((size_hw[1], size_hw[0]), Image.Resampling.BICUBIC)
    array = np.asarray(pil, np.float32) / np.float32(255.0)
    return torch.from_numpy(np.ascontiguousarray(array)).permute(2, 0, 1)[None]


def dino_i2v_image(image: U8) -> Any:
    """VBench++ ``dino_transform_Image_internet()`` on the reference image (PIL path)."""
    x = _pil_resize(image, _short_side_size(image.shape[0], image.shape[1], 256))
    return _normalize(_center_crop(x, 224), _IMAGENET)


def dreamsim_image(image: U8) -> Any:
    """VBench++ ``dreamsim_transform_Image(224)`` on the reference image (PIL path)."""
    return _pil_resize(image, (224, 224))


def musiq_input(frame: U8, mode: str = "longer") -> Any:
    """VBench's imaging-quality transform ('longer' is its default; 'shorter' is the old one)."""
    x = _tensor(frame)
    h, w = frame.shape[:2]
    side = max(h, w) if mode == "longer" else min(h, w)
    if side > 512:
        scale = 512.0 / side
        x = _resize(x, (int(scale * h), int(scale * w)), "bilinear")
    return x / 255.0


def _pad(x: Any, divisor: int) -> tuple[Any, tuple[int, int, int, int]]:
    import torch  # noqa: PLC0415

    h, w = x.shape[-2:]
    pad_h = (((h // divisor) + 1) * divisor - h) % divisor
    pad_w = (((w // divisor) + 1) * divisor - w) % divisor
    pads = (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2)
    if not any(pads):
        return x, pads
    return torch.nn.functional.pad(x, pads, mode="replicate"), pads


def raft_input(frame: U8) -> tuple[Any, tuple[int, int, int, int]]:
    return _pad(_tensor(frame), 8)


def amt_input(frame: U8) -> tuple[Any, tuple[int, int, int, int]]:
    return _pad(_tensor(frame) / 255.0, 16)


def unpad(x: F32, pads: tuple[int, int, int, int]) -> F32:
    left, right, top, bottom = pads
    h, w = x.shape[-2:]
    return x[..., top:h - bottom, left:w - right]


Preprocess = Callable[[U8], Any]
