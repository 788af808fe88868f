"""A tensor multiplied or divided by a fixed number imports as ScaleBy (timm DeiT distilled's
``(x + x_dist) / 2``, attention's ``q * scale``); ``x.transpose(a, b)`` that keeps the batch as Permute."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from graph_editor.building import build_module
from graph_editor.importer import ModuleImportError, import_module


class Constants(nn.Module):
    """Every written form of a fixed factor, and a transpose of two token dims."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.head = nn.Linear(4 * 3, 2)
        self.scale = 4 ** -0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x.transpose(1, 2))           # (B, 4, 3) -> (B, 3, 4)
        y = (y + y.relu()) / 2                    # DeiT distilled's two heads averaged
        y = y * self.scale                        # attention's q * scale
        y = 3 * y
        y = y.div(7) + torch.div(y, 0.5)
        return self.head(y.flatten(1))


def test_fixed_factors_import_as_scale_by_and_build_back_exactly():
    module = Constants().eval()
    result = import_module(module, (4, 3), strict=True)
    nodes = {n.id: n for n in result.graph}
    scaled = sorted((n.params["factor"], n.params["divide"]) for n in nodes.values() if n.type == "ScaleBy")
    assert scaled == [(0.5, False), (0.5, True), (2.0, True), (3.0, False), (7.0, True)]
    assert [n.params for n in nodes.values() if n.type == "Permute"] == [{"dims": [1, 0]}]
    assert not [n for n in nodes.values() if n.type in ("Module", "Parameter")]
    built = build_module(result.graph).eval()
    built.load_state_dict(result.state_dict)
    x = torch.randn(5, 4, 3)
    with torch.no_grad():
        assert torch.equal(built(x), module(x))       # the same ops in the same order: bit for bit


class Reciprocal(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 1 / x


class Floored(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.div(x, 2, rounding_mode="floor")


@pytest.mark.parametrize("cls, words", [(Reciprocal, "divides a number by a tensor; only a tensor by a tensor"),
                                        (Floored, "division with rounding_mode='floor'")])
def test_a_division_without_a_layer_says_why(cls, words):
    with pytest.raises(ModuleImportError, match="no Torch Studio layer") as info:
        import_module(cls(), (6,), strict=True)
    assert words in str(info.value)
