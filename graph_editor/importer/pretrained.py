"""Pretrained weights for an imported model: from a file, or from the caches torchvision and timm fill.

Nothing is downloaded. :func:`cached_weights` looks where those libraries keep what they downloaded
before: torch hub's ``checkpoints`` folder (torchvision: ``resnet18-f37072fd.pth``) and the Hugging
Face hub cache (timm: ``models--timm--resnet18.a1_in1k/snapshots/*/model.safetensors``).
:func:`load_weights` reads a file without running anything in it (safetensors, or ``torch.load`` with
``weights_only=True``) into the module before it is imported, so the import's ``state_dict`` holds
them keyed by node ids, ready for a run's ``model.init_from``.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import torch
from safetensors import SafetensorError
from torch import nn

from .module_import import ModuleImportError

SUFFIXES = (".safetensors", ".pth", ".pt", ".bin")
PREFIXES = ("module.", "model.")     # DataParallel's and some trainers' wrappers


def hub_checkpoints() -> Path:
    """torch hub's checkpoints folder (``$TORCH_HOME/hub/checkpoints``)."""
    return Path(torch.hub.get_dir()) / "checkpoints"


def hf_hub_cache() -> Path:
    """The Hugging Face hub cache (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def cached_weights(name: str) -> list[Path]:
    """Weights files of model ``name`` (``resnet18``) already in the local caches, best first: torch hub's
    ``name-<hash>.pth``, then timm's Hugging Face snapshots ``models--timm--name[.tag]``."""
    found: list[Path] = []
    hub = hub_checkpoints()
    if hub.is_dir():
        found += sorted(p for p in hub.iterdir() if p.suffix in SUFFIXES and
                        (p.stem == name or p.stem.startswith(f"{name}-") or p.stem.startswith(f"{name}_")))
    hf = hf_hub_cache()
    if hf.is_dir():
        for repo in sorted(hf.glob(f"models--timm--{name}*")):
            tail = repo.name.removeprefix(f"models--timm--{name}")
            if tail and not tail.startswith("."):      # resnet18d is not resnet18
                continue
            for snap in sorted((repo / "snapshots").glob("*")):
                found += [snap / f for f in ("model.safetensors", "pytorch_model.bin") if (snap / f).is_file()]
    return found


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """A weights file's tensors (nothing in it runs); wrapper prefixes removed."""
    tensors = load_tensors(path)
    for prefix in PREFIXES:
        if tensors and all(k.startswith(prefix) for k in tensors):
            tensors = {k.removeprefix(prefix): v for k, v in tensors.items()}
    return tensors


def load_tensors(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file or a ``torch.save`` file (``weights_only``: nothing in it runs),
    unwrapped from a ``state_dict`` or ``model`` entry. ValueError, one line saying why, when the file is
    not such a file (damaged, truncated, empty, a pickle of other objects) or holds no state dict."""
    try:
        loaded = _load(path)
    except (pickle.UnpicklingError, EOFError, RuntimeError, SafetensorError) as exc:
        raise ValueError(_why_unreadable(exc)) from None
    for key in ("state_dict", "model"):
        if isinstance(loaded, dict) and isinstance(loaded.get(key), dict):
            loaded = loaded[key]
    if not isinstance(loaded, dict):
        raise ValueError("holds no state dict (a dict of tensors)")
    return {k: v for k, v in loaded.items() if isinstance(v, torch.Tensor)}


def _load(path: Path) -> object:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    return torch.load(path, map_location="cpu", weights_only=True)


def _why_unreadable(exc: BaseException) -> str:
    """One line for a file torch.load or safetensors refused (their messages run over many lines)."""
    if isinstance(exc, EOFError):
        return "empty or cut short: not a weights file"
    if isinstance(exc, pickle.UnpicklingError):
        detail = [line.strip() for line in str(exc).splitlines() if line.strip()]
        # weights_only's refusal: a paragraph of advice, then the reason on its own line
        reason = next((line for line in detail if "Unsupported" in line or "invalid load key" in line), "")
        return ("not a weights file that loads without running code (torch.load(weights_only=True) refused it"
                + (f": {reason}" if reason else "") + "); save a state dict of tensors or use safetensors")
    if isinstance(exc, SafetensorError):
        return f"not a readable safetensors file ({str(exc).splitlines()[0][:160]})"
    return f"not a readable weights file ({(str(exc).splitlines() or [''])[0][:160]})"


def load_weights(module: nn.Module, source: str, name: str) -> Path:
    """Load ``source`` into ``module``: a weights file, or ``"cache"`` (the first of :func:`cached_weights`
    for ``name``). Tensors of another shape (a head for other classes) are left as they are; a file
    none of whose tensors fits is refused. Returns the file read."""
    if source == "cache":
        files = cached_weights(name)
        if not files:
            raise ModuleImportError([], f"no cached weights of {name}: looked in {hub_checkpoints()} and "
                                        f"{hf_hub_cache()} (nothing is downloaded; give a weights file)")
        path = files[0]
    else:
        path = Path(source).expanduser()
    try:
        tensors = read_state_dict(path)
    except (OSError, ValueError) as exc:     # load_tensors says why a file is not weights in one line
        raise ModuleImportError([], f"cannot read weights {path}: {str(exc).splitlines()[0][:200]}") from None
    own = module.state_dict()
    fits = {k: v for k, v in tensors.items() if k in own and own[k].shape == v.shape}
    if not fits:
        example = next(iter(own), "weight")
        raise ModuleImportError([], f"no tensor of {path} fits {name} (its names are like '{example}', the "
                                    f"file's like '{next(iter(tensors), '?')}')")
    module.load_state_dict(fits, strict=False)
    return path
