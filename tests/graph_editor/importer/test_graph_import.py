"""Import of nn.Modules through torch.fx: round trips with the module's own weights, and one error
listing every op that does not map."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from graph_editor.building import build_module
from graph_editor.importer.module_import import ModuleImportError, guess_input_shape, import_module
from graph_editor.model import Graph, InputSpec, validate
from tests.graph_editor.graph_testing import lenet_graph


class LeNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(400, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.avg_pool2d(torch.tanh(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), (2, 2))
        x = x.view(x.size(0), -1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Block(nn.Module):
    def __init__(self, cin: int, c: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)  # called twice, as in torchvision
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.downsample = (nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False), nn.BatchNorm2d(c))
                           if stride != 1 or cin != c else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class ResNetish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.layer1 = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2))
        self.fc = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer1(self.stem(x))
        x = torch.cat([F.adaptive_avg_pool2d(x, 1), F.adaptive_avg_pool2d(x, (1, 1))], dim=1)
        return self.fc(torch.flatten(x, 1))


class ViTish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, 32, 4, stride=4)
        self.encoder = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=True,
                                                  activation="gelu")
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.proj(x).flatten(2).transpose(1, 2)
        x = self.encoder(x)
        x = x + self.attn(x, x, x, need_weights=False)[0]
        x = F.gelu(self.norm(x).permute(0, 2, 1).contiguous()).permute(0, 2, 1)
        return self.head(F.leaky_relu(x[:, 0], 0.2))


def round_trip(module: nn.Module, shape: tuple[int, ...], training: bool = False) -> Graph:
    module.train(training)
    result = import_module(module, shape)
    built = build_module(result.graph)
    built.load_state_dict(result.state_dict)  # strict: every key maps to a node's module
    built.train(training)
    x = torch.randn(3, *shape)
    torch.testing.assert_close(built(x), module(x))
    return result.graph


def test_lenet_round_trip():
    torch.manual_seed(0)
    graph = round_trip(LeNet(), (1, 32, 32))
    assert [n.type for n in graph] == ["Input", "Conv2d", "Tanh", "AvgPool2d", "Conv2d", "ReLU", "MaxPool2d",
                                       "Flatten", "Linear", "ReLU", "Linear", "ReLU", "Linear", "Output"]
    assert graph.num_classes == 10 and graph.input_spec == InputSpec((1, 32, 32), "float32")


@pytest.mark.parametrize("training", [False, True])
def test_resnetish_round_trip(training):
    torch.manual_seed(1)
    graph = round_trip(ResNetish(), (3, 16, 16), training)
    ids = set(graph.nodes)
    # Module paths become node ids; a module called twice gets two nodes.
    assert {"stem_0", "layer1_0_conv1", "layer1_1_downsample_0", "layer1_0_relu", "layer1_0_relu_1"} <= ids
    assert {"layer1_0_add", "layer1_1_add", "cat", "flatten"} <= ids  # ops named after the module they are in
    assert len(graph.nodes_of_type("Add")) == 2 and len(graph.nodes_of_type("Concat")) == 1


def test_transformer_round_trip():
    torch.manual_seed(2)
    graph = round_trip(ViTish(), (3, 16, 16))
    assert {"TransformerEncoderLayer", "MultiheadAttention", "Permute", "SelectToken", "LeakyReLU"} <= {
        n.type for n in graph}


def test_a_built_graph_imports_back_as_itself():
    torch.manual_seed(3)
    g = Graph(InputSpec((3, 32, 32)), 10)
    g.chain(("Input", "input"), ("PatchEmbed", "patch_embed", {"embed_dim": 16, "patch_size": 8}),
            ("ClassTokenPosEmbed", "pos"), ("TransformerEncoderLayer", "block", {"nhead": 2, "dropout": 0.0}),
            ("MultiheadAttention", "mha", {"num_heads": 2}), ("LayerNorm", "norm"), ("SelectToken", "cls"),
            ("Linear", "head", {"out_features": 10}), ("Output", "output"))
    graph = round_trip(build_module(g), (3, 32, 32))
    assert [(n.id, n.type) for n in graph] == [(n.id, n.type) for n in g]
    graph = round_trip(build_module(lenet_graph()), (1, 32, 32))
    assert list(graph.nodes) == list(lenet_graph().nodes)


def test_embedding_input_becomes_integer_codes():
    class Tab(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(20, 4)
            self.fc = nn.Linear(12, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.embed(x).flatten(1))

    module = Tab()
    result = import_module(module, (3,))
    assert result.graph.input_spec.dtype == "int64"
    built = build_module(result.graph)
    built.load_state_dict(result.state_dict)
    codes = torch.randint(0, 20, (5, 3))
    torch.testing.assert_close(built(codes), module(codes))


def test_imported_modules_are_grouped_by_their_hierarchy_and_laid_out_block_by_block():
    graph = import_module(ResNetish(), (3, 16, 16)).graph
    assert validate(graph).ok
    groups = {g.name: g for g in graph.groups.values()}
    assert list(groups) == ["stem", "layer1", "layer1.0", "layer1.1", "layer1.1.downsample"]
    assert (groups["stem"].kind, groups["layer1"].kind, groups["layer1.0"].kind) == ("Sequential", "Sequential",
                                                                                    "Block")
    assert set(groups["layer1.0"].nodes) < set(groups["layer1"].nodes)
    assert "layer1_0_add" in groups["layer1.0"].nodes  # the residual add of the block's forward
    assert all(g.collapsed for g in groups.values())
    # Top level: input, stem, layer1, then the head's loose ops, left to right in one row.
    top = {"stem": groups["stem"].nodes, "layer1": groups["layer1"].nodes}
    corner = {k: min(graph.nodes[n].position for n in v) for k, v in top.items()}
    assert graph.nodes["input"].position[0] < corner["stem"][0] < corner["layer1"][0] < graph.nodes["fc"].position[0]
    # Inside a block its main path stays on one row; its downsample shortcut runs on another.
    row = {n.id: n.position[1] for n in graph}
    assert row["layer1_1_conv1"] == row["layer1_1_conv2"] == row["layer1_1_bn2"]
    assert row["layer1_1_downsample_0"] != row["layer1_1_conv1"]
    assert len({n.position for n in graph if n.id not in groups["layer1"].nodes}) == len(graph) - len(
        groups["layer1"].nodes)


class Unsupported(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.rnn = nn.GRU(8, 8)
        self.scale = nn.Parameter(torch.ones(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.sin(self.fc(x)) * self.scale
        y = self.rnn(y)[0]
        y = self.fc(y)
        return y.clamp(0, 1)


def test_every_unsupported_op_is_listed_with_its_place():
    with pytest.raises(ModuleImportError) as info:
        import_module(Unsupported(), (8,), strict=True)
    found = {u.node: u for u in info.value.unsupported}
    assert set(found) >= {"sin", "rnn", "fc_1", "clamp"}
    assert "scale" not in found  # a parameter read in forward is a Parameter node (test_catalog_param)
    assert found["sin"].op == "torch.sin"
    assert found["rnn"].op == "nn.GRU" and "in rnn" in found["rnn"].where
    assert "called twice" in found["fc_1"].reason
    assert "test_graph_import.py:" in found["clamp"].where and "y.clamp(0, 1)" in found["clamp"].where
    message = str(info.value)
    for name in ("sin", "rnn", "fc_1", "clamp"):
        assert f"  {name} (" in message


@pytest.mark.parametrize(("module", "words", "strict"), [
    (type("Branchy", (nn.Module,), {"forward": lambda self, x: x if x.sum() > 0 else -x})(),
     r"cannot trace.*and as one program: torch.export cannot capture Branchy", False),
    (type("TwoIn", (nn.Module,), {"forward": lambda self, x, y: x + y})(), "takes 2 inputs", False),
    (nn.Sequential(nn.Linear(4, 4)), "fails on an input", False),  # the given shape does not fit
    (nn.Sequential(nn.Conv2d(3, 4, 2, padding="same")), "padding='same' with kernel \\[2, 2\\] pads one side more", True),
])
def test_modules_that_cannot_be_graphs_get_one_clear_error(module, words, strict):
    with pytest.raises(ModuleImportError, match=words):
        import_module(module, (3, 8, 8), strict=strict)


def test_a_tuple_output_gives_the_graph_its_first_tensor():
    """(logits, aux_logits): the graph's output is the logits."""
    net = type("TwoOut", (nn.Module,), {"forward": lambda self, x: (x.flatten(1), x)})()
    result = import_module(net, (3, 2, 2), strict=True)
    assert [e.src for e in result.graph.edges if e.dst == "output"] == ["flatten"]


def test_guess_input_shape():
    assert guess_input_shape(nn.Sequential(nn.Linear(64, 10))) == (64,)
    assert guess_input_shape(LeNet()) is None


class SizeArithmetic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        y = y.reshape(y.shape[0], y.shape[1] * 2, -1)
        return self.fc(y.view(x.size(0), -1)) * 2


def test_size_arithmetic_feeds_reshapes_and_a_constant_factor_is_a_scale_by():
    module = SizeArithmetic()
    result = import_module(module, (3, 8, 8))
    types = sorted(n.type for n in result.graph.nodes.values())
    assert types.count("ScaleBy") == 1  # the `* 2` of the logits; `shape[1] * 2` is size arithmetic
    (scale,) = [n for n in result.graph.nodes.values() if n.type == "ScaleBy"]
    assert scale.params["factor"] == 2
    built = build_module(result.graph)
    built.load_state_dict(result.state_dict)
    x = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(built(x), module(x))


def test_the_same_tensor_twice_into_a_merge():
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(6, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.fc(x)
            return torch.cat([y, y], 1) + torch.cat([y, y], 1)

    module = Twice()
    result = import_module(module, (6,))
    built = build_module(result.graph)
    built.load_state_dict(result.state_dict)
    x = torch.randn(2, 6)
    torch.testing.assert_close(built(x), module(x))


def test_values_outside_the_catalog_are_reported_not_raised():
    with pytest.raises(ModuleImportError) as info:
        import_module(nn.Sequential(nn.Linear(4, 4), nn.LeakyReLU(-0.1)), (4,), strict=True)
    (problem,) = info.value.unsupported
    assert problem.op == "nn.LeakyReLU" and "negative_slope must be >= 0, got -0.1" in problem.reason


# ------------------------------------------------------------------ library patterns (issue 16)
class BatchNormAct(nn.BatchNorm2d):
    """timm's BatchNormAct2d in small: the batch norm written out in forward, then drop and act."""

    def __init__(self, c: int) -> None:
        super().__init__(c)
        self.drop = nn.Identity()
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch._assert(x.ndim == 4, "expected 4D input")
        x = F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, self.training,
                         self.momentum, self.eps)
        return self.act(self.drop(x))


class CastLinear(nn.Linear):
    """timm's Linear: the same as nn.Linear, written out."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.linear(input, self.weight, self.bias)


class PaddedConv(nn.Conv2d):
    """A library's Conv2d that only changes the defaults: it keeps nn.Conv2d's forward."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(cin, cout, 3, padding=1)


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        x, _ = self.mha(x, x, x, need_weights=False, attn_mask=attn_mask)  # the weights are not used
        return x


class LibraryPatterns(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = PaddedConv(3, 8)
        self.bn = BatchNormAct(8)
        self.pool = nn.AvgPool2d(2, count_include_pad=False)  # no padding: the flag changes nothing
        self.attn = Attention()
        self.fc = CastLinear(8, 4)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, scale: float = 1.0) -> torch.Tensor:
        x = torch.cat([self.pool(self.bn(self.conv(x)))], dim=1)  # DenseNet's cat of one tensor
        x = self.attn(x.flatten(2).transpose(1, 2), attn_mask=mask)
        return self.fc(x[:, 0]) * scale if scale != 1.0 else self.fc(x[:, 0])


@pytest.mark.parametrize("training", [False, True])
def test_library_subclasses_optional_arguments_and_unused_outputs_import(training):
    torch.manual_seed(4)
    module = LibraryPatterns()
    with torch.no_grad():
        module.bn.running_mean.uniform_(-1, 1)
        module.bn.running_var.uniform_(0.5, 2)
    graph = round_trip(module, (3, 8, 8), training)
    types = {n.id: n.type for n in graph}
    assert types["conv"] == "Conv2d" and types["fc"] == "Linear" and types["pool"] == "AvgPool2d"
    assert types["bn"] == "BatchNorm2d" and types["bn_act"] == "ReLU"  # the subclass: its layer, then its act
    assert "bn_drop" not in types and "Concat" not in types.values()  # Identity children and cat([x]) vanish
    assert types["attn_mha"] == "MultiheadAttention"


def test_a_subclass_forward_that_does_more_is_traced_into():
    class Shifted(nn.BatchNorm2d):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.1,
                                self.eps) + 1

    with pytest.raises(ModuleImportError) as info:
        import_module(nn.Sequential(Shifted(3)), (3, 4, 4), strict=True)
    # the root cause leads (its buffers, once refused beside it, are Constant nodes now: one op, on the next line)
    assert "F.batch_norm" in " ".join(str(info.value).splitlines()[:2])


def test_avg_pool_with_a_divisor_override_is_refused():
    with pytest.raises(ModuleImportError, match="divisor_override=4"):
        import_module(nn.Sequential(nn.AvgPool2d(3, 1, 1, divisor_override=4)), (3, 8, 8), strict=True)


def test_data_dependent_control_flow_names_its_line():
    class Branchy(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.sum() > 0:  # depends on the values
                return x
            return -x

    with pytest.raises(ModuleImportError) as info:
        import_module(Branchy(), (4,))
    message = str(info.value)
    assert "control flow depends on tensor values" in message
    assert "test_graph_import.py:" in message and "`if x.sum() > 0:  # depends on the values`" in message


def test_repeated_failures_are_grouped_under_their_root_cause():
    class Odd(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.sin(x) + torch.cos(x)

    with pytest.raises(ModuleImportError) as info:
        import_module(nn.Sequential(*[Odd() for _ in range(6)]), (4,), strict=True)
    assert len(info.value.unsupported) == 12  # every op is still listed for programs
    lines = str(info.value).splitlines()
    assert lines[0].startswith("12 op(s) have no Torch Studio layer; the root cause: torch.sin inside ")
    assert len(lines) == 3  # one line per kind of op, with its count, class and first place
    assert "torch.sin x6 inside " in lines[1] and "Odd" in lines[1] and "test_graph_import.py:" in lines[1]
    assert "torch.cos x6" in lines[2]
