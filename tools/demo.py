"""A headless tour of Torch Studio: ``make demo`` (or ``python tools/demo.py [OUT_DIR]``).

The tour is the list ``STEPS`` of small functions, run in order; each gets the shared
:class:`Tour` (output folder, and what earlier steps left for later ones) and prints what it
shows. A new section (training, export...) is one more function appended to ``STEPS``.
Results are written under ``out/demo`` (or the folder given).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from graph_editor.analysis import analyze  # noqa: E402
from graph_editor.building import build_module  # noqa: E402
from graph_editor.importer.module_import import import_module  # noqa: E402
from graph_editor.model import Edge, load_graph, save_graph, validate  # noqa: E402
from graph_editor.model.units import count  # noqa: E402
from trainer.spec import SCHEMA_VERSION  # noqa: E402

TEMPLATES = ROOT / "assets" / "templates"


@dataclass
class Tour:
    """What the steps share: where to write, and results a later step may use."""

    out: Path
    results: dict[str, Any] = field(default_factory=dict)


def templates_summary(tour: Tour) -> None:
    """Every template with its size, as `torch-studio summary` computes it (on shapes and meta)."""
    print(f"{'template':16s} {'nodes':>5s} {'input':>10s} {'params':>12s} {'FLOPs/sample':>13s}  analysis")
    for path in sorted(TEMPLATES.glob("*.graph.json")):
        graph = load_graph(path)
        t = time.perf_counter()
        a = analyze(graph, batch=1)
        ms = (time.perf_counter() - t) * 1000
        shape = "x".join(map(str, graph.input_spec.shape))
        print(f"{path.name.removesuffix('.graph.json'):16s} {len(graph):5d} {shape:>10s} {a.total_params:12,d} "
              f"{count(a.total_flops):>13s}  {ms:5.1f} ms")


def validate_lenet(tour: Tour) -> None:
    """Validation finds every problem and says where: LeNet-5, then a broken copy of it."""
    graph = load_graph(TEMPLATES / "lenet5.graph.json")
    print(f"lenet5: {'ok' if validate(graph).ok else 'problems'}")
    graph.remove_node("flatten")  # the classic mistake: a Linear straight after a conv stack
    graph.connect("pool2", "fc1")
    graph.nodes["fc1"].params["in_features"] = 400
    graph.add_node("ReLU", "spare", position=(900, 200))  # dropped on the canvas, never wired
    path = tour.out / "lenet5_broken.graph.json"
    save_graph(graph, path)
    print(f"a broken copy ({path.relative_to(tour.out.parent)}):")
    for problem in validate(graph).problems:
        print(f"  {problem.severity}: {problem}")


class SmallNet(nn.Module):
    """A hand-written module, as a user would bring one."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.skip = nn.Conv2d(1, 16, 1)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.features(x) + self.skip(x))
        x = nn.functional.max_pool2d(x, 2)
        return self.fc(x.view(x.size(0), -1))


def import_through_fx(tour: Tour) -> None:
    """A hand-written nn.Module becomes a graph file; built again, it gives the same outputs."""
    torch.manual_seed(0)
    module = SmallNet().eval()
    result = import_module(module, (1, 8, 8))
    path = tour.out / "small_net.graph.json"
    save_graph(result.graph, path)
    print(f"imported SmallNet: {len(result.graph)} nodes -> {path.relative_to(tour.out.parent)}")
    print("  " + ", ".join(f"{n.id}:{n.type}" for n in result.graph))
    rebuilt = build_module(result.graph).eval()
    rebuilt.load_state_dict(result.state_dict)
    x = torch.randn(4, 1, 8, 8)
    diff = (rebuilt(x) - module(x)).abs().max().item()
    print(f"  rebuilt graph vs the original module on the same weights: max |difference| = {diff:.2e}")
    tour.results["imported_graph"] = path


def import_refusal(tour: Tour) -> None:
    """What cannot be a graph is listed op by op, with the line it comes from."""
    from graph_editor.importer.module_import import ModuleImportError

    class Odd(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.sin(x).cumsum(1)

    try:
        import_module(Odd(), (8,))
    except ModuleImportError as exc:
        print(str(exc))


def edit_and_undo(tour: Tour) -> None:
    """Edits are commands on an undo stack; one macro is one undo step."""
    from graph_editor.model import AddNode, Connect, Disconnect, UndoStack

    graph = load_graph(tour.results.get("imported_graph", TEMPLATES / "lenet5.graph.json"))
    stack = UndoStack()
    before = analyze(graph).total_params
    stack.begin_macro("Insert Dropout before fc")
    src = graph.in_edges("fc")[0]
    stack.push(Disconnect(graph, src))
    drop = stack.push(AddNode(graph, "Dropout", "drop", {"p": 0.25}))
    stack.push(Connect(graph, Edge(src.src, drop.node_id)))
    stack.push(Connect(graph, Edge(drop.node_id, "fc")))
    stack.end_macro()
    print(f"after '{stack.undo_text()}': {len(graph)} nodes, valid={validate(graph).ok}")
    stack.undo()
    print(f"after undo: {len(graph)} nodes, params unchanged={analyze(graph).total_params == before}")


def train_digits(tour: Tour) -> None:
    """Training: digits_cnn on the embedded digits in the worker process, every run kept in a store."""
    from trainer.protocol import events as ev
    from trainer.protocol.client import WorkerClient

    spec = tour.out / "digits_cnn.spec.json"
    spec.write_text(json.dumps({"schema_version": SCHEMA_VERSION, "name": "demo digits_cnn", "device": "cpu",
                                "model": {"graph": str(TEMPLATES / "digits_cnn.graph.json")},
                                "data": {"dataset": "digits"}, "train": {"epochs": 10, "batch_size": 64}}))
    db = f"sqlite:///{tour.out / 'runs.sqlite'}"
    last: ev.Event = ev.Failed(message="the worker ended without a result")
    with WorkerClient.run(spec, db=db) as worker:
        for e in worker.events(timeout=600):
            if isinstance(e, ev.EpochEnd):
                val = "-" if e.val_accuracy is None else f"{e.val_accuracy * 100:.2f}%"
                print(f"  epoch {e.epoch:2d}: train loss {e.train_loss:.4f}, val accuracy {val} ({e.seconds:.1f} s)")
            elif isinstance(e, ev.ENDS):
                last = e
        worker.wait()
    if not isinstance(last, ev.Finished):
        print(f"  failed: {last.message if isinstance(last, ev.Failed) else last}")
        return
    acc = "-" if last.test_accuracy is None else f"{last.test_accuracy * 100:.2f}%"
    print(f"  run {last.run_id} {last.status}: test accuracy {acc} after {last.seconds:.1f} s of training; store {db}")
    tour.results["run_db"], tour.results["run_id"] = db, last.run_id


def export_run(tour: Tour) -> None:
    """The trained run shipped: ONNX proven on real validation samples, model.py, TensorBoard logs."""
    from exporters import ExportOptions, export, from_run

    if "run_id" not in tour.results:
        print("no run to export (the training step did not finish)")
        return
    source = from_run(tour.results["run_id"], store=tour.results["run_db"])
    for fmt, out in (("onnx", tour.out / "export"), ("python", tour.out / "export" / "model.py"),
                     ("tensorboard", tour.out / "export" / "tensorboard")):
        report = export(source, fmt, out, ExportOptions(timing_runs=5))
        checks = ", ".join(f"{c.name} {'ok' if c.passed else 'FAILED'}" for c in report.checks)
        print(f"{fmt:12s} {Path(report.path).name}: {checks}")
        if fmt == "onnx":
            m = report.metrics
            print(f"{'':12s} max abs diff {m['max_abs_diff']:.2g}, top-1 agreement {m['top1_agreement']:.0%}, "
                  f"onnxruntime {m['onnxruntime_ms']:.2f} ms vs eager {m['pytorch_eager_ms']:.2f} ms "
                  f"(batch {m['verify_batch']})")


STEPS: list[Callable[[Tour], None]] = [
    templates_summary,
    validate_lenet,
    import_through_fx,
    import_refusal,
    edit_and_undo,
    train_digits,
    export_run,
]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else ROOT / "out" / "demo"
    out.mkdir(parents=True, exist_ok=True)
    tour = Tour(out)
    start = time.perf_counter()
    for i, step in enumerate(STEPS, start=1):
        print(f"\n== {i}. {(step.__doc__ or step.__name__).strip().splitlines()[0]}")
        step(tour)
    print(f"\ndemo finished in {time.perf_counter() - start:.1f} s; files in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
