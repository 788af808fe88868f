"""Graph commands: ``summary`` and ``validate``."""

from __future__ import annotations

import argparse
import json
import sys

from graph_editor.model import Graph, GraphError, InputSpec, load_graph, validate


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
    from graph_editor.build import BuildError, analyze, summary_table

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
    graph = load_for_cli(args.graph, args.input_shape)
    result = validate(graph)
    errors = [p for p in result.problems if p.severity == "error"]
    for p in result.problems:
        print(f"{p.severity}: {p}", file=sys.stderr if p.severity == "error" else sys.stdout)
    if errors:
        print(f"{len(errors)} problem(s)", file=sys.stderr)
        return 1
    print("ok")
    return 0
