"""Inspection commands: ``autograd`` (the backward graph of one training step, per graph node)."""

from __future__ import annotations

import argparse
import json

from graph_editor.build import BuildError
from graph_editor.build.analysis import format_count
from graph_editor.build.autograd import (
    DEVICE_KINDS,
    PRECISIONS,
    AutogradCapture,
    CaptureError,
    capture_autograd,
)
from studio.cli_graph import fail, load_for_cli, parse_shape


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("autograd", help="the backward graph of one training step, per graph node",
                       description="Run one training step (forward, cross-entropy, backward) as fake CPU tensors "
                                   "and print, per graph node, the autograd nodes its forward created, the bytes "
                                   "they save for backward and where their gradients flow; then the totals.")
    p.add_argument("graph", help="a *.graph.json file")
    p.add_argument("--batch", type=int, default=1, help="batch size of the step (default 1)")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32", help="autocast of the forward (default fp32)")
    p.add_argument("--device-kind", choices=DEVICE_KINDS, default="cpu",
                   help="the kind of device the graph is captured for (default cpu)")
    p.add_argument("--channels-last", action="store_true", help="weights and input channels_last, as the trainer "
                                                                "runs convnets")
    p.add_argument("--input-shape", type=parse_shape, help="override the input shape, e.g. 3,32,32")
    p.add_argument("--json", action="store_true", help="print one JSON object: every autograd node and the summary")
    p.set_defaults(func=cmd_autograd)


def cmd_autograd(args: argparse.Namespace) -> int:
    graph = load_for_cli(args.graph, args.input_shape)
    try:
        captured = capture_autograd(graph, args.batch, args.precision, args.device_kind,
                                    channels_last=args.channels_last)
    except (CaptureError, BuildError) as exc:
        fail(str(exc))
    print(json.dumps(captured.to_dict(), indent=1) if args.json else autograd_table(captured))
    return 0


def autograd_table(captured: AutogradCapture) -> str:
    """Per graph node, in network order: autograd nodes, saved bytes, gradients to; then totals."""
    rows = [("node", "autograd", "saved", "gradients to", "autograd nodes")]
    for s in captured.summaries():
        names = ", ".join(name if n == 1 else f"{name} x{n}" for name, n in s.names.items())
        rows.append((s.owner, str(s.nodes), format_count(s.saved_bytes, "B"), ", ".join(s.grads_to) or "-", names))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join([r[0].ljust(widths[0]), r[1].rjust(widths[1]), r[2].rjust(widths[2]),
                        r[3].ljust(widths[3]), r[4]]).rstrip() for r in rows]
    rule = "-" * max(len(line) for line in lines[:1])
    lines.insert(1, rule)
    lines.append(rule)
    params = sum(1 for n in captured.nodes if n.param)
    lines.append(f"{len(captured.nodes)} autograd nodes ({params} AccumulateGrad) over {len(captured.owners)} "
                 f"graph nodes, {len(captured.edges)} gradient edges; saved for backward "
                 f"{format_count(captured.saved_bytes, 'B')} at batch {captured.batch}, {captured.precision}, "
                 f"{captured.device_kind} (ran on {captured.device})")
    if captured.note:
        lines.append(f"note: {captured.note}")
    return "\n".join(lines)
