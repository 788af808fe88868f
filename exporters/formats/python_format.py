"""A standalone, readable ``model.py``: one ``nn.Module`` class with ``__init__`` and ``forward``.

Attribute names come from the node labels (or ids); the graph's own layer classes are copied in,
so the file needs only torch (and safetensors to read its weights file, written beside it with
keys matching the attribute names). Verification imports the file and requires bit-identical
outputs to the graph-built model.
"""

from __future__ import annotations

import ast
import importlib.util
import keyword
import operator
import re
import sys
import uuid
from pathlib import Path
from types import ModuleType

import torch
from torch import fx, nn

from graph_editor.model import Graph, validate

from ..codegen import constructor, import_line, local_class_source, support_imports
from ..errors import ExportError
from ..locate import node_title
from ..options import ExportOptions
from ..proof import parity
from ..registry import Format, Written, export_format
from ..report import Check
from ..source import ExportSource
from .safetensors_format import state_tensors

ALLOWED_IMPORTS = {"os", "torch", "safetensors"}


def _identifier(text: str) -> str:
    name = re.sub(r"\W+", "_", text.strip().lower()).strip("_")
    return name if name and not name[0].isdigit() else f"n_{name}" if name else ""


def attribute_names(graph: Graph, node_ids: list[str]) -> dict[str, str]:
    """Node id -> attribute name: the label as an identifier where it is usable, else the id."""
    names: dict[str, str] = {}
    taken = {"x"}
    for node_id in node_ids:
        node = graph.nodes.get(node_id)
        for cand in (_identifier(node.label) if node and node.label else "", node_id, f"{node_id}_"):
            if cand and not keyword.iskeyword(cand) and not hasattr(nn.Module, cand) and cand not in taken:
                break
        i = 2
        while cand in taken:
            cand, i = f"{node_id}_{i}", i + 1
        names[node_id] = cand
        taken.add(cand)
    return names


def generate(source: ExportSource, weights_name: str) -> tuple[str, dict[str, str]]:
    """The text of model.py and the node id -> attribute name mapping its weights use."""
    gm, graph = source.module, source.graph
    calls = [n for n in gm.graph.nodes if n.op == "call_module"]
    names = attribute_names(graph, [str(n.target) for n in calls])
    inference = validate(graph)
    classes: dict[str, str] = {}
    imports: list[str] = []  # a Module node's class is imported from its package
    init: list[str] = []
    for n in calls:
        node_id = str(n.target)
        module = gm.get_submodule(node_id)
        try:
            code = constructor(module)
        except (AttributeError, ValueError) as exc:
            code, why = None, str(exc)
        else:
            why = f"it has no source writer for {type(module).__module__}.{type(module).__qualname__}"
        if code is None:
            raise ExportError(f"PyTorch source cannot express node {node_title(graph, node_id)}: {why}", node=node_id)
        line = import_line(module)
        if line and line not in imports:
            imports.append(line)
        extra = None if line else local_class_source(module)  # an imported class is not copied too
        if extra:
            classes.setdefault(type(module).__name__, extra)
            imports += [ln for ln in support_imports(module) if ln not in imports]
        node = graph.nodes.get(node_id)
        note = f"  # node {node_id}" + (f' "{node.label}"' if node and node.label else "") \
            if names[node_id] != node_id or (node and node.label) else ""
        init.append(f"        self.{names[node_id]} = {code}{note}")
    class_name = _class_name(gm, classes)
    forward = _forward(gm, names, inference.shapes, inference.port_shapes)
    if source.prep.standardises:  # the model takes what the dataset file holds
        forward.insert(0, "        x = preprocess(x)  # standardised as in training")
    return _render(source, class_name, classes, init, forward, weights_name, imports), names


def _class_name(gm: fx.GraphModule, taken: dict[str, str]) -> str:
    name = type(gm).__name__ if type(gm).__name__.isidentifier() else "StudioNet"
    return name if name not in taken and name not in ("Module", "nn", "torch") else f"{name}Net"


def _forward(gm: fx.GraphModule, names: dict[str, str], shapes: dict[str, tuple[int, ...]],
             parts: dict[str, list[tuple[int, ...]]] | None = None) -> list[str]:
    values: dict[str, str] = {}
    lines: list[str] = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            values[n.name] = "x"
        elif n.op == "call_module":
            var = names[str(n.target)]
            args = ", ".join(values[a.name] for a in n.args)
            several = (parts or {}).get(str(n.target))  # a layer with several outputs returns a tuple
            batch = "1" if gm.meta.get("node_types", {}).get(str(n.target)) == "Parameter" else "B"
            described = [_batch_shape(s, batch) for s in several] if several else (
                [_batch_shape(shapes[str(n.target)], batch)] if str(n.target) in shapes else [])
            comment = f"  # {', '.join(described)}" if described else ""
            lines.append(f"        {var} = self.{var}({args}){comment}")
            values[n.name] = var
        elif n.op == "call_function" and n.target is operator.getitem and n.args[0].name in values:
            values[n.name] = f"{values[n.args[0].name]}[{int(n.args[1])}]"  # one output of such a tuple
        elif n.op == "output":
            lines.append(f"        return {values[n.args[0].name]}")
        else:
            raise ExportError(f"PyTorch source cannot express the fx operation {n.op} '{n.name}'")
    return lines


def _batch_shape(shape: tuple[int, ...], batch: str = "B") -> str:
    return " x ".join([batch, *map(str, shape[1:])])


def _preprocess_source(mean: list[float], std: list[float]) -> list[str]:
    """MEAN, STD and ``preprocess``: the training split's standardisation, as training applied it."""
    if not mean:
        return []
    return [
        "# The training split's per-channel (or per-feature) mean and std: preprocess() standardises raw",
        "# samples (as the dataset file holds them) exactly as training did.",
        f"MEAN = {mean!r}",
        f"STD = {std!r}",
        "",
        "",
        "def preprocess(x: torch.Tensor) -> torch.Tensor:",
        '    """(x - MEAN) / STD over axis 1 (channels of images, features of tables), in float32."""',
        "    shape = (1, -1) + (1,) * (x.dim() - 2)",
        "    mean = torch.tensor(MEAN, dtype=torch.float32, device=x.device).view(shape)",
        "    std = torch.tensor(STD, dtype=torch.float32, device=x.device).view(shape)",
        "    return (x.float() - mean) / std",
    ]


def _render(source: ExportSource, class_name: str, classes: dict[str, str], init: list[str],
            forward: list[str], weights_name: str, imports: list[str]) -> str:
    spec = source.graph.input_spec
    prep = source.prep
    in_dtype = "torch.int64" if spec.dtype == "int64" else "torch.float32"
    demo = (f"torch.zeros(2, *INPUT_SHAPE, dtype={in_dtype})" if spec.dtype == "int64"
            else "torch.randn(2, *INPUT_SHAPE)")
    parts = [
        f'"""{class_name}: generated by Torch Studio from {source.description}.',
        "",
        f"Input: a batch of {' x '.join(map(str, spec.shape))} {'int64' if spec.dtype == 'int64' else 'float32'}"
        f" samples, {prep.input}; output: {source.graph.num_classes} class logits (CLASSES names them).",
        f"Weights: {weights_name} beside this file (load them with ``load()``). Needs only torch and safetensors.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import os",
        "",
        "import torch",
        "from torch import nn",
        *sorted(imports, key=lambda line: (line.startswith("from"), line)),
        "",
        f"INPUT_SHAPE = {tuple(spec.shape)!r}",
        f"NUM_CLASSES = {source.graph.num_classes}",
        f"WEIGHTS = {weights_name!r}",
        f"CLASSES = {prep.classes!r}",
        *_preprocess_source(prep.mean, prep.std),
        "",
    ]
    for code in classes.values():
        parts += ["", code]
    parts += [
        "",
        f"class {class_name}(nn.Module):",
        "    def __init__(self) -> None:",
        "        super().__init__()",
        *init,
        "",
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:",
        *forward,
        "",
        "",
        f"def load(weights: str | None = None, device: str = \"cpu\") -> {class_name}:",
        '    """The model in eval mode with its trained weights (WEIGHTS beside this file by default)."""',
        "    from safetensors.torch import load_file",
        "",
        "    path = weights or os.path.join(os.path.dirname(os.path.abspath(__file__)), WEIGHTS)",
        f"    model = {class_name}()",
        "    model.load_state_dict(load_file(path))",
        "    return model.to(device).eval()",
        "",
        "",
        'if __name__ == "__main__":',
        "    model = load()",
        "    with torch.inference_mode():",
        f"        print(model({demo}).shape)",
    ]
    return "\n".join(parts) + "\n"


@export_format
class PythonFormat(Format):
    name = "python"
    title = "PyTorch source"
    suffix = ".py"
    menu_text = "PyTorch &Source (model.py)"
    tip = "A standalone, readable model.py with its weights"
    order = 50

    def write(self, source: ExportSource, path: Path, options: ExportOptions) -> Written:
        from safetensors.torch import save_file

        weights = path.with_suffix(".safetensors")
        text, names = generate(source, weights.name)
        path.write_text(text, encoding="utf-8")
        save_file(state_tensors(source.module, names), str(weights), metadata={"format": "pt"})
        return Written([path, weights], {"lines": text.count("\n")})

    def verify(self, source: ExportSource, written: Written, options: ExportOptions,
               ) -> tuple[list[Check], dict[str, object]]:
        path, weights = written.files
        imports = _imports(path)
        modules = {ln.split()[1].split(".")[0] for ln in map(import_line, source.module.modules()) if ln}
        # a Module node's package is its own import; a copied class may use the standard library (zlib, base64)
        foreign = sorted(imports - ALLOWED_IMPORTS - set(sys.stdlib_module_names) - modules)
        checks = [Check("standalone", not foreign, "imports only " + ", ".join(sorted(imports)) if not foreign
                        else f"imports {', '.join(foreign)} besides torch")]
        model = load_generated(path).load(str(weights))
        with torch.inference_mode():
            got = model(source.samples)
        expected = source.reference(source.samples)
        same = torch.equal(got, expected)
        more, figures = parity(source, got, options, "parity")
        checks.append(Check("identical outputs", same, f"model.py + weights give bit-identical outputs on batch "
                            f"{len(source.samples)}" if same else f"outputs differ (max abs diff {figures['max_abs_diff']:.3g})"))
        module = load_generated(path)
        same_meta = getattr(module, "CLASSES", None) == source.prep.classes and \
            list(getattr(module, "MEAN", [])) == source.prep.mean and list(getattr(module, "STD", [])) == source.prep.std
        checks += [*more[1:], Check("metadata", same_meta, "CLASSES, MEAN and STD in model.py are the model's"
                                    if same_meta else "CLASSES, MEAN or STD in model.py differ from the model's")]
        return checks, figures


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__":
            names.add(node.module.split(".")[0])
    return names


def load_generated(path: Path) -> ModuleType:
    """Import a generated model.py as a fresh module (never cached under a shared name)."""
    name = f"_torch_studio_model_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module
