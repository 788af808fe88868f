"""``torch-studio explain GRAPH``: where ``torch.compile`` would break the graph's model into pieces.

Runs ``torch._dynamo.explain`` in a fresh process (:func:`trainer.compilation.explain.explain_in_subprocess`):
the graph count, each graph break with its reason, hints and the node it is in.
"""

from __future__ import annotations

import argparse
import json

from studio.cli_graph import fail, load_for_cli, parse_shape


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="the compile check: graph breaks of torch.compile, on their nodes")
    p.add_argument("graph", help="a *.graph.json file")
    p.add_argument("--batch", type=int, default=2, help="batch size of the example input (default 2)")
    p.add_argument("--input-shape", type=parse_shape, help="override the input shape, e.g. 3,32,32")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    from trainer.compilation.explain import ExplainError, explain_in_subprocess

    if args.batch < 1:
        fail("--batch must be at least 1")
    graph = load_for_cli(args.graph, args.input_shape)
    try:
        result = explain_in_subprocess(graph, batch=args.batch)
    except ExplainError as exc:
        fail(str(exc))
    print(json.dumps(result.to_dict(), indent=1) if args.json else result.text())
    return 0
