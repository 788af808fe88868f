"""The catalog layers issue 23 asked for, imported from the code people write: each small module below
imports strictly (catalog layers only, no Program node) and builds back to the same outputs; each shape
rule refuses what PyTorch refuses, naming what is wrong. (Shapes, FLOPs against FlopCounterMode, the
source writer and the import back of every type run on their examples in test_ops_registry.py; ONNX
parity on the catalog graph in tests/exporters.)"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from graph_editor.building import build_module
from graph_editor.importer import import_module
from graph_editor.model import Graph, InputSpec, validate


def strict_round_trip(module: nn.Module, shape: tuple[int, ...]) -> dict[str, str]:
    """Import ``module`` strictly, build it back with its weights, compare outputs; node id -> type."""
    module.eval()
    result = import_module(module, shape, strict=True)
    built = build_module(result.graph).eval()
    built.load_state_dict(result.state_dict)
    x = torch.randn(3, *shape, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        want, got = module(x), built(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    return {n.id: n.type for n in result.graph}


class Attention(nn.Module):
    """Attention written out by hand: ``q @ k.transpose(-2, -1) * scale``, ``attn @ v`` (shvit, levit, cait)."""

    def __init__(self, dim: int = 8, heads: int = 2, picks: bool = False) -> None:
        super().__init__()
        self.heads, self.scale, self.picks = heads, (dim // heads) ** -0.5, picks
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = (qkv[0], qkv[1], qkv[2]) if self.picks else qkv.unbind(0)  # CaiT's picks, timm's unbind
        attn = (q @ k.transpose(-2, -1)) * self.scale
        x = torch.matmul(attn.softmax(dim=-1), v)
        return self.proj(x.transpose(1, 2).reshape(b, n, c)).mean(1)


@pytest.mark.parametrize("picks", [False, True])
def test_hand_written_attention_imports_as_matmul_nodes(picks):
    types = strict_round_trip(Attention(picks=picks), (5, 8))
    assert list(types.values()).count("MatMul") == 2 and list(types.values()).count("Unbind") == 1


class CosineAttention(nn.Module):
    """SwiftFormer's additive attention: ``F.normalize``, ``q @ self.w_g`` with a 2-D parameter, and PiT's
    ``x[:, :cls.shape[1]]``, a slice whose end is read from another tensor's size."""

    def __init__(self, dim: int = 6) -> None:
        super().__init__()
        self.w_g = nn.Parameter(torch.randn(dim, 1))
        self.cls = nn.Parameter(torch.randn(1, 2, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = F.normalize(x, dim=-1)
        weight = (q @ self.w_g).softmax(dim=1)                      # [B, N, 1]
        g = torch.cat([self.cls.expand(x.shape[0], -1, -1), q * weight], dim=1)
        return g[:, :self.cls.shape[1]].flatten(1)


class Arithmetic(nn.Module):
    """PoolFormer's ``pool(x) - x``, MobileOne's ``sum(branches)`` (``0 + a``), ``x + 1``, ``1 - x``, ``x - 0.5``."""

    def __init__(self) -> None:
        super().__init__()
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.conv = nn.Conv2d(3, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pool(x) - x
        y = sum([y, self.conv(y)])
        return ((1 - y) * (y + 1) - 0.5 + torch.sub(y, x)).flatten(1)


def test_subtraction_constants_and_count_include_pad_import():
    types = strict_round_trip(Arithmetic(), (3, 6, 6))
    assert types["pool"] == "AvgPool2d"
    assert list(types.values()).count("Subtract") == 2
    assert list(types.values()).count("AddConstant") == 4  # 0 + y, 1 - y, y + 1, - 0.5


def test_average_pooling_that_leaves_out_the_padding_builds_exactly():
    result = import_module(nn.Sequential(nn.AvgPool2d(3, 2, 1, count_include_pad=False), nn.Flatten()), (2, 7, 7), strict=True)
    assert result.graph.nodes["_0"].params["count_include_pad"] is False


def _graph(shape: tuple[int, ...], *layers: tuple[str, str, dict]) -> Graph:
    g = Graph(InputSpec(shape), 2)
    g.add_node("Input", "input")
    for type_, node_id, params in layers:
        g.add_node(type_, node_id, params)
    return g


def test_matmul_shape_rule_names_the_mismatch():
    g = _graph((4, 6), ("MatMul", "mm", {}))
    g.connect("input", "mm")
    g.add_node("Permute", "t", {"dims": [1, 0]})
    g.connect("input", "t")
    g.connect("t", "mm", dst_port="other")
    assert validate(g, 2).shapes["mm"] == (2, 4, 4)
    bad = _graph((4, 6), ("MatMul", "mm", {}), ("Identity", "copy", {}))
    bad.connect("input", "mm")
    bad.connect("input", "copy")
    bad.connect("copy", "mm", dst_port="other")
    problems = [str(p) for p in validate(bad, 2).problems]
    assert any("left operand has 6 columns, the right 4 rows" in p for p in problems), problems


def test_subtract_shape_rule_refuses_shapes_that_do_not_broadcast():
    g = _graph((4, 6), ("Subtract", "sub", {}), ("Permute", "t", {"dims": [1, 0]}))
    g.connect("input", "sub")
    g.connect("input", "t")
    g.connect("t", "sub", dst_port="other")
    problems = [str(p) for p in validate(g, 2).problems]
    assert any("cannot subtract shapes" in p for p in problems), problems


class LinearAttentionNorm(nn.Module):
    """EfficientViT's LiteMLA normaliser: the output divided by its last row (plus eps), a tensor by a tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.proj(x)
        return (out[:, :-1] / (out[:, -1:] + 1e-3) / ((x * x).sum(1, keepdim=True) + 1.0)).flatten(1)


def test_a_tensor_divided_by_a_tensor_imports_as_divide():
    types = strict_round_trip(LinearAttentionNorm(), (4, 6))
    assert list(types.values()).count("Divide") == 2


def test_divide_shape_rule_refuses_shapes_that_do_not_broadcast():
    g = _graph((4, 6), ("Divide", "div", {}), ("Permute", "t", {"dims": [1, 0]}))
    g.connect("input", "div")
    g.connect("input", "t")
    g.connect("t", "div", dst_port="other")
    problems = [str(p) for p in validate(g, 2).problems]
    assert any("cannot divide shapes" in p for p in problems), problems


def test_an_affine_matmul_of_the_batch_is_refused_with_its_reason():
    class BatchMatrix(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(6, 2))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.w

    from graph_editor.importer import ModuleImportError

    with pytest.raises(ModuleImportError, match="MatMul multiplies matrices per sample"):
        import_module(BatchMatrix(), (6,), strict=True)


class Resizing(nn.Module):
    """GhostNetV2's gate resized to another tensor's size, nn.Upsample by a factor, F.pad in every mode."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Conv2d(3, 3, 2, stride=2)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.pad = nn.ReflectionPad2d((1, 0, 2, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        small = self.down(x)
        gate = F.interpolate(small.sigmoid(), size=(x.shape[-2], x.shape[-1]), mode="nearest")
        y = x * gate + self.up(small)
        y = F.pad(y, (1, 1, 1, 1), mode="replicate") + F.pad(y, [1, 1, 1, 1], value=0.5)
        return self.pad(y).flatten(1)


def test_interpolate_upsample_and_pad_import():
    types = strict_round_trip(Resizing(), (3, 6, 6))
    assert types["up"] == "Interpolate" and types["pad"] == "Pad"
    assert list(types.values()).count("Interpolate") == 2 and list(types.values()).count("Pad") == 3


@pytest.mark.parametrize("type_, params, words", [
    ("Pad", {"pad": [4, 0], "mode": "reflect"}, "reflect padding 4 must be smaller than the size 4 of dim 3"),
    ("Pad", {"pad": [1, 1, 1]}, "pad needs pairs (left, right) per dim, got 3 values"),
    ("Pad", {"pad": [1, 1, 1, 1, 1, 1], "mode": "replicate"}, "replicate padding pads at most the last 3 dims "
                                                                "and never the channels"),
    ("Interpolate", {"scale_factor": 0.1}, "scale_factor 0.1 makes 3x4x4 empty"),
])
def test_resize_shape_rules_name_what_is_wrong(type_, params, words):
    g = _graph((3, 4, 4), (type_, "layer", params))
    g.connect("input", "layer")
    problems = [str(p) for p in validate(g, 2).problems]
    assert any(words in p for p in problems), problems


class WindowAttentionBias(nn.Module):
    """A relative position bias written out, Swin-style (a signed-offset table [rows, heads] gathered by an index
    buffer) or LeViT-style (an absolute-offset table [heads, rows] gathered as ``table[:, idxs]``)."""

    def __init__(self, style: str, heads: int = 2, h: int = 3, w: int = 3) -> None:
        super().__init__()
        self.style, self.n = style, h * w
        pos = torch.stack(torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")).flatten(1)
        rel = pos[:, :, None] - pos[:, None, :]
        if style == "swin":
            index = (rel[0] + h - 1) * (2 * w - 1) + rel[1] + w - 1
            self.table = nn.Parameter(torch.randn((2 * h - 1) * (2 * w - 1), heads))
        elif style == "levit":
            index = rel[0].abs() * w + rel[1].abs()
            self.table = nn.Parameter(torch.randn(heads, h * w))
        else:  # a gather that is no offset table: kept as it is
            index = torch.randint(0, h * w, (self.n, self.n), generator=torch.Generator().manual_seed(0))
            self.table = nn.Parameter(torch.randn(heads, h * w))
        self.register_buffer("index", index, persistent=False)
        self.qk = nn.Linear(4, 2 * heads * 4)

    def bias(self) -> torch.Tensor:
        if self.style == "swin":
            return self.table[self.index.view(-1)].view(self.n, self.n, -1).permute(2, 0, 1).contiguous().unsqueeze(0)
        return self.table[:, self.index]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k = self.qk(x).reshape(x.shape[0], self.n, 2, -1, 4).permute(2, 0, 3, 1, 4).unbind(0)
        attn = q @ k.transpose(-2, -1) + self.bias()
        return attn.softmax(-1).flatten(1)


@pytest.mark.parametrize("style, kind, window", [("swin", "relative", [3, 3]), ("levit", "absolute", [3, 3]),
                                                 ("swin", "relative", [2, 5]), ("levit", "absolute", [4, 2])])
def test_a_relative_position_bias_gather_imports_as_one_node(style, kind, window):
    torch.manual_seed(0)
    module = WindowAttentionBias(style, h=window[0], w=window[1])
    n = window[0] * window[1]
    types = strict_round_trip(module, (n, 4))
    biases = [i for i, t in types.items() if t == "RelativePositionBias"]
    assert len(biases) == 1 and "Parameter" not in types.values()
    result = import_module(module, (n, 4), strict=True)
    node = result.graph.nodes[biases[0]]
    assert node.params == {"num_heads": 2, "window": window, "kind": kind}
    assert sum(v.numel() for k, v in result.state_dict.items() if k.startswith(biases[0])) == module.table.numel()


def test_a_gather_that_is_no_offset_table_is_not_taken_for_one():
    """Not a RelativePositionBias; since session 5 a Computed node: the same values, gathered by its recipe."""
    types = list(strict_round_trip(WindowAttentionBias("other"), (9, 4)).values())
    assert "RelativePositionBias" not in types and types.count("Computed") == 1


def test_relative_position_bias_shape_is_one_bias_per_head_and_pair():
    g = _graph((2, 4, 4), ("RelativePositionBias", "bias", {"num_heads": 2, "window": [2, 3], "kind": "relative"}))
    assert validate(g, 2).shapes["bias"] == (1, 2, 6, 6)


class StackAndSame(nn.Module):
    """``torch.stack`` of branches (and of one tensor), a ``padding='same'`` convolution, a 3-D convolution."""

    def __init__(self) -> None:
        super().__init__()
        self.same = nn.Conv2d(2, 2, 3, padding="same", dilation=2)
        self.valid = nn.Conv2d(2, 2, 1, padding="valid")
        self.volume = nn.Conv3d(3, 2, (3, 1, 1), padding=(1, 0, 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.stack([self.same(x), self.valid(x)], dim=2)      # [B, 2, 2, H, W]
        y = torch.stack([y, y.relu(), y.sigmoid()], dim=-5)       # [B, 3, 2, 2, H, W]
        y = self.volume(y.flatten(2, 3))                          # [B, 3, 4, H, W] -> [B, 2, 4, H, W]
        return torch.stack([y.flatten(1)], dim=1).flatten(1)


def test_stack_same_padding_and_conv3d_import():
    types = strict_round_trip(StackAndSame(), (2, 5, 5))
    assert types["same"] == "Conv2d" and types["volume"] == "Conv3d"
    assert list(types.values()).count("Stack") == 2


class StackedHeads(nn.Module):
    """EfficientViM's ``torch.stack(logits).sum(0)`` over its heads, CrossViT's ``torch.stack(xs).mean(0)``."""

    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleList(nn.Linear(6, 3) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = [head(x) for head in self.heads]
        return torch.stack(logits).sum(0) + torch.mean(torch.stack(logits[:2]), dim=0)


def test_a_stack_summed_or_averaged_over_its_parts_imports_as_their_sum():
    types = list(strict_round_trip(StackedHeads(), (6,)).values())
    assert "Stack" not in types and types.count("Add") == 4 and types.count("ScaleBy") == 1


class GlobalQuery(nn.Module):
    """GCViT's global query: one per image, repeated to each of its windows (folded into the batch)."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.head = nn.Linear(4, 4), nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, 6, 4]
        windows = x.reshape(-1, 2, 4)  # [B * 3, 2, 4]
        q = self.q(x.mean(1, keepdim=True))  # [B, 1, 4]
        q = q.repeat_interleave(windows.shape[0] // q.shape[0], dim=0)  # [B * 3, 1, 4]
        return self.head((windows * q).softmax(-1).reshape(x.shape[0], -1, 4).mean(1))


@pytest.mark.slow  # a torch.export capture: seconds of CPU
def test_a_sample_repeated_to_its_windows_imports_as_expand_and_fold():
    types = list(strict_round_trip(GlobalQuery(), (6, 4)).values())
    assert "Expand" in types and "Unsqueeze" in types


@pytest.mark.parametrize("type_, params, words", [
    ("Stack", {"dim": 0}, "cannot stack along the batch dimension"),
    ("Conv3d", {"kernel_size": 3}, "expects CxDxHxW input, receives 3x4x4"),
])
def test_stack_and_conv3d_shape_rules_name_what_is_wrong(type_, params, words):
    g = _graph((3, 4, 4), (type_, "layer", params), ("Identity", "copy", {}))
    g.connect("input", "layer")
    if type_ == "Stack":
        g.connect("input", "copy")
        g.connect("copy", "layer")
    problems = [str(p) for p in validate(g, 2).problems]
    assert any(words in p for p in problems), problems


class Recurrent(nn.Module):
    """``x, _ = self.lstm(x)`` and ``self.gru(x)[0]`` on batch-first sequences."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 6, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(12, 5, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, _ = self.lstm(x)
        return self.gru(x)[0][:, -1]


@pytest.mark.slow
def test_lstm_and_gru_import_as_their_output_sequence():
    types = strict_round_trip(Recurrent(), (7, 4))
    assert types["lstm"] == "LSTM" and types["gru"] == "GRU"


@pytest.mark.slow
def test_a_recurrent_layer_whose_final_state_is_read_says_so():
    from graph_editor.importer import ModuleImportError

    class FinalState(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(4, 6, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.gru(x)[1][0]

    with pytest.raises(ModuleImportError, match="a recurrent layer's final state"):
        import_module(FinalState(), (7, 4), strict=True)


class Windows(nn.Module):
    """Sliding windows as columns (nn.Unfold, F.unfold), then a matrix product over them."""

    def __init__(self) -> None:
        super().__init__()
        self.unfold = nn.Unfold(kernel_size=2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cols = self.unfold(x)                                        # [B, 3*4, 9]
        other = F.unfold(x, (3, 3), padding=1, stride=2)             # [B, 3*9, 9]
        return (cols @ other.transpose(1, 2)).flatten(1)


def test_unfold_imports():
    types = strict_round_trip(Windows(), (3, 6, 6))
    assert list(types.values()).count("Unfold") == 2


def test_normalize_a_parameter_matrix_and_a_slice_by_a_size_import():
    types = strict_round_trip(CosineAttention(), (5, 6))
    assert "Normalize" in types.values() and "MatMul" in types.values() and "Slice" in types.values()


def test_normalize_refuses_the_batch_dim():
    g = _graph((3, 4), ("Normalize", "norm", {"dim": 0}))
    g.connect("input", "norm")
    problems = [str(p) for p in validate(g, 2).problems]
    assert any("cannot normalise along dim 0" in p for p in problems), problems


def test_a_size_read_from_the_batch_is_not_specialised():
    from graph_editor.importer import ModuleImportError

    class BatchBound(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[:, : x.shape[0]]  # depends on the batch: no fixed slice

    with pytest.raises(ModuleImportError, match="end is computed from the batch size"):
        import_module(BatchBound(), (6,), strict=True)


class SpaceToDepth(nn.Module):
    """LeViT's subsample ``x[:, ::2, ::2]`` and a space-to-depth written with ``...``: several dims sliced at once."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = [x[..., 0::2, 0::2], x[..., 1::2, 0::2], x[:, :, 0::2, 1::2], x[:, 1:, 1::2, 1::2]]
        return torch.cat(parts, dim=1).flatten(1)


def test_slicing_several_dims_at_once_imports_as_one_slice_each():
    types = strict_round_trip(SpaceToDepth(), (3, 6, 6))
    assert list(types.values()).count("Slice") == 9


class Outlook(nn.Module):
    """VOLO's outlook attention's end: windows summed back into an image (F.fold to a size read from the input,
    nn.Fold), and its head's ``aux.max(1)[0]``."""

    def __init__(self) -> None:
        super().__init__()
        self.fold = nn.Fold((6, 6), kernel_size=3, padding=1, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, 3, 6, 6]
        _, _, H, W = x.shape
        cols = F.unfold(x, 3, padding=1, stride=2)                                       # [B, 27, 9]
        y = F.fold(cols * 2, output_size=(H, W), kernel_size=3, padding=1, stride=2) + self.fold(cols)
        return y.flatten(2).max(1)[0]


def test_fold_and_the_values_of_a_max_import():
    types = strict_round_trip(Outlook(), (3, 6, 6))
    assert list(types.values()).count("Fold") == 2 and "Amax" in types.values()
    g = _graph((18, 8), ("Fold", "fold", {"output_size": [6, 6], "kernel_size": [3, 3], "stride": [2, 2]}))
    g.connect("input", "fold")
    problems = [str(p) for p in validate(g, 2).problems]
    assert any("8 columns, but a 6x6 image has 4 window positions" in p for p in problems), problems
