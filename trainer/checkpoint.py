"""Checkpoints: tensors in safetensors, everything else in a JSON file beside it. Nothing is unpickled.

``NAME.safetensors`` holds ``model.*`` (the state dict), ``optim.<param index>.<key>`` (optimizer
state), ``rng.*`` (generator states as uint8 tensors) and ``loop.*`` (the epoch's shuffled order and
the device-side accumulators of an epoch stopped midway). ``NAME.json`` holds the step, epoch,
optimizer param groups, schedule state and the spec. Both files are written to a temporary name
and renamed, tensors first, so a reader never sees a half-written checkpoint.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

META_VERSION = 1


def save_checkpoint(path: Path, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> Path:
    """Write ``path`` (.safetensors) and its ``.json`` sidecar atomically; returns the tensor file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flat = {k: v.detach().to("cpu", copy=True).contiguous() for k, v in tensors.items()}
    tmp = path.with_name(f".{path.name}.tmp")
    save_file(flat, str(tmp))
    os.replace(tmp, path)
    side = path.with_suffix(".json")
    tmp_meta = side.with_name(f".{side.name}.tmp")
    tmp_meta.write_text(json.dumps({"meta_version": META_VERSION, **meta}, indent=1), encoding="utf-8")
    os.replace(tmp_meta, side)
    return path


def read_checkpoint(path: Path | str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """All tensors and the metadata of a checkpoint."""
    p = Path(path)
    return load_file(str(p)), json.loads(p.with_suffix(".json").read_text(encoding="utf-8"))


def load_checkpoint_weights(path: Path | str) -> dict[str, torch.Tensor]:
    """The model's state dict from a checkpoint (keys are the graph's node ids): what exporters load."""
    tensors = load_file(str(path))
    return {k.removeprefix("model."): v for k, v in tensors.items() if k.startswith("model.")}


def optimizer_tensors(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Flatten an optimizer state dict: tensors for safetensors, the rest (groups, scalars) for JSON."""
    sd = opt.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, Any] = {}
    for idx, state in sd["state"].items():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optim.{idx}.{key}"] = value
            else:
                scalars[f"{idx}.{key}"] = value
    groups = [{k: _plain(v) for k, v in g.items()} for g in sd["param_groups"]]
    return tensors, {"param_groups": groups, "scalars": scalars}


def load_optimizer(opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """Restore what :func:`optimizer_tensors` flattened; tensor-valued lrs stay tensors."""
    state: dict[int, dict[str, Any]] = {}
    for name, value in tensors.items():
        if name.startswith("optim."):
            _, idx, key = name.split(".", 2)
            state.setdefault(int(idx), {})[key] = value
    for name, value in meta["scalars"].items():
        idx, key = name.split(".", 1)
        state.setdefault(int(idx), {})[key] = value
    groups = []
    for saved, current in zip(meta["param_groups"], opt.param_groups, strict=True):
        g = dict(saved)
        for k, v in current.items():
            if isinstance(v, torch.Tensor) and k in g:
                g[k] = torch.tensor(g[k], dtype=v.dtype, device=v.device)
        if isinstance(g.get("betas"), list):
            g["betas"] = tuple(g["betas"])
        groups.append(g)
    opt.load_state_dict({"state": state, "param_groups": groups})


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.item()
    if isinstance(value, tuple):
        return list(value)
    return value


def rng_tensors(data_generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Every random state the run draws from, as uint8 tensors."""
    out = {"rng.torch": torch.get_rng_state(), "rng.data": data_generator.get_state()}
    if torch.cuda.is_available():
        for i, state in enumerate(torch.cuda.get_rng_state_all()):
            out[f"rng.cuda.{i}"] = state
    return out


def restore_rng(tensors: dict[str, torch.Tensor], data_generator: torch.Generator) -> None:
    torch.set_rng_state(tensors["rng.torch"])
    data_generator.set_state(tensors["rng.data"])
    cuda = sorted(k for k in tensors if k.startswith("rng.cuda."))
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([tensors[k] for k in cuda][: torch.cuda.device_count()])
