"""Inspection commands: ``autograd`` (the backward graph of one training step, per graph node)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from studio.cli_graph import fail, load_for_cli, parse_shape

if TYPE_CHECKING:
    from graph_editor.autograd.capture import AutogradCapture


# The autograd command's choices are named here so that building the parser needs no torch (importing
# graph_editor.autograd imports it: seconds that `runs`, `show` and `train` would pay at their start);
# capture_autograd refuses any other name, and a test checks these agree with its own.
PRECISION_CHOICES = ("fp32", "bf16", "fp16")
DEVICE_KIND_CHOICES = ("cpu", "cuda")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("autograd", help="the backward graph of one training step, per graph node",
                       description="Run one training step (forward, cross-entropy, backward) as fake CPU tensors "
                                   "and print, per graph node, the autograd nodes its forward created, the bytes "
                                   "they save for backward and where their gradients flow; then the totals.")
    p.add_argument("graph", help="a *.graph.json file")
    p.add_argument("--batch", type=int, default=1, help="batch size of the step (default 1)")
    p.add_argument("--precision", choices=PRECISION_CHOICES, default="fp32",
                   help="autocast of the forward (default fp32)")
    p.add_argument("--device-kind", choices=DEVICE_KIND_CHOICES, default="cpu",
                   help="the kind of device the graph is captured for (default cpu)")
    p.add_argument("--channels-last", action="store_true", help="weights and input channels_last, as the trainer "
                                                                "runs convnets")
    p.add_argument("--input-shape", type=parse_shape, help="override the input shape, e.g. 3,32,32")
    p.add_argument("--json", action="store_true", help="print one JSON object: every autograd node and the summary")
    p.set_defaults(func=cmd_autograd)

    p = sub.add_parser("inspect", help="a run's stored live inspection: per graph node gradients and activations",
                       description="Print the figures a run's worker measured at an inspected step (the inspect "
                                   "command, or train.inspect_every_s): per graph node ||dL/dy||, ||dL/dW||, "
                                   "weight norm, update ratio, activation mean/std, zero fraction, backward time; "
                                   "then the vanishing or exploding gradients and the step they began at.")
    p.add_argument("run_id", type=int, metavar="RUN_ID")
    p.add_argument("--step", type=int, help="the inspected step to show (default: the last)")
    p.add_argument("--db", help="run store URL (default: $TORCH_STUDIO_DB or the user data directory)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(func=cmd_inspect)


def cmd_autograd(args: argparse.Namespace) -> int:
    from graph_editor.autograd.capture import CaptureError, capture_autograd
    from graph_editor.building import BuildError

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
    from graph_editor.model.units import nbytes

    rows = [("node", "autograd", "saved", "gradients to", "autograd nodes")]
    for s in captured.summaries():
        names = ", ".join(name if n == 1 else f"{name} x{n}" for name, n in s.names.items())
        rows.append((s.owner, str(s.nodes), nbytes(s.saved_bytes), ", ".join(s.grads_to) or "-", names))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join([r[0].ljust(widths[0]), r[1].rjust(widths[1]), r[2].rjust(widths[2]),
                        r[3].ljust(widths[3]), r[4]]).rstrip() for r in rows]
    rule = "-" * max(len(line) for line in lines[:1])
    lines.insert(1, rule)
    lines.append(rule)
    params = sum(1 for n in captured.nodes if n.param)
    lines.append(f"{len(captured.nodes)} autograd nodes ({params} AccumulateGrad) over {len(captured.owners)} "
                 f"graph nodes, {len(captured.edges)} gradient edges; saved for backward "
                 f"{nbytes(captured.saved_bytes)} at batch {captured.batch}, {captured.precision}, "
                 f"{captured.device_kind} (ran on {captured.device})")
    if captured.note:
        lines.append(f"note: {captured.note}")
    return "\n".join(lines)


def cmd_inspect(args: argparse.Namespace) -> int:
    from studio.cli_train import open_store
    from trainer.inspection import InspectHistory, reports_from_metrics
    from trainer.store.runs import StoreError

    store = open_store(args.db)
    try:
        store.run(args.run_id)
        reports = reports_from_metrics(store.metrics(args.run_id))
    except StoreError as exc:
        fail(str(exc))
    if not reports:
        fail(f"run {args.run_id} has no inspections (send it the inspect command, or set train.inspect_every_s)")
    steps = [r.step for r in reports]
    if args.step is not None and args.step not in steps:
        fail(f"run {args.run_id} was not inspected at step {args.step}; inspected steps: "
             + ", ".join(str(s) for s in steps[-20:]))
    upto = [r for r in reports if args.step is None or r.step <= args.step]
    history = InspectHistory(upto)
    report = history.latest
    assert report is not None
    flags = history.flags()
    if args.json:
        data = report.to_dict()
        data["flags"] = [{"node": f.node, "kind": f.kind, "figure": f.figure, "value": f.value,
                          "first_step": f.first_step} for f in flags]
        data["steps"] = steps
        print(json.dumps(data, indent=1))
        return 0
    print(inspect_table(report, steps))
    for f in flags:
        print(f"{f.node}: gradient {f.kind} since step {f.first_step} ({f.figure} = {f.value:.3g})")
    return 0


def inspect_table(report, steps: list[int]) -> str:  # noqa: ANN001 - trainer.inspection.InspectReport
    """One row per graph node, in network order."""
    def num(v: float | None, fmt: str = ".3g") -> str:
        return "-" if v is None else format(v, fmt)

    rows = [("node", "||dL/dy||", "||dL/dW||", "||W||", "update", "mean", "std", "zeros", "bwd ms")]
    for n in report.nodes:
        rows.append((n.node, num(n.grad_out), num(n.grad_w), num(n.weight), num(n.update_ratio), num(n.act_mean),
                     num(n.act_std), "-" if n.zero_fraction is None else f"{n.zero_fraction:.0%}",
                     "-" if n.backward_s is None else f"{n.backward_s * 1e3:.2f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.append(f"step {report.step} ({len(steps)} inspection(s) stored, steps {steps[0]}..{steps[-1]})")
    return "\n".join(lines)
