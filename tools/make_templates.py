"""Regenerate ``assets/templates/*.graph.json`` with the project's own graph API.

Usage::

    python tools/make_templates.py            # write every template
    python tools/make_templates.py --check    # exit 1 if a committed file differs from what this makes

Each template is one function returning a :class:`Graph`. The big networks ship grouped the
way their papers and torchvision draw them (stem, stages, residual blocks, head), each group
collapsed into one block, and every template is laid out by the same nested layered layout
the canvas uses (``graph_editor.model.block_layout``), so it opens readable at Fit View.
Node ids mirror torchvision's module names (``layer1_0_conv1`` for ``layer1.0.conv1``) so
state_dict keys are recognisable.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graph_editor.model import Graph, Group, InputSpec, dumps  # noqa: E402
from graph_editor.model.block_layout import nested_layout  # noqa: E402

OUT_DIR = ROOT / "assets" / "templates"
DX, DY = 180.0, 140.0


def group(g: Graph, name: str, nodes: list[str], kind: str = "") -> str:
    """Add a collapsed group (``nodes`` includes those of groups inside it); returns its id."""
    gid = "g_" + "".join(c if c.isalnum() else "_" for c in name)
    g.groups[gid] = Group(gid, name, list(dict.fromkeys(nodes)), True, kind)
    return gid


def since(g: Graph, mark: int) -> list[str]:
    """The ids of the nodes added after ``mark = len(g)``."""
    return list(g.nodes)[mark:]


def _x(graph: Graph, node_id: str) -> tuple[float, float]:
    return graph.nodes[node_id].position


def _conv(out: int, k: int, stride: int = 1, pad: int = 0, bias: bool = True, groups: int = 1) -> dict:
    return {"out_channels": out, "kernel_size": k, "stride": stride, "padding": pad, "bias": bias, "groups": groups}


def merge(graph: Graph, type_: str, node_id: str, inputs: list[str], params: dict | None = None) -> str:
    """A merge node (Add, Concat...) placed one step right of its rightmost input, on the main row."""
    x = max(_x(graph, i)[0] for i in inputs) + DX
    y = _x(graph, inputs[0])[1]
    graph.add_node(type_, node_id, params or {}, (x, y))
    for i in inputs:
        graph.connect(i, node_id)
    return node_id


# ------------------------------------------------------------------ small nets
def mlp() -> Graph:
    g = Graph(InputSpec((64,), "float32"), 10, {"name": "MLP", "description": (
        "Tabular MLP: 64 features (the 8x8 digits flattened) -> 256 -> 128 -> 10, "
        "each hidden stage Linear, BatchNorm1d, ReLU, Dropout.")})
    steps: list[tuple] = [("Input", "input")]
    for i, width in enumerate((256, 128), start=1):
        steps += [("Linear", f"fc{i}", {"out_features": width}), ("BatchNorm1d", f"bn{i}"),
                  ("ReLU", f"relu{i}"), ("Dropout", f"dropout{i}", {"p": 0.2})]
    steps += [("Linear", "fc3", {"out_features": 10}), ("Output", "output")]
    g.chain(*steps)
    return g


def lenet5() -> Graph:
    g = Graph(InputSpec((1, 32, 32)), 10, {"name": "LeNet-5", "description": (
        "LeCun et al. 1998 on 1x32x32 images: two 5x5 convolutions with tanh and average pooling, "
        "then 120-84-10 fully connected layers (61,706 parameters).")})
    g.chain(
        ("Input", "input"),
        ("Conv2d", "conv1", _conv(6, 5)), ("Tanh", "tanh1"), ("AvgPool2d", "pool1", {"kernel_size": 2}),
        ("Conv2d", "conv2", _conv(16, 5)), ("Tanh", "tanh2"), ("AvgPool2d", "pool2", {"kernel_size": 2}),
        ("Flatten", "flatten"),
        ("Linear", "fc1", {"out_features": 120}), ("Tanh", "tanh3"),
        ("Linear", "fc2", {"out_features": 84}), ("Tanh", "tanh4"),
        ("Linear", "fc3", {"out_features": 10}),
        ("Output", "output"),
    )
    return g


def digits_cnn() -> Graph:
    """Small enough to train to >= 98.5% on the 1,797 embedded 8x8 digits within seconds on a CPU."""
    g = Graph(InputSpec((1, 8, 8)), 10, {"name": "Digits CNN", "description": (
        "A small CNN for the embedded 8x8 digits: three 3x3 conv-BN-ReLU stages (32, 64, 128 channels), "
        "one max-pool, global average pooling and a linear classifier.")})
    g.chain(
        ("Input", "input"),
        ("Conv2d", "conv1", _conv(32, 3, pad=1)), ("BatchNorm2d", "bn1"), ("ReLU", "relu1"),
        ("Conv2d", "conv2", _conv(64, 3, pad=1)), ("BatchNorm2d", "bn2"), ("ReLU", "relu2"),
        ("MaxPool2d", "pool", {"kernel_size": 2}),
        ("Conv2d", "conv3", _conv(128, 3, pad=1)), ("BatchNorm2d", "bn3"), ("ReLU", "relu3"),
        ("AdaptiveAvgPool2d", "avgpool", {"output_size": 1}), ("Flatten", "flatten"),
        ("Dropout", "dropout", {"p": 0.2}), ("Linear", "fc", {"out_features": 10}),
        ("Output", "output"),
    )
    return g


# ------------------------------------------------------------------ ResNet
def basic_block(g: Graph, x: str, name: str, planes: int, stride: int, downsample: bool) -> str:
    """torchvision's BasicBlock: conv3x3-BN-ReLU-conv3x3-BN, plus the (downsampled) input, ReLU."""
    mark = len(g)
    main = g.chain(
        ("Conv2d", f"{name}_conv1", _conv(planes, 3, stride, 1, bias=False)), ("BatchNorm2d", f"{name}_bn1"),
        ("ReLU", f"{name}_relu1"),
        ("Conv2d", f"{name}_conv2", _conv(planes, 3, 1, 1, bias=False)), ("BatchNorm2d", f"{name}_bn2"),
        start=x,
    )
    out = _residual(g, x, main, name, planes, stride, downsample)
    group(g, name.replace("_", "."), since(g, mark), "BasicBlock")
    return out


def bottleneck(g: Graph, x: str, name: str, planes: int, stride: int, downsample: bool) -> str:
    """torchvision's Bottleneck (ResNet v1.5, stride on the 3x3): 1x1 reduce, 3x3, 1x1 expand x4."""
    mark = len(g)
    main = g.chain(
        ("Conv2d", f"{name}_conv1", _conv(planes, 1, bias=False)), ("BatchNorm2d", f"{name}_bn1"),
        ("ReLU", f"{name}_relu1"),
        ("Conv2d", f"{name}_conv2", _conv(planes, 3, stride, 1, bias=False)), ("BatchNorm2d", f"{name}_bn2"),
        ("ReLU", f"{name}_relu2"),
        ("Conv2d", f"{name}_conv3", _conv(planes * 4, 1, bias=False)), ("BatchNorm2d", f"{name}_bn3"),
        start=x,
    )
    out = _residual(g, x, main, name, planes * 4, stride, downsample)
    group(g, name.replace("_", "."), since(g, mark), "Bottleneck")
    return out


def _residual(g: Graph, x: str, main: str, name: str, planes: int, stride: int, downsample: bool) -> str:
    shortcut = x
    if downsample:
        x0, y0 = _x(g, x)
        shortcut = g.chain(
            ("Conv2d", f"{name}_downsample_0", _conv(planes, 1, stride, 0, bias=False)),
            ("BatchNorm2d", f"{name}_downsample_1"),
            start=x, position=(x0 + 2 * DX, y0 + DY),
        )
    add = merge(g, "Add", f"{name}_add", [main, shortcut])
    return g.chain(("ReLU", f"{name}_relu{3 if main.endswith('bn3') else 2}"), start=add)


def resnet_body(g: Graph, x: str, block: Callable[..., str], depths: tuple[int, ...], expansion: int) -> str:
    """The four stages (``layer1``..``layer4``, each a group of blocks), then the pooled head."""
    inplanes = 64
    for stage, (planes, depth) in enumerate(zip((64, 128, 256, 512), depths, strict=True), start=1):
        mark = len(g)
        for b in range(depth):
            stride = 2 if stage > 1 and b == 0 else 1
            x = block(g, x, f"layer{stage}_{b}", planes, stride, stride != 1 or inplanes != planes * expansion)
            inplanes = planes * expansion
        group(g, f"layer{stage}", since(g, mark), "Sequential")
    return x


def resnet_head(g: Graph, x: str, classes: int) -> None:
    mark = len(g)
    x = g.chain(("AdaptiveAvgPool2d", "avgpool", {"output_size": 1}), ("Flatten", "flatten"),
                ("Linear", "fc", {"out_features": classes}), start=x)
    group(g, "head", since(g, mark), "pool + classifier")
    g.chain(("Output", "output"), start=x)


def resnet_stem(g: Graph, kernel: int, maxpool: bool) -> str:
    x = g.chain(("Input", "input"))
    mark = len(g)
    steps: list[tuple] = [("Conv2d", "conv1", _conv(64, kernel, 2 if maxpool else 1, kernel // 2, bias=False)),
                          ("BatchNorm2d", "bn1"), ("ReLU", "relu")]
    if maxpool:
        steps.append(("MaxPool2d", "maxpool", {"kernel_size": 3, "stride": 2, "padding": 1}))
    x = g.chain(*steps, start=x)
    group(g, "stem", since(g, mark), "conv + pool" if maxpool else "conv")
    return x


def resnet18() -> Graph:
    g = Graph(InputSpec((3, 224, 224)), 1000, {"name": "ResNet-18", "description": (
        "He et al. 2015, exactly torchvision's resnet18 (11,689,512 parameters) for 3x224x224 "
        "ImageNet images; node ids follow torchvision's module names.")})
    x = resnet_body(g, resnet_stem(g, 7, True), basic_block, (2, 2, 2, 2), 1)
    resnet_head(g, x, 1000)
    return g


def resnet18_cifar() -> Graph:
    g = Graph(InputSpec((3, 32, 32)), 10, {"name": "ResNet-18 (CIFAR)", "description": (
        "ResNet-18 for 3x32x32 images and 10 classes: a 3x3 stride-1 stem and no max-pool, "
        "otherwise torchvision's resnet18 (11,173,962 parameters).")})
    x = resnet_body(g, resnet_stem(g, 3, False), basic_block, (2, 2, 2, 2), 1)
    resnet_head(g, x, 10)
    return g


def resnet50() -> Graph:
    g = Graph(InputSpec((3, 224, 224)), 1000, {"name": "ResNet-50", "description": (
        "He et al. 2015, exactly torchvision's resnet50 (ResNet v1.5, 25,557,032 parameters): bottleneck "
        "blocks 3-4-6-3, stride on the 3x3 convolution; node ids follow torchvision's module names.")})
    x = resnet_body(g, resnet_stem(g, 7, True), bottleneck, (3, 4, 6, 3), 4)
    resnet_head(g, x, 1000)
    return g


# ------------------------------------------------------------------ MobileNetV2
def conv_bn_act(name: str, out: int, k: int, stride: int = 1, groups: int = 1, act: bool = True) -> list[tuple]:
    """torchvision's Conv2dNormActivation as three steps named ``name_0``, ``name_1``, ``name_2``."""
    steps: list[tuple] = [("Conv2d", f"{name}_0", _conv(out, k, stride, (k - 1) // 2, bias=False, groups=groups)),
                          ("BatchNorm2d", f"{name}_1")]
    if act:
        steps.append(("ReLU6", f"{name}_2"))
    return steps


def inverted_residual(g: Graph, x: str, name: str, inp: int, oup: int, stride: int, expand: int) -> str:
    """MobileNetV2's block: 1x1 expand (unless t=1), 3x3 depthwise, 1x1 linear projection, residual."""
    mark = len(g)
    hidden = inp * expand
    steps: list[tuple] = []
    i = 0
    if expand != 1:
        steps += conv_bn_act(f"{name}_conv_0", hidden, 1)
        i = 1
    steps += conv_bn_act(f"{name}_conv_{i}", hidden, 3, stride, groups=hidden)
    steps += [("Conv2d", f"{name}_conv_{i + 1}", _conv(oup, 1, bias=False)), ("BatchNorm2d", f"{name}_conv_{i + 2}")]
    out = g.chain(*steps, start=x)
    if stride == 1 and inp == oup:
        out = merge(g, "Add", f"{name}_add", [out, x])
    group(g, name.replace("_", "."), since(g, mark), "InvertedResidual")
    return out


def mobilenet_v2() -> Graph:
    g = Graph(InputSpec((3, 224, 224)), 1000, {"name": "MobileNetV2", "description": (
        "Sandler et al. 2018, exactly torchvision's mobilenet_v2 (3,504,872 parameters): inverted residuals "
        "with ReLU6 and depthwise convolutions, dropout 0.2 before the classifier.")})
    x = g.chain(("Input", "input"))
    mark = len(g)
    x = g.chain(*conv_bn_act("features_0", 32, 3, 2), start=x)
    group(g, "stem", since(g, mark), "Conv2dNormActivation")
    inp, index = 32, 1
    table = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    for stage, (t, c, n, s) in enumerate(table, start=1):
        mark = len(g)
        for i in range(n):
            x = inverted_residual(g, x, f"features_{index}", inp, c, s if i == 0 else 1, t)
            inp, index = c, index + 1
        if n > 1:
            group(g, f"stage{stage}", since(g, mark), f"{n} x InvertedResidual, {c} ch")
    mark = len(g)
    x = g.chain(
        *conv_bn_act(f"features_{index}", 1280, 1),
        ("AdaptiveAvgPool2d", "avgpool", {"output_size": 1}), ("Flatten", "flatten"),
        ("Dropout", "classifier_0", {"p": 0.2}), ("Linear", "classifier_1", {"out_features": 1000}),
        start=x,
    )
    group(g, "head", since(g, mark), "1x1 conv + classifier")
    g.chain(("Output", "output"), start=x)
    return g


# ------------------------------------------------------------------ VGG
def vgg11() -> Graph:
    g = Graph(InputSpec((3, 224, 224)), 1000, {"name": "VGG-11", "description": (
        "Simonyan & Zisserman 2014 configuration A, exactly torchvision's vgg11 (132,863,336 parameters): "
        "eight 3x3 convolutions with ReLU and five max-pools, then a 4096-4096-1000 classifier.")})
    x = g.chain(("Input", "input"))
    features, i = len(g), 0
    for block, widths in enumerate(((64,), (128,), (256, 256), (512, 512), (512, 512)), start=1):
        mark = len(g)
        steps: list[tuple] = []
        for w in widths:
            steps += [("Conv2d", f"features_{i}", _conv(w, 3, 1, 1)), ("ReLU", f"features_{i + 1}")]
            i += 2
        steps.append(("MaxPool2d", f"features_{i}", {"kernel_size": 2, "stride": 2}))
        i += 1
        x = g.chain(*steps, start=x)
        group(g, f"block{block}", since(g, mark), f"{len(widths)} x conv3x3 + pool")
    group(g, "features", since(g, features), "Sequential")
    x = g.chain(("AdaptiveAvgPool2d", "avgpool", {"output_size": 7}), ("Flatten", "flatten"), start=x)
    mark = len(g)
    steps = []
    for i, width in ((0, 4096), (3, 4096)):
        steps += [("Linear", f"classifier_{i}", {"out_features": width}), ("ReLU", f"classifier_{i + 1}"),
                  ("Dropout", f"classifier_{i + 2}", {"p": 0.5})]
    x = g.chain(*steps, ("Linear", "classifier_6", {"out_features": 1000}), start=x)
    group(g, "classifier", since(g, mark), "Sequential")
    g.chain(("Output", "output"), start=x)
    return g


# ------------------------------------------------------------------ ViT
def vit_tiny() -> Graph:
    g = Graph(InputSpec((3, 224, 224)), 1000, {"name": "ViT-Tiny/16", "description": (
        "Dosovitskiy et al. 2020, ViT-Ti/16 as in timm's vit_tiny_patch16_224 (5,717,416 parameters): "
        "16x16 patches to 192-d tokens, a class token, 12 pre-norm encoder layers with 3 heads.")})
    x = g.chain(("Input", "input"))
    mark = len(g)
    x = g.chain(("PatchEmbed", "patch_embed", {"embed_dim": 192, "patch_size": 16}),
                ("ClassTokenPosEmbed", "pos_embed"), start=x)
    group(g, "embedding", since(g, mark), "patches + class token")
    mark = len(g)
    for i in range(12):
        x = g.chain(("TransformerEncoderLayer", f"blocks_{i}", {
            "nhead": 3, "dim_feedforward": 768, "dropout": 0.0, "activation": "gelu", "layer_norm_eps": 1e-6,
            "norm_first": True}), start=x)
    group(g, "blocks", since(g, mark), "12 x encoder block")
    mark = len(g)
    x = g.chain(("LayerNorm", "norm", {"eps": 1e-6}), ("SelectToken", "cls", {"index": 0}),
                ("Linear", "head", {"out_features": 1000}), start=x)
    group(g, "head", since(g, mark), "norm + class token")
    g.chain(("Output", "output"), start=x)
    return g


TEMPLATES: dict[str, Callable[[], Graph]] = {
    "mlp": mlp, "lenet5": lenet5, "digits_cnn": digits_cnn, "resnet18": resnet18, "resnet18_cifar": resnet18_cifar,
    "resnet50": resnet50, "mobilenet_v2": mobilenet_v2, "vgg11": vgg11, "vit_tiny": vit_tiny,
}


def laid_out(graph: Graph) -> Graph:
    """Every node placed by the nested layout; groups in reading order, each before those inside it."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    graph.groups = dict(sorted(graph.groups.items(),
                               key=lambda kv: (min(order[n] for n in kv[1].nodes), -len(kv[1].nodes))))
    for node_id, pos in nested_layout(graph).items():
        graph.nodes[node_id].position = pos
    return graph


def render(name: str) -> str:
    """The exact text of ``assets/templates/NAME.graph.json``."""
    return dumps(laid_out(TEMPLATES[name]())) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    args = parser.parse_args(argv)
    stale = []
    for name in TEMPLATES:
        path = OUT_DIR / f"{name}.graph.json"
        text = render(name)
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
            continue
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print("out of date (run python tools/make_templates.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
