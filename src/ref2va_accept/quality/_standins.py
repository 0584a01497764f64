"""Stand-in checkpoints: seeded random weights in each official file format, real keys and shapes.

CI has no real VBench weights (nothing may be downloaded), so it scores with these instead. Each is
built by the same library that loads the real file (:mod:`loaders`), its floating tensors refilled
from numpy's PCG64 seeded by the weights name (so the bytes depend on nothing but the name, the
seed and the library versions), and written the way the official file is written: a state dict for
DINO, RAFT, LAION and MUSIQ, AMT's ``{"state_dict": ...}``, for CLIP OpenAI's TorchScript
archive with fp16 weights (the model traced through ``encode_image``), and for DreamSim its
ensemble folder as its first run leaves it (three backbones, a peft LoRA adapter, and the torch.hub
cache of DINO's repository and weights). Files land where VBench's
cache keeps them (:data:`ref2va_accept.quality._weight_names.VBENCH_LAYOUT`), so the folder is
laid out like an operator's ``~/.cache/vbench``. Scores made with them are labelled stand-in
wherever they appear; they exercise the path from a model-based score to a verdict, never
VBench's values. Their bytes are recognised wherever they are
(:mod:`ref2va_accept.quality._known_standins`).
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tempfile
import warnings
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ref2va_accept.quality._libraries import submodule
from ref2va_accept.quality._registry import ScorerError
from ref2va_accept.quality._weight_names import VBENCH_LAYOUT

__all__ = ["STANDIN_SEED", "Standin", "make_standins"]

STANDIN_SEED = 20261201
# OpenAI CLIP's build_model arguments for its two files: embed_dim, image_resolution,
# vision_layers, vision_width, vision_patch_size, context_length, vocab_size, transformer_width,
# transformer_heads, transformer_layers.
_CLIP_ARGS = {"clip_vitb32": (512, 224, 12, 768, 32, 77, 49408, 512, 8, 12),
              "clip_vitl14": (768, 224, 24, 1024, 14, 77, 49408, 768, 12, 12)}


@dataclass(frozen=True)
class Standin:
    name: str
    path: Path
    sha256: str


def _fill(module: Any, name: str, seed: int) -> None:
    """Refill every floating parameter and buffer: weights ~ N(0, 1/fan_in), norm scales
    1 + N(0, 0.02), biases and 1-D vectors N(0, 0.02); same name and seed, same values."""
    import torch  # noqa: PLC0415

    digest = hashlib.sha256(f"{name}:{seed}".encode()).digest()
    rng = np.random.Generator(np.random.PCG64(int.from_bytes(digest[:8], "little")))
    with torch.no_grad():
        for key, tensor in module.state_dict(keep_vars=True).items():
            if not tensor.is_floating_point():
                continue
            shape = tuple(tensor.shape)
            values = np.asarray(rng.standard_normal(shape), np.float64)
            if len(shape) >= 2:
                values = values / np.sqrt(max(1, int(np.prod(shape[1:]))))
            else:
                values = values * 0.02
                if key.endswith("weight") and ("norm" in key or "ln" in key or "bn" in key):
                    values = values + 1.0
            if key.endswith("running_var"):
                values = np.abs(values) + 1.0
            tensor.copy_(torch.from_numpy(np.asarray(values, np.float32)).to(tensor.dtype))


def _save(obj: Any, path: Path, *, script: bool = False) -> None:
    """Serialize in memory (a file name would become the archive's folder name inside the zip,
    and so the bytes would depend on the temporary name), then write the file atomically."""
    import torch  # noqa: PLC0415

    buffer = io.BytesIO()
    if script:  # OpenAI's format is TorchScript, which torch 2.13 deprecates
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.jit.save(obj, buffer)
        data = _without_debug_records(buffer.getvalue())
    else:
        torch.save(obj, buffer)
        data = buffer.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _without_debug_records(archive: bytes) -> bytes:
    """A TorchScript archive without what ties its bytes to this machine: the ``*.debug_pkl``
    records (source ranges naming the absolute path of the Python file each class came from,
    so a clone elsewhere wrote other bytes) and the random ``serialization_id``, which becomes
    the sha256 of the records kept. Loading needs neither. Records are stored, in their order."""
    kept: list[tuple[zipfile.ZipInfo, bytes]] = []
    with zipfile.ZipFile(io.BytesIO(archive)) as source:
        for info in source.infolist():
            if not info.filename.endswith(".debug_pkl"):
                kept.append((info, source.read(info)))
    digest = hashlib.sha256()
    for info, data in kept:
        if not info.filename.endswith("/.data/serialization_id"):
            digest.update(info.filename.encode() + b"\0" + data)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as target:
        for info, data in kept:
            written = (str(int(digest.hexdigest()[:32], 16)).encode()
                       if info.filename.endswith("/.data/serialization_id") else data)
            record = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            target.writestr(record, written, compress_type=zipfile.ZIP_STORED)
    return out.getvalue()


def _in_fresh_interpreter(name: str, path: Path, seed: int) -> None:
    """Build a CLIP stand-in (or DreamSim's folder) in a new interpreter. TorchScript names the
    classes it compiles after whatever that process compiled before (``___torch_mangle_N``), so
    the same trace made in a CLI process and inside a test session came out as different bytes; a
    fresh interpreter that does only this makes them the same everywhere."""
    done = subprocess.run([sys.executable, "-m", "ref2va_accept.quality._standins", name,
                           str(path), str(seed)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ScorerError(f"{name}: the stand-in could not be built: "
                          f"{done.stderr.strip()[-800:]}")


def _clip_here(name: str, path: Path, seed: int) -> None:
    import torch  # noqa: PLC0415

    clip_model = submodule("clip", "model", distribution="clip-anytorch")
    net = clip_model.CLIP(*_CLIP_ARGS[name]).eval()
    _fill(net, name, seed)
    clip_model.convert_weights(net)  # OpenAI's files hold fp16 weights
    image = torch.zeros(1, 3, 224, 224, dtype=torch.float16)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace_module(  # type: ignore[no-untyped-call]
            net, {"encode_image": image}, check_trace=False)
    _save(traced, path, script=True)


def _build(name: str, path: Path, seed: int) -> None:
    import torch  # noqa: PLC0415

    from ref2va_accept.quality._loaders import _amt_params, _Args  # noqa: PLC0415

    if name == "dino_vitb16":
        vits = submodule("dreamsim", "feature_extraction.vision_transformer")
        net = vits.vit_base(patch_size=16, num_classes=0)
        _fill(net, name, seed)
        _save(net.state_dict(), path)
    elif name in _CLIP_ARGS:
        _in_fresh_interpreter(name, path, seed)
    elif name == "laion_aesthetic":
        head = torch.nn.Linear(768, 1)
        _fill(head, name, seed)
        _save(head.state_dict(), path)
    elif name == "raft":
        raft = submodule("vbench", "third_party.RAFT.core.raft")
        net = raft.RAFT(_Args(small=False, mixed_precision=False, alternate_corr=False))
        _fill(net, name, seed)
        # raft-things.pth was saved from a DataParallel model: every key starts with "module.".
        _save({f"module.{k}": v for k, v in net.state_dict().items()}, path)
    elif name == "amt_s":
        amt = submodule("vbench", "third_party.amt.networks.AMT-S")
        net = amt.Model(**_amt_params())
        _fill(net, name, seed)
        _save({"state_dict": net.state_dict()}, path)
    elif name == "musiq_spaq":
        arch = submodule("pyiqa", "archs.musiq_arch", why="MUSIQ's code; it needs torchvision")
        net = arch.MUSIQ(pretrained=False)
        _fill(net, name, seed)
        _save(net.state_dict(), path)
    elif name == "dreamsim":
        _dreamsim_folder(path, seed)
    else:
        raise ScorerError(f"no stand-in for {name!r}")


# DINO's hubconf entry for dino_vitb16, as torch.hub caches DINO's repository in the hub folder
# (DreamSim points the hub folder at its own cache folder): the ViT from the repository's
# vision_transformer.py, its weights from the hub's checkpoints folder (the URL names the file;
# with the file there nothing is fetched). The one piece of a stand-in folder written here rather
# than by a library: DINO's repository is not on the package index; its vision_transformer.py is,
# in DreamSim's copy, and is copied in beside this.
_DINO_HUBCONF = """\
# Stand-in for DINO's hubconf.py (facebookresearch/dino, branch main), dino_vitb16 only.
dependencies = ["torch"]

import torch

import vision_transformer as vits


def dino_vitb16(pretrained=True, **kwargs):
    model = vits.__dict__["vit_base"](patch_size=16, num_classes=0, **kwargs)
    if pretrained:
        state_dict = torch.hub.load_state_dict_from_url(
            url="https://dl.fbaipublicfiles.com/dino/dino_vitbase16_pretrain/"
                "dino_vitbase16_pretrain.pth",
            map_location="cpu")
        model.load_state_dict(state_dict, strict=True)
    return model
"""
# DreamSim's ensemble LoRA settings (its training configuration); the adapter is written by peft.
_DREAMSIM_LORA = {"r": 16, "lora_alpha": 0.5, "lora_dropout": 0.3, "bias": "none",
                  "target_modules": ["qkv"]}


def _dreamsim_folder(folder: Path, seed: int) -> None:
    """DreamSim's ensemble folder as ``dreamsim(pretrained=True, cache_dir=folder)`` leaves it after
    its first run: its three backbone files, the ``ensemble_lora`` adapter, and the hub cache it
    pointed torch.hub at (DINO's repository and DINO's weights). Built in a fresh interpreter:
    DreamSim points torch.hub at the folder for the whole process."""
    # Its libraries first, here: a missing one is named plainly, not in a child's traceback.
    submodule("dreamsim", "model", why="DreamSim; it needs torchvision, peft and open_clip")
    _in_fresh_interpreter("dreamsim", folder, seed)


def _dreamsim_here(folder: Path, seed: int) -> None:
    import importlib  # noqa: PLC0415
    import shutil  # noqa: PLC0415

    import torch  # noqa: PLC0415

    why = "DreamSim; it needs torchvision, peft and open_clip"
    vits = submodule("dreamsim", "feature_extraction.vision_transformer", why=why)
    model_mod = submodule("dreamsim", "model", why=why)
    config = submodule("dreamsim", "config", why=why)
    peft = importlib.import_module("peft")
    partial = folder.with_name(folder.name + ".part")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    # DINO's repository and weights where torch.hub looks for them.
    repo = partial / "facebookresearch_dino_main"
    repo.mkdir()
    (repo / "hubconf.py").write_text(_DINO_HUBCONF, encoding="utf-8")
    shutil.copyfile(vits.__file__, repo / "vision_transformer.py")
    backbone = vits.vit_base(patch_size=16, num_classes=0)
    _fill(backbone, "dino_vitb16", seed)  # DINO's release: the same file as VBench's DINO
    _save(backbone.state_dict(), partial / "checkpoints" / "dino_vitbase16_pretrain.pth")
    # DreamSim's DINO checkpoint, of which it reads the student's projection head.
    head = torch.nn.Module()  # DINOHead(768, 2048)'s tensors, by the names DreamSim reads
    head.mlp = torch.nn.Sequential(torch.nn.Linear(768, 2048), torch.nn.GELU(),
                                   torch.nn.Linear(2048, 2048), torch.nn.GELU(),
                                   torch.nn.Linear(2048, 256))
    head.last_layer = torch.nn.Linear(256, 2048, bias=False)
    _fill(head, "dreamsim/dino_head", seed)
    student = {f"module.backbone.{k}": v for k, v in backbone.state_dict().items()}
    student.update({f"module.head.{k}": v for k, v in head.state_dict().items()})
    _save({"student": student}, partial / "dino_vitb16_pretrain.pth")
    # OpenAI CLIP and OpenCLIP ViT-B/16 converted to DINO-style ViTs, with their projections.
    for file_name in ("clip_vitb16_pretrain.pth.tar", "open_clip_vitb16_pretrain.pth.tar"):
        vit = vits.vit_base(patch_size=16)
        vit.pos_drop = torch.nn.LayerNorm(vit.embed_dim)
        vit.proj = torch.nn.Parameter(torch.empty(vit.embed_dim, 512))
        _fill(vit, f"dreamsim/{file_name}", seed)
        _save({"state_dict": vit.state_dict()}, partial / file_name)
    # The LoRA adapter over the ensemble, in peft's own format.
    ensemble = model_mod.PerceptualModel(**config.dreamsim_args["model_config"]["ensemble"],
                                         device="cpu", load_dir=str(partial),
                                         normalize_embeds=True)
    wrapped = peft.get_peft_model(ensemble, peft.LoraConfig(**_DREAMSIM_LORA))
    adapter = torch.nn.ParameterDict({k.replace(".", "/"): p for k, p in
                                      wrapped.named_parameters() if "lora_" in k})
    _fill(adapter, "dreamsim/ensemble_lora", seed)
    wrapped.save_pretrained(str(partial / "ensemble_lora"))
    for cache in partial.rglob("__pycache__"):
        shutil.rmtree(cache)
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(partial, folder)


def make_standins(folder: Path, names: Iterable[str], *, seed: int = STANDIN_SEED,
                  force: bool = False) -> list[Standin]:
    """Write the stand-ins for ``names`` into ``folder`` in VBench's layout (an existing file is
    kept unless ``force``); their paths and sha256. The folder's list of stand-ins
    (known_standins.WRITTEN_LIST) records each, so that bytes other library versions build are
    recognised as a stand-in's wherever they are below it."""
    from ref2va_accept.core import tree_sha256  # noqa: PLC0415
    from ref2va_accept.quality._known_standins import record_written  # noqa: PLC0415

    made = []
    for name in names:
        path = Path(folder) / VBENCH_LAYOUT[name]
        if force or not path.exists():
            _build(name, path, seed)
        made.append(Standin(name, path, tree_sha256(path)))
        record_written(Path(folder), [(name, made[-1].sha256)])
    return made


if __name__ == "__main__":  # _in_fresh_interpreter and _dreamsim_folder: NAME PATH SEED
    if sys.argv[1] == "dreamsim":
        _dreamsim_here(Path(sys.argv[2]), int(sys.argv[3]))
    else:
        _clip_here(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]))
