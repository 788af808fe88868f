"""A learnable tensor as a node: its module holds one ``nn.Parameter`` of shape ``[1, *shape]`` and
returns it. An imported module's parameter read directly in ``forward`` (a class token, a position
embedding, a layer scale) becomes such a node, carrying its value."""

from __future__ import annotations

import torch
from torch import fx, nn

from ..analysis import zero_flops
from ..import_rules import Mapped, Unmappable, module_rule
from ..modules import Call, Example, Params, Shape, builder


class LearnedTensor(nn.Module):
    """A learnable tensor of shape ``[1, *shape]`` (batch dimension 1: it broadcasts over a batch)."""

    def __init__(self, shape: list[int], init: str = "trunc_normal", std: float = 0.02) -> None:
        super().__init__()
        self.init, self.std = init, std
        self.value = nn.Parameter(torch.empty(1, *shape))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.value.is_meta:
            return
        with torch.no_grad():
            if self.init == "zeros":
                nn.init.zeros_(self.value)
            elif self.init == "ones":
                nn.init.ones_(self.value)
            elif self.init == "normal":
                nn.init.normal_(self.value, std=self.std)
            else:
                nn.init.trunc_normal_(self.value, std=self.std, a=-2 * self.std, b=2 * self.std)

    def forward(self) -> torch.Tensor:
        return self.value

    def extra_repr(self) -> str:
        return f"shape={list(self.value.shape[1:])}, init={self.init!r}"


@builder("Parameter", example=Example((5, 8), {"shape": [5, 8], "init": "normal", "std": 0.5}))
def _parameter(p: Params, xs: list[Shape]) -> Call:
    return Call(LearnedTensor, (list(p["shape"]),), {"init": p["init"], "std": p["std"]})


zero_flops("Parameter")


@module_rule(LearnedTensor)
def _import_learned(m: LearnedTensor, xs: list[fx.Node]) -> Mapped:
    return Mapped("Parameter", {"shape": list(m.value.shape[1:]), "init": m.init, "std": m.std}, xs)


def import_parameter(value: torch.Tensor) -> tuple[Mapped, torch.Tensor]:
    """A tensor parameter read in ``forward`` as a Parameter node and its value keyed for the node's
    module. A leading dimension of 1 is the node's batch dimension; any other shape gets one in front,
    which broadcasting does not notice (``x * gamma`` with gamma ``[D]`` reads ``[1, D]``)."""
    if not isinstance(value, nn.Parameter):
        raise Unmappable("reads a buffer (a tensor that is not learned) directly; only parameters map to nodes")
    if value.dim() == 0:
        raise Unmappable("reads a scalar parameter; a Parameter node holds a tensor of at least one dimension")
    data = value.detach()
    if value.dim() < 2 or value.shape[0] != 1:
        data = data.unsqueeze(0)
    return Mapped("Parameter", {"shape": [int(d) for d in data.shape[1:]], "init": "zeros"}, []), data
