"""What an exported model does to its input before the graph sees it, and what its outputs mean.

Training standardises every sample with the train split's per-channel (images) or per-feature
(tabular) mean and std (:func:`trainer.data.normalise`). An exported model takes what the dataset
file holds instead (raw values; images as their pixel values, ``N x C x H x W``) and standardises
inside itself: :class:`WithPreprocessing` puts that step in front of the graph's module, so every
format (ONNX, .pt2, .pte, model.py) carries it. :class:`Preprocessing` is the same step as data,
with the class names: written into each export's metadata and read back by ``torch-studio predict``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

METADATA_KEY = "torch_studio.preprocessing"  # ONNX metadata_props key, safetensors header key
SIDECAR = ".preprocessing.json"              # beside a .pt2/.pte: model.pt2 -> model.pt2.preprocessing.json
INPUT_RAW = "raw values as the dataset file holds them (images: pixel values, N x C x H x W), as float32"
INNER = "inner"                              # the graph's module inside WithPreprocessing
INPUT_PREPARED = "samples as the graph takes them (no preprocessing is known for a graph without a run)"


@dataclass
class Preprocessing:
    """``(x - mean) / std`` over axis 1 (channel or feature), then the graph; ``classes`` name the logits.

    ``mean``/``std`` empty: the model takes its input as it is (a graph exported without a run, or a
    run trained with ``data.augment.normalize`` off)."""

    classes: list[str]
    input_shape: list[int]
    mean: list[float] = field(default_factory=list)
    std: list[float] = field(default_factory=list)
    input: str = INPUT_RAW

    @property
    def standardises(self) -> bool:
        return bool(self.mean)

    def describe(self) -> str:
        """One line for a report: what the model takes and does to it."""
        if not self.standardises:
            return f"input: {self.input}; no standardisation inside the model"
        return (f"input: {self.input}; standardised inside the model with the training split's mean "
                f"{_short(self.mean)} and std {_short(self.std)} over axis 1")

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1, **asdict(self), "axis": 1, "formula": "(x - mean) / std" if self.standardises else ""}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Preprocessing:
        try:
            return cls([str(c) for c in data["classes"]], [int(d) for d in data["input_shape"]],
                       [float(v) for v in data.get("mean") or []], [float(v) for v in data.get("std") or []],
                       str(data.get("input") or INPUT_RAW))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a Torch Studio preprocessing record ({type(exc).__name__}: {exc})") from None

    def save_beside(self, path: Path) -> Path:
        """Write the JSON sidecar of an exported file; returns its path."""
        side = sidecar(path)
        side.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")
        return side

    def module(self, inner: nn.Module) -> nn.Module:
        """``inner`` with this preprocessing in front (``inner`` itself when there is none)."""
        return WithPreprocessing(inner, self.mean, self.std) if self.standardises else inner


def sidecar(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR)


def read_sidecar(path: Path) -> Preprocessing | None:
    """The preprocessing written beside an exported file, or None when there is no sidecar."""
    side = sidecar(path)
    if not side.is_file():
        return None
    try:
        return Preprocessing.from_dict(json.loads(side.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{side}: {exc}") from None


class WithPreprocessing(nn.Module):
    """``inner((x - mean) / std)`` with the statistics broadcast over axis 1, exactly as training
    standardised (:func:`trainer.data.normalise`); the input is cast to float32 first."""

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, inner: nn.Module, mean: list[float], std: list[float]) -> None:
        super().__init__()
        self.inner = inner   # named INNER: ONNX name scopes read "inner.<node id>"
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = (1, -1) + (1,) * (x.dim() - 2)
        return self.inner((x.float() - self.mean.view(shape)) / self.std.view(shape))


def _short(values: list[float]) -> str:
    shown = ", ".join(f"{v:.4g}" for v in values[:4])
    return f"[{shown}{', ...' if len(values) > 4 else ''}] ({len(values)} values)"
