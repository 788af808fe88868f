"""Oracle tests: a built graph against a hand-written nn.Module holding the same weights."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from graph_editor.building import build_module
from graph_editor.model import Graph, InputSpec
from tests.graph_editor.graph_testing import lenet_graph


class HandLeNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(400, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def test_lenet_matches_hand_written():
    torch.manual_seed(0)
    gm = build_module(lenet_graph())
    hand = HandLeNet()
    hand.load_state_dict(gm.state_dict())  # node ids are the module names: the keys line up
    x = torch.randn(4, 1, 32, 32)
    assert torch.equal(gm(x), hand(x))


def residual_graph() -> Graph:
    g = Graph(InputSpec((8, 12, 12)), 16)
    g.chain(("Input", "input"))
    main = g.chain(
        ("Conv2d", "conv1", {"out_channels": 16, "kernel_size": 3, "stride": 2, "padding": 1, "bias": False}),
        ("BatchNorm2d", "bn1"), ("ReLU", "relu1"),
        ("Conv2d", "conv2", {"out_channels": 16, "kernel_size": 3, "padding": 1, "bias": False}),
        ("BatchNorm2d", "bn2"), start="input")
    short = g.chain(("Conv2d", "down_conv", {"out_channels": 16, "kernel_size": 1, "stride": 2, "bias": False}),
                    ("BatchNorm2d", "down_bn"), start="input")
    g.add_node("Add", "add")
    g.connect(main, "add")
    g.connect(short, "add")
    g.chain(("ReLU", "relu2"), ("AdaptiveAvgPool2d", "pool"), ("Flatten", "flatten"), ("Output", "output"),
            start="add")
    return g


class HandBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(8, 16, 3, 2, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.down_conv = nn.Conv2d(8, 16, 1, 2, bias=False)
        self.down_bn = nn.BatchNorm2d(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        out = F.relu(out + self.down_bn(self.down_conv(x)))
        return F.adaptive_avg_pool2d(out, 1).flatten(1)


@pytest.mark.parametrize("training", [True, False])
def test_residual_block_matches_hand_written(training):
    torch.manual_seed(1)
    gm = build_module(residual_graph())
    hand = HandBlock()
    hand.load_state_dict(gm.state_dict())
    gm.train(training)
    hand.train(training)
    x = torch.randn(3, 8, 12, 12)
    assert torch.equal(gm(x), hand(x))
    # Training mode updates the same running statistics.
    torch.testing.assert_close(gm.state_dict(), hand.state_dict())


def vit_graph() -> Graph:
    g = Graph(InputSpec((3, 16, 16)), 5)
    g.chain(("Input", "input"),
            ("PatchEmbed", "patch_embed", {"embed_dim": 24, "patch_size": 4}),
            ("ClassTokenPosEmbed", "pos_embed"),
            ("TransformerEncoderLayer", "block", {"nhead": 3, "dim_feedforward": 48, "dropout": 0.0,
                                                  "activation": "gelu", "layer_norm_eps": 1e-6}),
            ("LayerNorm", "norm", {"eps": 1e-6}), ("SelectToken", "cls"),
            ("Linear", "head", {"out_features": 5}), ("Output", "output"))
    return g


def hand_vit(sd: dict[str, torch.Tensor], x: torch.Tensor, heads: int = 3) -> torch.Tensor:
    """ViT written out by hand with explicit attention arithmetic: an independent oracle."""
    tokens = F.conv2d(x, sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=4)
    tokens = tokens.flatten(2).transpose(1, 2)
    cls = sd["pos_embed.cls_token"].expand(x.shape[0], -1, -1)
    h = torch.cat([cls, tokens], 1) + sd["pos_embed.pos_embed"]
    b, n, e = h.shape
    d = e // heads

    def ln(t: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(t, (e,), sd[f"{name}.weight"], sd[f"{name}.bias"], eps=1e-6)

    q, k, v = F.linear(ln(h, "block.norm1"), sd["block.self_attn.in_proj_weight"],
                       sd["block.self_attn.in_proj_bias"]).split(e, dim=-1)
    q, k, v = (t.reshape(b, n, heads, d).transpose(1, 2) for t in (q, k, v))
    weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), dim=-1)
    attn = (weights @ v).transpose(1, 2).reshape(b, n, e)
    h = h + F.linear(attn, sd["block.self_attn.out_proj.weight"], sd["block.self_attn.out_proj.bias"])
    mlp = F.linear(F.gelu(F.linear(ln(h, "block.norm2"), sd["block.linear1.weight"], sd["block.linear1.bias"])),
                   sd["block.linear2.weight"], sd["block.linear2.bias"])
    h = ln(h + mlp, "norm")
    return F.linear(h[:, 0], sd["head.weight"], sd["head.bias"])


def test_vit_block_matches_hand_written_attention():
    torch.manual_seed(2)
    gm = build_module(vit_graph()).eval()
    with torch.no_grad():
        gm.pos_embed.cls_token.normal_()  # zero at init; make it count
        x = torch.randn(2, 3, 16, 16)
        torch.testing.assert_close(gm(x), hand_vit(gm.state_dict(), x), rtol=1e-5, atol=1e-5)
