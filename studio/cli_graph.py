"""Graph commands: ``summary``, ``validate`` and ``import``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from graph_editor.model import Graph, GraphError, InputSpec, load_graph, save_graph
from graph_editor.model.finetune import KEY as FINETUNE
from graph_editor.model.finetune import FinetunePlan


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("summary", help="per-node shapes, parameters, FLOPs and activation memory")
    p.add_argument("graph", help="a *.graph.json file")
    p.add_argument("--input-shape", type=parse_shape, help="override the input shape, e.g. 3,32,32")
    p.add_argument("--batch", type=int, default=1, help="batch size for FLOPs and activations (default 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_summary)

    p = sub.add_parser("validate", help="check a graph; exit 0 and 'ok', or list every problem")
    p.add_argument("graph", help="a *.graph.json file")
    p.add_argument("--input-shape", type=parse_shape, help="override the input shape, e.g. 3,32,32")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("import", help="import an nn.Module through torch.fx as a graph file")
    p.add_argument("factory", metavar="MODULE:FACTORY",
                   help="a Python module and a function in it that returns the nn.Module (called with no arguments)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.graph.json", help="the graph file to write")
    p.add_argument("--input-shape", type=parse_shape,
                   help="per-sample input shape, e.g. 3,32,32 (needed unless the first layer is Linear)")
    p.add_argument("--num-classes", type=int, help="class count (default: the size of the module's output)")
    p.add_argument("--weights", metavar="OUT.safetensors", help="also write the module's weights, keyed by node id")
    p.add_argument("--pretrained", metavar="FILE|cache", default="",
                   help="load these weights into the module first: a weights file, or 'cache' for the local "
                        "torch hub / Hugging Face cache (nothing is downloaded); with --weights the graph's "
                        "runs start from them (model.init_from)")
    p.add_argument("--strict", action="store_true",
                   help="fail on any op without a catalog layer instead of keeping its module whole as a Module node")
    p.set_defaults(func=cmd_import)


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.replace("x", ",").split(",") if d.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a shape like 3,32,32") from None
    if not dims or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(f"'{text}' is not a shape of positive sizes")
    return dims


def load_for_cli(path: str, input_shape: tuple[int, ...] | None = None) -> Graph:
    """Load a graph for a command; errors are printed and exit with status 1."""
    try:
        graph = load_graph(path)
    except GraphError as exc:
        fail(str(exc))
    if input_shape:
        graph.input_spec = InputSpec(input_shape, graph.input_spec.dtype)
    return graph


def fail(message: str, code: int = 1) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


def cmd_summary(args: argparse.Namespace) -> int:
    from graph_editor.analysis import analyze, summary_table
    from graph_editor.building import BuildError

    if args.batch < 1:
        fail("--batch must be at least 1")
    graph = load_for_cli(args.graph, args.input_shape)
    try:
        result = analyze(graph, batch=args.batch)
    except BuildError as exc:
        fail(str(exc))
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))
    else:
        print(summary_table(result))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """The graph's own checks, then the build every other command makes (on the ``meta`` device: no
    memory), so validate refuses what summary, memory, train and export refuse: node ids PyTorch modules
    reserve, a Module node whose class cannot be imported from here, a layer PyTorch itself refuses.
    The studio's Problems panel lists the same verdict (:func:`graph_editor.analysis.check.check_graph`)."""
    from graph_editor.analysis.check import check_graph

    graph = load_for_cli(args.graph, args.input_shape)
    check = check_graph(graph)
    errors = [p for p in check.problems if p.severity == "error"]
    for p in check.problems:
        print(f"{p.severity}: {p}", file=sys.stderr if p.severity == "error" else sys.stdout)
    if errors:
        print(f"{len(errors)} problem(s)", file=sys.stderr)
        return 1
    print("ok")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from graph_editor.importer.factory import import_factory

    if args.num_classes is not None and args.num_classes < 1:
        fail("--num-classes must be at least 1")
    for flag, target in (("-o", args.output), ("--weights", args.weights)):
        folder = Path(target).expanduser().resolve().parent if target else None
        if folder is not None and not folder.is_dir():  # refused before anything is imported or written
            fail(f"{flag} {target}: the folder {folder} does not exist")
    try:
        result = import_factory(args.factory, args.input_shape, args.num_classes,
                                shape_hint="with --input-shape, e.g. --input-shape 3,32,32", strict=args.strict,
                                weights=args.pretrained)
    except GraphError as exc:
        fail(str(exc))
    try:
        if args.weights:  # first: the graph file is written only when its weights are
            from safetensors.torch import save_file

            try:
                save_file({k: v.detach().clone().contiguous() for k, v in result.state_dict.items()}, args.weights)
            except Exception as exc:  # noqa: BLE001 - SafetensorError wraps the OS error: say which file and why
                fail(f"cannot write {args.weights}: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc}")
        if result.weights_from and args.weights:
            result.graph.metadata[FINETUNE] = FinetunePlan(init_from=str(Path(args.weights).resolve())).to_metadata()
        save_graph(result.graph, args.output)
    except OSError as exc:
        fail(f"cannot write {exc.filename}: {exc.strerror}")
    print(f"imported {len(result.graph)} nodes to {args.output} (input {list(result.graph.input_spec.shape)}, "
          f"{result.graph.num_classes} classes)" + (f"; weights to {args.weights}" if args.weights else ""))
    return 0
