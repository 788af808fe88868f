"""The wider catalog of issue 16: reductions, LayerNorm2d, Scale, DropPath, Mish, ELU, Softplus, PReLU,
Slice, Unsqueeze, Transpose and Expand.

test_ops_registry proves each type on its one example (build, shapes, FLOPs, source, import back).
Here: more parameter settings against PyTorch's real shapes, the refusals that name node and field,
and small hand-written modules using the torch modules and the functional/method forms, imported and
built back with their weights (outputs within 1e-6, FLOPs equal to FlopCounterMode), and a graph
of all of them exported to ONNX and to model.py, each with its proof.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from exporters import ExportOptions, export, from_graph
from graph_editor.analysis import analyze
from graph_editor.building import build_module
from graph_editor.building.ops.core import DropPath, Scale
from graph_editor.building.ops.norm import LayerNorm2d
from graph_editor.building.ops.reduce import Amax, Mean, Sum
from graph_editor.building.ops.reshape import Expand, Slice, Transpose, Unsqueeze
from graph_editor.importer import import_module
from graph_editor.importer.module_import import ModuleImportError
from graph_editor.model import Graph, InputSpec, validate

NEW_TYPES = {"Mean", "Sum", "Amax", "LayerNorm2d", "Scale", "DropPath", "Mish", "ELU", "Softplus", "PReLU",
             "Slice", "Unsqueeze", "Squeeze", "Transpose", "Expand"}


def one_layer(type_: str, params: dict, shape: tuple[int, ...]) -> Graph:
    """Input (per-sample ``shape``) -> the layer (id ``layer``) -> Flatten -> Linear -> Output."""
    g = Graph(InputSpec(shape), 3, {"name": f"{type_} test"})
    g.chain(("Input", "input"), (type_, "layer", params), ("Flatten", "flat"), ("Linear", "head", {"out_features": 3}),
            ("Output", "output"))
    return g


# ------------------------------------------------------------------ shape rules against PyTorch
SHAPE_CASES = [
    ("Mean", {"dims": [2, 3]}, (4, 5, 6)),
    ("Mean", {"dims": [1], "keepdim": True}, (7, 3)),
    ("Sum", {"dims": [-1, 1], "keepdim": False}, (4, 5, 6)),
    ("Amax", {"dims": [-2], "keepdim": True}, (4, 5, 6)),
    ("LayerNorm2d", {"num_channels": 4, "elementwise_affine": False}, (4, 3, 5)),
    ("Scale", {"dim": 1}, (4, 3, 5)),
    ("Scale", {"dim": -2, "num_features": 3}, (4, 3, 5)),
    ("PReLU", {"num_parameters": 1}, (6,)),
    ("PReLU", {"num_parameters": 4}, (4, 2, 2)),
    ("Slice", {"dim": 1, "start": 1, "end": 3}, (5, 4)),
    ("Slice", {"dim": -1, "start": -3, "step": 2}, (2, 7)),
    ("Slice", {"dim": 2, "start": 0, "end": 100}, (2, 3, 4)),
    ("Unsqueeze", {"dim": 1}, (3, 4)),
    ("Unsqueeze", {"dim": -1}, (3, 4)),
    ("Unsqueeze", {"dim": 2}, (5,)),
    ("Squeeze", {"dim": 1}, (1, 4)),
    ("Squeeze", {"dim": -1}, (3, 1)),
    ("Transpose", {"dim0": 1, "dim1": 2}, (3, 4)),
    ("Transpose", {"dim0": -1, "dim1": -3}, (2, 3, 4)),
    ("Expand", {"shape": [4, -1]}, (1, 5)),
    ("Expand", {"shape": [-1, 2, 3]}, (3, 1, 3)),
    ("DropPath", {"p": 0.5, "mode": "row"}, (3, 4)),
]


@pytest.mark.parametrize("type_, params, shape", SHAPE_CASES, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(SHAPE_CASES)])
def test_shape_rule_params_and_flops_agree_with_pytorch(type_, params, shape):
    graph = one_layer(type_, params, shape)
    inf = validate(graph, batch=2)
    assert inf.ok, [str(p) for p in inf.problems]
    layer = build_module(graph, inference=inf).get_submodule("layer").eval()
    with torch.no_grad():
        out = layer(torch.randn(2, *shape))
    assert tuple(out.shape) == inf.shapes["layer"]
    stats = analyze(graph, batch=2).by_id()["layer"]
    assert stats.params == sum(p.numel() for p in layer.parameters())
    with FlopCounterMode(display=False) as counter:
        layer.train()(torch.randn(2, *shape))
    assert stats.flops == counter.get_total_flops() == 0


# ------------------------------------------------------------------ refusals name the node and the field
REFUSALS = [
    ("Mean", {"dims": [0, 2]}, (3, 4), "dims", "dim 0 is the batch dimension"),
    ("Sum", {"dims": [-3]}, (3, 4), "dims", "dim -3 is the batch dimension"),
    ("Amax", {"dims": [1, -2]}, (3, 4), "dims", "dim 1 is named twice"),
    ("Mean", {"dims": [3]}, (3, 4), "dims", "out of range"),
    ("Scale", {"dim": 0}, (3, 4), "dim", "batch dimension"),
    ("Scale", {"dim": 1, "num_features": 5}, (3, 4), "num_features", "expects 5 channels"),
    ("PReLU", {"num_parameters": 5}, (3, 4), "num_parameters", "use 1 or 3"),
    ("Slice", {"dim": 0, "end": 1}, (3, 4), "dim", "batch dimension"),
    ("Slice", {"dim": 1, "start": 3, "end": 2}, (3, 4), "start", "keeps nothing"),
    ("Unsqueeze", {"dim": 0}, (3,), "dim", "batch dimension"),
    ("Unsqueeze", {"dim": -3}, (3,), "dim", "batch dimension"),
    ("Squeeze", {"dim": 1}, (3, 4), "dim", "its size is 3, not 1"),
    ("Squeeze", {"dim": -3}, (1, 1), "dim", "batch dimension"),
    ("Transpose", {"dim0": 0, "dim1": 1}, (3, 4), "dim0", "batch dimension"),
    ("Transpose", {"dim0": 1, "dim1": 5}, (3, 4), "dim1", "out of range"),
    ("Expand", {"shape": [-1, 6]}, (3, 4), "shape", "from 4 to 6"),
    ("Expand", {"shape": [2, 3, 4]}, (3, 4), "shape", "before the batch"),
    ("Expand", {"shape": [0, 4]}, (1, 4), "shape", "holds a 0"),
]


@pytest.mark.parametrize("type_, params, shape, field, words", REFUSALS,
                         ids=[f"{t}-{f}-{i}" for i, (t, _, _, f, _) in enumerate(REFUSALS)])
def test_a_refused_setting_names_the_node_and_the_field(type_, params, shape, field, words):
    inf = validate(one_layer(type_, params, shape), batch=2)
    (problem,) = [p for p in inf.problems if p.severity == "error"]
    assert problem.node == "layer" and problem.field == field
    assert words in problem.message and problem.message.startswith(f"{type_} ")


# ------------------------------------------------------------------ import: module and functional forms
class Reductions(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.mean = Mean([2, 3])
        self.sum = Sum([-1], keepdim=True)
        self.amax = Amax([2, 3])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        a = y.mean((2, 3))  # the pooling of torchvision's and timm's heads
        b = torch.mean(y, dim=-1, keepdim=True).sum(dim=2).flatten(1)
        c = torch.amax(y, dim=(2, 3))
        d = y.amax(dim=[-1, -2], keepdim=True).flatten(1)
        e = torch.sum(y, (2, 3)) + self.sum(y).mean(2).flatten(1)
        return torch.cat([a, b, c, d, e, self.mean(y), self.amax(y)], 1)


class TokenMean(nn.Module):
    """A ViT-style head: the mean over tokens, ``x.mean(dim=1)``."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(6, 8)
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x).mean(dim=1))


class Activations(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.mish, self.elu, self.softplus = nn.Mish(), nn.ELU(0.7), nn.Softplus(2.0, 5.0)
        self.prelu, self.prelu1 = nn.PReLU(6, 0.1), nn.PReLU()
        with torch.no_grad():
            self.prelu.weight.uniform_(-0.5, 0.5)  # a trained slope per channel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.fc(x)
        a = self.mish(x) + F.mish(x)
        b = self.elu(x) + F.elu(x, alpha=0.3)
        c = self.softplus(x) + F.softplus(x, beta=3, threshold=0.5)
        return self.prelu1(self.prelu(a + b + c))


class ConvNeXtBlock(nn.Module):
    """Depthwise conv, LayerNorm over channels, layer scale and stochastic depth, as ConvNeXt's block."""

    def __init__(self) -> None:
        super().__init__()
        self.dw = nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.norm = LayerNorm2d(4, eps=1e-6)
        self.pw = nn.Conv2d(4, 4, 1)
        self.scale = Scale([4, 1, 1], 0.5)
        self.drop = DropPath(0.3)
        self.head = nn.Linear(4, 3)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.scale.gamma.uniform_(0.1, 0.9)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.scale(self.pw(self.norm(self.dw(x)))))
        return self.head(x.mean((2, 3)))


class Shapes(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cut = Slice(2, 1, None, 2)
        self.swap = Transpose(1, 2)
        self.lift = Unsqueeze(1)
        self.wide = Expand([3, -1, -1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: N x 6 x 5
        a = torch.narrow(x, 1, 1, 3)  # 3 x 5
        b = x.narrow(-1, 0, 2).swapaxes(1, 2)  # 2 x 6
        c = torch.unsqueeze(b, 1).expand(-1, 4, -1, -1)  # 4 x 2 x 6
        d = c.expand(x.size(0), 4, 2, 6).unsqueeze(-1).swapdims(2, 3)  # 4 x 6 x 2 x 1
        d = torch.squeeze(d.unsqueeze(2), 2).squeeze(-1).unsqueeze(-1)  # the same, through Squeeze
        e = self.wide(self.lift(self.swap(self.cut(x))))  # 3 x 2 x 6
        return torch.cat([a.flatten(1), d.flatten(1), e.flatten(1)], 1)


IMPORT_CASES = [
    (Reductions, (3, 5, 6), {"Mean", "Sum", "Amax"}),
    (TokenMean, (5, 6), {"Mean"}),
    (Activations, (6,), {"Mish", "ELU", "Softplus", "PReLU"}),
    (ConvNeXtBlock, (4, 5, 5), {"LayerNorm2d", "Scale", "DropPath"}),
    (Shapes, (6, 5), {"Slice", "Transpose", "Unsqueeze", "Squeeze", "Expand"}),
]


@pytest.mark.parametrize("cls, shape, types", IMPORT_CASES, ids=[c.__name__ for c, _, _ in IMPORT_CASES])
def test_import_round_trips_with_the_weights(cls, shape, types):
    torch.manual_seed(0)
    module = cls().eval()
    result = import_module(module, shape)
    got = {n.type for n in result.graph}
    assert types <= got, got
    assert "Module" not in got  # nothing kept opaque: every op mapped to a catalog layer
    again = build_module(result.graph).eval()
    again.load_state_dict(result.state_dict)  # strict: every weight found its node
    x = torch.randn(3, *shape)
    with torch.no_grad():
        assert (again(x) - module(x)).abs().max() < 1e-6
    with FlopCounterMode(display=False) as counter:
        module(x)
    assert analyze(result.graph, batch=3).total_flops == counter.get_total_flops()
    assert sum(p.numel() for p in module.parameters()) == analyze(result.graph).total_params


def test_functional_forms_map_to_the_parameters_they_were_called_with():
    result = import_module(Activations(), (6,))
    params = {n.type: n.params for n in result.graph if n.id.startswith(("elu", "softplus"))}
    assert params["ELU"]["alpha"] == 0.3 and params["Softplus"] == {"beta": 3, "threshold": 0.5}
    types = {n.id: (n.type, n.params) for n in import_module(Shapes(), (6, 5)).graph}
    assert types["narrow"] == ("Slice", {"dim": 1, "start": 1, "end": 4, "step": 1})
    assert types["swapaxes"] == ("Transpose", {"dim0": 1, "dim1": 2})
    assert types["expand"] == ("Expand", {"shape": [4, -1, -1]})


class MeanOfAll(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - x.mean()


class ExpandBatch(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:1].expand(4, -1)


@pytest.mark.parametrize("cls, words", [
    (MeanOfAll, "mean over every dimension, the batch included"),
    (ExpandBatch, "expands the batch dimension to 4"),
])
def test_a_form_that_touches_the_batch_is_refused_with_the_reason(cls, words):
    with pytest.raises(ModuleImportError, match=words):
        import_module(cls(), (5,), strict=True)  # catalog layers only (else one Program node holds it)


def test_drop_path_drops_whole_samples_while_training_and_passes_through_in_eval():
    torch.manual_seed(3)
    x = torch.randn(400, 2, 3) + 5.0
    row = DropPath(0.5, "row")
    out = row(x)
    kept = (out != 0).flatten(1)
    assert kept.all(1).logical_or(~kept.any(1)).all()  # each sample whole or dropped whole
    assert 0.3 < kept.all(1).float().mean() < 0.7
    assert torch.allclose(out[kept.all(1)], x[kept.all(1)] * 2.0)  # what is kept is scaled by 1 / (1 - p)
    batch = DropPath(0.5, "batch")
    outs = [batch(x) for _ in range(20)]
    assert all(o.eq(0).all() or torch.allclose(o, x * 2.0) for o in outs)
    assert torch.equal(row.eval()(x), x) and torch.equal(DropPath(1.0)(x), torch.zeros_like(x))


# ------------------------------------------------------------------ export: ONNX and model.py, each proven
def all_new_types() -> Graph:
    g = Graph(InputSpec((3, 8, 8)), 4, {"name": "wider catalog"})
    g.chain(("Input", "input"), ("Conv2d", "conv", {"out_channels": 6, "padding": 1}), ("LayerNorm2d", "ln"),
            ("Scale", "scale", {"init_value": 0.5}), ("DropPath", "drop", {"p": 0.2}),
            ("PReLU", "prelu", {"num_parameters": 6}), ("Mish", "mish"), ("ELU", "elu", {"alpha": 0.5}),
            ("Softplus", "softplus", {"beta": 2.0}), ("Slice", "slice", {"dim": 1, "start": 1, "end": 5}),
            ("Transpose", "swap", {"dim0": 2, "dim1": 3}), ("Unsqueeze", "lift", {"dim": 2}),
            ("Unsqueeze", "lift2", {"dim": -1}), ("Squeeze", "drop_last", {"dim": -1}),
            ("Expand", "wide", {"shape": [4, 3, 8, 8]}), ("Amax", "amax", {"dims": [2]}),
            ("Mean", "mean", {"dims": [-1], "keepdim": True}), ("Sum", "sum", {"dims": [-1]}),
            ("Flatten", "flat"), ("Linear", "head", {"out_features": 4}), ("Output", "output"))
    return g


def test_the_graph_of_every_new_type_validates_with_the_expected_shapes():
    inf = validate(all_new_types(), batch=2)
    assert inf.ok, [str(p) for p in inf.problems]
    assert {n.type for n in all_new_types()} >= NEW_TYPES
    assert inf.shapes["slice"] == (2, 4, 8, 8) and inf.shapes["wide"] == (2, 4, 3, 8, 8)
    assert inf.shapes["amax"] == (2, 4, 8, 8) and inf.shapes["sum"] == (2, 4, 8)


@pytest.mark.export
@pytest.mark.parametrize("fmt, file", [("onnx", "wider.onnx"), ("python", "model.py")])
def test_every_new_type_exports_and_passes_the_proof(tmp_path, fmt, file):
    source = from_graph(all_new_types(), verify_batch=3)
    report = export(source, fmt, tmp_path / file, ExportOptions(timing_runs=1))
    assert report.ok, report.to_text()
    if fmt == "onnx":
        assert report.metrics["max_abs_diff"] < 1e-4 and report.metrics["top1_agreement"] == 1.0


class Indexing(nn.Module):
    """Channel splits and strided slices as written in forward: GhostNet's ``out[:, :self.oup]``, ``x[..., ::2]``."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.oup = 5
        self.head = nn.Linear(5 * 6 * 6 + 8 * 6 * 3 + 2 * 2 * 6, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        a = y[:, :self.oup, :, :]
        b = y[..., ::2]
        c = y[:, -4:-2][:, :, 1:3]  # one dim per index: chained
        return self.head(torch.cat([a.flatten(1), b.flatten(1), c.flatten(1)], 1))


def test_slicing_in_forward_imports_as_slice_nodes():
    torch.manual_seed(0)
    module = Indexing().eval()
    result = import_module(module, (3, 6, 6))
    slices = {n.id: n.params for n in result.graph if n.type == "Slice"}
    assert sorted(slices.values(), key=str) == sorted([
        {"dim": 1, "start": 0, "end": 5, "step": 1}, {"dim": -1, "start": 0, "end": None, "step": 2},
        {"dim": 1, "start": -4, "end": -2, "step": 1}, {"dim": 2, "start": 1, "end": 3, "step": 1}], key=str)
    again = build_module(result.graph).eval()
    again.load_state_dict(result.state_dict)
    x = torch.randn(3, 3, 6, 6)
    with torch.no_grad():
        assert (again(x) - module(x)).abs().max() < 1e-6


class SliceBatch(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[1:] - x[:-1].mean(1, keepdim=True)


class IndexMixed(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, 1:3, 0]  # a slice and an index at once (x[:, 1:3, 1:3], two slices, maps: one Slice each)


@pytest.mark.parametrize("cls, words", [
    (SliceBatch, r"x\[1:\] slices the batch dimension"),
    (IndexMixed, r"indexing x\[:, 1:3, 0\]; only slicing one dim \(x\[:, a:b\]\) or one token"),
])
def test_an_index_that_does_not_map_says_why(cls, words):
    with pytest.raises(ModuleImportError, match=words):
        import_module(cls(), (4, 4), strict=True)


def library_block() -> nn.Module:
    """torchvision's and timm's own classes of the new types, as their models use them."""
    stochastic_depth = pytest.importorskip("torchvision.ops").StochasticDepth
    convnext = pytest.importorskip("torchvision.models.convnext")
    timm_layers = pytest.importorskip("timm.layers")

    class LibraryBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.ln_timm = timm_layers.LayerNorm2d(4)
            self.ln_tv = convnext.LayerNorm2d(4, eps=1e-6)
            self.sd = stochastic_depth(0.2, "row")
            self.drop = timm_layers.DropPath(0.1)
            self.ls = timm_layers.LayerScale(4, init_values=0.3)
            self.ls2d = timm_layers.LayerScale2d(4, init_values=0.3)  # x * gamma.view(1, -1, 1, 1)
            self.head = nn.Linear(4, 3)
            with torch.no_grad():
                self.ln_tv.weight.uniform_(0.5, 1.5)
                self.ls.gamma.uniform_(0.1, 0.9)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.ls2d(self.ln_tv(self.ln_timm(self.conv(x))))
            y = y + self.sd(y)
            tokens = y.flatten(2).transpose(1, 2)  # N x L x C, as a ViT holds them
            tokens = tokens + self.drop(self.ls(tokens))
            return self.head(tokens.mean(1))

    return LibraryBlock()


def test_torchvision_and_timm_classes_of_the_new_types_import_whole():
    torch.manual_seed(0)
    module = library_block().eval()
    result = import_module(module, (3, 5, 5))
    nodes = {n.id: (n.type, n.params) for n in result.graph}
    assert nodes["ln_timm"] == ("LayerNorm2d", {"num_channels": 4, "eps": 1e-6, "elementwise_affine": True,
                                                "bias": True})
    assert nodes["ln_tv"][0] == "LayerNorm2d"
    assert nodes["sd"] == ("DropPath", {"p": 0.2, "mode": "row"}) and nodes["drop"] == ("DropPath", {"p": 0.1,
                                                                                                    "mode": "row"})
    assert nodes["ls"] == ("Scale", {"num_features": 4, "dim": -1, "init_value": 1e-5})  # trained: not all equal
    assert nodes["ls2d_gamma_scale"] == ("Scale", {"num_features": 4, "dim": -3, "init_value": 0.3})  # traced into
    again = build_module(result.graph).eval()
    again.load_state_dict(result.state_dict)
    x = torch.randn(3, 3, 5, 5)
    with torch.no_grad():
        assert (again(x) - module(x)).abs().max() < 1e-6


class ForwardLayerScale(nn.Module):
    """Layer scale as parameters read in forward: ``gamma * x`` ([C, 1, 1]), timm ConvNeXt's
    ``x.mul(gamma.reshape(1, -1, 1, 1))`` and a ViT's ``x * gamma`` over the tokens' last dim."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.gamma = nn.Parameter(torch.rand(4, 1, 1))
        self.block = nn.Module()
        self.block.gamma = nn.Parameter(torch.rand(4))
        self.tokens_gamma = nn.Parameter(torch.full((4,), 0.25))
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        y = y + self.gamma * y
        y = y.mul(self.block.gamma.reshape(1, -1, 1, 1))
        tokens = y.flatten(2).transpose(1, 2) * self.tokens_gamma
        return self.head(tokens.mean(1))


def test_layer_scale_read_in_forward_imports_as_scale_nodes_in_place():
    torch.manual_seed(0)
    module = ForwardLayerScale().eval()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    result = import_module(module, (3, 5, 5))
    scales = {n.id: n.params for n in result.graph if n.type == "Scale"}
    assert scales == {"gamma_scale": {"num_features": 4, "dim": -3, "init_value": 1e-5},
                      "block_gamma_scale": {"num_features": 4, "dim": -3, "init_value": 1e-5},
                      "tokens_gamma_scale": {"num_features": 4, "dim": -1, "init_value": 0.25}}
    assert not {"Parameter", "Multiply", "Module"} & {n.type for n in result.graph}
    again = build_module(result.graph).eval()
    again.load_state_dict(result.state_dict)
    x = torch.randn(3, 3, 5, 5)
    with torch.no_grad():
        assert (again(x) - module(x)).abs().max() < 1e-6
    assert [name for name, _ in module.named_modules()] == ["", "conv", "block", "head"]  # the module untouched
    assert all(torch.equal(v, before[k]) for k, v in module.state_dict().items())


class OneFactor(nn.Module):
    """ReZero: one learned factor for everything, ``x * alpha`` with alpha of shape [1]."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.alpha = nn.Parameter(torch.tensor([0.3]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(x) * self.alpha


def test_one_factor_for_everything_stays_a_parameter_times_x():
    module = OneFactor().eval()
    result = import_module(module, (6,))
    types = {n.type for n in result.graph}
    assert "Scale" not in types and {"Parameter", "Multiply"} <= types
    again = build_module(result.graph).eval()
    again.load_state_dict(result.state_dict)
    x = torch.randn(3, 6)
    with torch.no_grad():
        assert (again(x) - module(x)).abs().max() < 1e-6


class FunctionalPReLU(nn.Module):
    """PReLU written as the function on the module's own slopes: one per channel, and one shared."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.slopes = nn.Parameter(torch.rand(4))
        self.act = nn.Module()
        self.act.weight = nn.Parameter(torch.tensor([0.2]))
        self.mix = nn.Conv2d(4, 4, 1)
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.prelu(self.conv(x), self.slopes)
        y = torch.prelu(self.mix(y), weight=self.act.weight)
        return self.head(y.amax((2, 3)))


def test_prelu_as_a_function_on_a_parameter_imports_as_prelu_nodes():
    torch.manual_seed(0)
    module = FunctionalPReLU().eval()
    result = import_module(module, (3, 5, 5))
    prelus = {n.id: n.params["num_parameters"] for n in result.graph if n.type == "PReLU"}
    assert prelus == {"slopes_prelu": 4, "act_weight_prelu": 1}
    assert "Parameter" not in {n.type for n in result.graph}
    again = build_module(result.graph).eval()
    again.load_state_dict(result.state_dict)
    x = torch.randn(3, 3, 5, 5)
    with torch.no_grad():
        assert (again(x) - module(x)).abs().max() < 1e-6


def test_stochastic_depth_called_as_a_function_imports_as_drop_path():
    pytest.importorskip("torchvision.ops")
    pytest.importorskip("timm.layers")
    from tests.graph_editor.catalog_library_models import FunctionalDropPath

    torch.manual_seed(0)
    module = FunctionalDropPath().eval()  # in eval both are the identity: traced into, they would leave no node
    result = import_module(module, (6,))
    drops = sorted((n.params["p"], n.params["mode"]) for n in result.graph if n.type == "DropPath")
    assert drops == [(0.1, "row"), (0.2, "batch")]
    again = build_module(result.graph).eval()
    again.load_state_dict(result.state_dict)
    x = torch.randn(3, 6)
    with torch.no_grad():
        assert (again(x) - module(x)).abs().max() < 1e-6


class GlobalMaxPool(nn.Module):
    """Global max pooling as timm's 'max' / 'avgmax' pools write it: the module and the function."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.AdaptiveMaxPool2d(1)
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        a = self.pool(y)
        b = F.adaptive_max_pool2d(y, (1, 1))
        return self.head(torch.cat([a, b], 1).flatten(1))


def test_global_max_pooling_imports_as_amax():
    module = GlobalMaxPool().eval()
    result = import_module(module, (3, 5, 5))
    assert [n.params for n in result.graph if n.type == "Amax"] == [{"dims": [2, 3], "keepdim": True}] * 2
    again = build_module(result.graph).eval()
    again.load_state_dict(result.state_dict)
    x = torch.randn(3, 3, 5, 5)
    with torch.no_grad():
        assert (again(x) - module(x)).abs().max() < 1e-6
