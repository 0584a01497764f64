"""The VBench models, built from the checkpoint files VBench itself downloads, by the libraries
that implement them.

Each weights name (:data:`ref2va_accept.quality._weight_names.WEIGHT_DIMENSIONS`) is one file of
VBench's cache folder (its layout: :data:`ref2va_accept.quality._weight_names.VBENCH_LAYOUT`) in the
format VBench reads, turned into a network by the code VBench runs on it:

- ``dino_vitb16``: DINO's ``dino_vitbase16_pretrain.pth`` (a state dict) in DINO's ViT-B/16
  (``vit_base``, patch 16, no head, as DINO's hubconf builds it), from the copy of DINO's
  ``vision_transformer.py`` that DreamSim ships (``dreamsim``);
- ``clip_vitb32``, ``clip_vitl14``: OpenAI's ``ViT-B-32.pt`` / ``ViT-L-14.pt`` (TorchScript
  archives of fp16 weights) through OpenAI CLIP's ``build_model`` on the archive's state dict,
  cast to float32 as ``clip.load(jit=False)`` does on the CPU (``clip``, from ``clip-anytorch``);
- ``laion_aesthetic``: ``sa_0_4_vit_l_14_linear.pth`` (a state dict) in ``torch.nn.Linear(768,
  1)``, as VBench builds it;
- ``musiq_spaq``: ``musiq_spaq_ckpt-358bb6af.pth`` in pyiqa's ``MUSIQ(pretrained_model_path=...)``
  (``pyiqa``, which needs torchvision);
- ``raft``: ``raft-things.pth`` (a state dict with ``module.`` prefixes) in VBench's RAFT
  (``vbench.third_party.RAFT``), small=False, as VBench's dynamic_degree builds it;
- ``amt_s``: ``amt-s.pth`` (``{"state_dict": ...}``) in VBench's AMT-S
  (``vbench.third_party.amt``) with the parameters of VBench's ``AMT-S.yaml``;
- ``dreamsim``: DreamSim's ensemble checkpoint folder as its first run leaves it (the checkpoint
  unzipped, and torch.hub's copy of DINO's repository and weights, since DreamSim points torch.hub
  at that folder), through ``dreamsim.dreamsim(pretrained=True, cache_dir=...)`` once every file
  it reads is there (it would download otherwise); needs torchvision, peft and open_clip.

Every network is called the way VBench calls it and returns what VBench reads from it (see
:class:`Network`). Nothing is downloaded: a file that is absent is a ScorerError naming it, and so
is a library that is not installed (naming the package to install).
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ref2va_accept.quality._libraries import library_version, submodule
from ref2va_accept.quality._registry import ScorerError

__all__ = ["DREAMSIM_FILES", "Network", "build_network"]

# What ``dreamsim(dreamsim_type="ensemble")`` reads from its cache folder before it would
# download (its own list), then what torch.hub, pointed at that folder by DreamSim, reads for DINO:
# its repository's code and DINO's weights (without them torch.hub would fetch both).
DREAMSIM_FILES = ("dino_vitb16_pretrain.pth", "open_clip_vitb16_pretrain.pth.tar",
                  "clip_vitb16_pretrain.pth.tar", "ensemble_lora",
                  "facebookresearch_dino_main/hubconf.py",
                  "checkpoints/dino_vitbase16_pretrain.pth")


@dataclass(frozen=True)
class Network:
    """A model ready to score with: ``call(*inputs)`` is what VBench computes from those inputs
    (features, a score, a flow, a middle frame); ``library`` says which code built it."""

    call: Callable[..., Any]
    library: str
    module: Any  # the torch module, for its parameters' dtype


def _torch_load(path: Path, name: str) -> Any:
    import torch  # noqa: PLC0415 - the judge imports torch only when a model is used

    try:
        return torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ScorerError(f"{name}: {path.name} is not a readable checkpoint: "
                          f"{' '.join(str(exc).split())[:200]}") from None


def _load_strict(module: Any, state: Any, name: str, path: Path) -> None:
    if not isinstance(state, dict):
        raise ScorerError(f"{name}: {path.name} holds {type(state).__name__}, not a state dict")
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise ScorerError(f"{name}: {path.name} does not fit the network: "
                          f"{' '.join(str(exc).split())[:300]}") from None


def _versioned(what: str, distribution: str) -> str:
    return f"{what} ({distribution} {library_version(distribution) or '?'})"


def _dino(path: Path) -> Network:
    vits = submodule("dreamsim", "feature_extraction.vision_transformer",
                     why="DINO's ViT code ships in it")
    net = vits.vit_base(patch_size=16, num_classes=0)
    _load_strict(net, _torch_load(path, "dino_vitb16"), "dino_vitb16", path)
    net.eval()
    return Network(net, _versioned("DINO vit_base/16", "dreamsim"), net)


def _clip_state(path: Path, name: str) -> Any:
    import torch  # noqa: PLC0415

    try:  # OpenAI's files are TorchScript archives; clip.load reads their state dict
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.jit.load(str(path), map_location="cpu").state_dict()  # type: ignore[no-untyped-call]
    except RuntimeError:
        return _torch_load(path, name)  # clip.load's fallback: a plain state dict


def _clip(name: str, path: Path) -> Network:
    clip_model = submodule("clip", "model", distribution="clip-anytorch",
                           why="OpenAI CLIP's model code")
    state = _clip_state(path, name)
    try:
        net = clip_model.build_model(dict(state))
    except (KeyError, RuntimeError, ValueError) as exc:
        raise ScorerError(f"{name}: {path.name} is not an OpenAI CLIP checkpoint: "
                          f"{' '.join(str(exc).split())[:200]}") from None
    net = net.float().eval()  # clip.load on the CPU
    return Network(net.encode_image, _versioned("OpenAI CLIP build_model", "clip-anytorch"), net)


def _laion(path: Path) -> Network:
    import torch  # noqa: PLC0415

    net = torch.nn.Linear(768, 1)
    _load_strict(net, _torch_load(path, "laion_aesthetic"), "laion_aesthetic", path)
    net.eval()
    return Network(net, f"torch.nn.Linear(768, 1) (torch {torch.__version__})", net)


def _musiq(path: Path) -> Network:
    arch = submodule("pyiqa", "archs.musiq_arch", why="MUSIQ's code; it needs torchvision")
    try:
        net = arch.MUSIQ(pretrained_model_path=str(path))
    except RuntimeError as exc:
        raise ScorerError(f"musiq_spaq: {path.name} does not fit pyiqa's MUSIQ: "
                          f"{' '.join(str(exc).split())[:300]}") from None
    net.training = False  # what VBench sets
    net.eval()
    return Network(net, _versioned("pyiqa MUSIQ", "pyiqa"), net)


def _raft(path: Path) -> Network:
    raft = submodule("vbench", "third_party.RAFT.core.raft", why="VBench's RAFT")
    args = _Args(small=False, mixed_precision=False, alternate_corr=False)
    net = raft.RAFT(args)
    state = _torch_load(path, "raft")
    if isinstance(state, dict):
        state = {k.replace("module.", ""): v for k, v in state.items()}
    _load_strict(net, state, "raft", path)
    net.eval()

    def call(image1: Any, image2: Any) -> Any:
        return net(image1, image2, iters=20, test_mode=True)[-1]

    return Network(call, _versioned("VBench RAFT", "vbench"), net)


class _Args(dict[str, Any]):
    """The attribute-and-key namespace RAFT reads its options from (VBench passes an EasyDict)."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def _amt_params() -> dict[str, Any]:
    import yaml  # noqa: PLC0415

    networks = submodule("vbench", "third_party.amt", why="VBench's AMT-S")
    cfg = Path(networks.__path__[0]) / "cfgs" / "AMT-S.yaml"
    network = yaml.safe_load(cfg.read_text(encoding="utf-8"))["network"]
    if network.get("name") != "networks.AMT-S.Model":
        raise ScorerError(f"VBench's {cfg.name} names {network.get('name')!r}, not AMT-S")
    return dict(network["params"])


def _amt(path: Path) -> Network:
    import torch  # noqa: PLC0415

    module = submodule("vbench", "third_party.amt.networks.AMT-S", why="VBench's AMT-S")
    net = module.Model(**_amt_params())
    ckpt = _torch_load(path, "amt_s")
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt:
        raise ScorerError(f"amt_s: {path.name} has no 'state_dict' (AMT's checkpoint format)")
    _load_strict(net, ckpt["state_dict"], "amt_s", path)
    net.eval()
    embt = torch.tensor(1 / 2).float().view(1, 1, 1, 1)

    def call(in0: Any, in1: Any) -> Any:
        # On the CPU VBench never rescales (scale 1), and pads to multiples of 16.
        return net(in0, in1, embt.to(in0.device), scale_factor=1.0, eval=True)["imgt_pred"]

    return Network(call, _versioned("VBench AMT-S", "vbench"), net)


def _dreamsim(folder: Path) -> Network:
    missing = [f for f in DREAMSIM_FILES if not (folder / f).exists()]
    if missing:
        raise ScorerError(f"dreamsim: {folder.name} lacks {', '.join(missing)} (the folder "
                          "DreamSim's first run leaves: its ensemble checkpoint unzipped, and "
                          "torch.hub's copy of DINO's repository and weights); nothing is "
                          "downloaded")
    model_mod = submodule("dreamsim", "model",
                          why="DreamSim; it needs torchvision, peft and open_clip")
    model, _ = model_mod.dreamsim(pretrained=True, device="cpu", cache_dir=str(folder))
    model.eval()
    return Network(model.embed, _versioned("DreamSim ensemble", "dreamsim"), model)


def build_network(name: str, path: Path) -> Network:
    """The network of weights ``name`` from ``path`` (a file; DreamSim's is a folder). What the
    libraries print while building (pyiqa's "Loading pretrained model", DreamSim's "Using
    cached") is dropped: stdout belongs to the command, and `scorers check --json` is JSON."""
    with contextlib.redirect_stdout(io.StringIO()):
        return _build_network(name, path)


def _build_network(name: str, path: Path) -> Network:
    if name == "dino_vitb16":
        return _dino(path)
    if name in ("clip_vitb32", "clip_vitl14"):
        return _clip(name, path)
    if name == "laion_aesthetic":
        return _laion(path)
    if name == "musiq_spaq":
        return _musiq(path)
    if name == "raft":
        return _raft(path)
    if name == "amt_s":
        return _amt(path)
    if name == "dreamsim":
        return _dreamsim(path)
    raise ScorerError(f"no loader for weights {name!r}")
