"""Where an ONNX export's outputs leave PyTorch's: each graph node's output in PyTorch float32 and in onnxruntime,
both against PyTorch float64 (issue 23: visformer_tiny's 7e-5 of its largest logit).

    python tools/onnx_drift.py visformer_tiny                      # a timm model, imported as the walk imports it
    python tools/onnx_drift.py resnet18 --source torchvision [--batch 2] [--no-ort-optimisations] [--rows 40]

One row a node, in graph order: the largest |value| of its output (float64), and how far PyTorch float32 and
onnxruntime are from float64, over that largest value. Where float32 rounding is the whole difference the two
columns grow together (a softmax over large scores amplifies both); a node where only onnxruntime's jumps computes
something else there. onnxruntime runs the file with each node's last ONNX value as an extra output (found by
``pkg.torch.onnx.name_scopes``), which keeps it from fusing across nodes; the last row is the model's output from
the file as written, in the session the proof uses. ``--rows N`` prints the N nodes whose drift grew most.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import import_walk as walk  # beside this file: on sys.path when run as a script
import torch
from torch import fx

from exporters.formats.onnx_format import onnx_program
from exporters.locate import onnx_node_owner
from exporters.options import DEFAULT_OPSET
from exporters.source import random_inputs
from graph_editor.building import build_module
from graph_editor.importer.module_import import import_module


@dataclass(frozen=True)
class Drift:
    """One node's output: its largest |value| in float64, PyTorch float32's and onnxruntime's largest distance from
    float64 over it (onnxruntime's None where no ONNX value of that shape is the node's)."""

    node: str
    shape: tuple[int, ...]
    largest: float
    torch32: float
    ort: float | None


def node_outputs(module: fx.GraphModule, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each node's output tensor for ``x``, by node id, in graph order (the built module's children are the nodes)."""
    seen: dict[str, torch.Tensor] = {}
    hooks = [child.register_forward_hook(
        lambda _m, _args, out, name=name: seen.__setitem__(name, out.detach().double())
        if isinstance(out, torch.Tensor) else None) for name, child in module.named_children()]
    try:
        with torch.inference_mode():
            seen["output"] = module(x).double()
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def onnx_outputs(path: Path, x: torch.Tensor, optimise: bool) -> dict[str, torch.Tensor]:
    """onnxruntime's value of each node's last ONNX output (by node id), and ``output``: the file's own output,
    from a session on the file as written."""
    import onnx
    import onnxruntime as ort

    options = ort.SessionOptions()
    if not optimise:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL

    def run(file: Path) -> dict[str, torch.Tensor]:
        session = ort.InferenceSession(str(file), options, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        values = session.run(None, {session.get_inputs()[0].name: x.numpy()})
        return {n: torch.from_numpy(v).double() for n, v in zip(names, values, strict=True)}

    model = onnx.load(str(path))
    last = {owner: n.output[0] for n in model.graph.node if (owner := onnx_node_owner(n)) and n.output}
    outputs = {o.name for o in model.graph.output}
    for value in set(last.values()) - outputs:
        model.graph.output.append(onnx.helper.make_empty_tensor_value_info(value))
    probed = path.with_name("probed.onnx")
    onnx.save(model, str(probed))
    values = run(probed)
    found = {owner: values[value] for owner, value in last.items() if value in values}
    found["output"] = next(iter(run(path).values()))
    return found


def drift(module: fx.GraphModule, x: torch.Tensor, *, optimise: bool = True, opset: int = DEFAULT_OPSET) -> list[Drift]:
    """Every node's drift from float64 in PyTorch float32 and in onnxruntime, for inputs ``x``, graph order."""
    module = module.eval()
    exact = node_outputs(copy.deepcopy(module).double(), x.double())
    float32 = node_outputs(module, x)
    example = torch.randn(len(x) + 1, *x.shape[1:])  # another batch than the one compared: the batch stays dynamic
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        onnx_program(module, (example,), opset).save(str(path))
        ort = onnx_outputs(path, x, optimise)
    rows = []
    for node, want in exact.items():
        largest = float(want.abs().max()) if want.numel() else 0.0
        scale = largest or 1.0
        got = ort.get(node)
        rows.append(Drift(node, tuple(want.shape), largest, float((float32[node] - want).abs().max()) / scale,
                          float((got - want).abs().max()) / scale if got is not None and got.shape == want.shape
                          else None))
    return rows


def grew_most(rows: list[Drift], count: int) -> list[Drift]:
    """The ``count`` rows whose onnxruntime (else float32) drift grew most over the row before, in graph order."""
    def growth(i: int) -> float:
        now, before = rows[i], rows[i - 1] if i else None
        value = now.ort if now.ort is not None else now.torch32
        previous = (before.ort if before.ort is not None else before.torch32) if before else 0.0
        return value / max(previous, 1e-12)

    keep = set(sorted(range(len(rows) - 1), key=growth, reverse=True)[:count]) | {len(rows) - 1}
    return [r for i, r in enumerate(rows) if i in keep]


def table(rows: list[Drift]) -> str:
    lines = [f"{'node':<40} {'shape':<22} {'largest':>10} {'float32':>9} {'onnxrt':>9}"]
    for r in rows:
        ort = f"{r.ort:9.2e}" if r.ort is not None else f"{'-':>9}"
        lines.append(f"{r.node:<40} {str(r.shape):<22} {r.largest:10.4g} {r.torch32:9.2e} {ort}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a timm model name (or torchvision with --source)")
    parser.add_argument("--source", choices=["timm", "torchvision"], default="timm")
    parser.add_argument("--batch", type=int, default=2, help="samples compared (the proof's random inputs, seed 0)")
    parser.add_argument("--no-ort-optimisations", action="store_true", help="onnxruntime with its graph optimisations off")
    parser.add_argument("--rows", type=int, default=0, help="only the N nodes whose drift grew most (0: every node)")
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = walk.timm_case(args.model) if args.source == "timm" else next(
            c for c in walk.torchvision_cases() if c.name == args.model)
        result = import_module(case.build(), case.shape, name=case.name, strict=False)
        module = build_module(result.graph)
        module.load_state_dict(result.state_dict, strict=True)
        rows = drift(module, random_inputs(result.graph, args.batch, 0), optimise=not args.no_ort_optimisations)
    print(table(grew_most(rows, args.rows) if args.rows else rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
