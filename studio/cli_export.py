"""``torch-studio export``: one format of a graph file or a stored run, proven against PyTorch.

Exit status 0 when the export passed its checks (or --no-verify), 1 when it failed or could not be
made; the report is printed and kept beside the output either way.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exporters import ExportSource


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from exporters.registry import describe_formats, format_help  # read from the format files: no torch

    names = ", ".join(i.name for i in describe_formats())
    p = sub.add_parser("export", help=f"export a graph or a run ({names}) and verify it against PyTorch",
                       description="Export a graph file or a stored run and prove the result matches PyTorch. "
                                   "A failed check exits 1 and keeps the report beside the output.")
    p.add_argument("source", metavar="RUN_ID|GRAPH", help="a run id from the run store, or a *.graph.json file")
    p.add_argument("--format", "-f", required=True, metavar="FORMAT", help=f"one of: {format_help()}")
    p.add_argument("-o", "--output", required=True, metavar="PATH",
                   help="the file (or folder) to write; a folder gets <model name>.<suffix>")
    p.add_argument("--checkpoint", default=None, metavar="best|last|PATH",
                   help="a run's best (default) or last checkpoint, or a weights file (safetensors or a "
                        "torch.save'd state dict); a graph without one exports fresh weights")
    p.add_argument("--opset", type=int, default=None, help="ONNX opset (default 20, the exporter's own)")
    p.add_argument("--external-data", action="store_true",
                   help="ONNX: keep the weights in a .data file beside the model (automatic above 1.5 GB)")
    p.add_argument("--no-verify", action="store_true", help="skip the checks (the report says unverified)")
    p.add_argument("--batch", type=int, default=None,
                   help="samples to verify with (default: 64 for a run, 3 for a graph)")
    p.add_argument("--db", default=None, help="run store URL (default: TORCH_STUDIO_DB or the user data folder)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from exporters import ExportError, ExportOptions, export

    if args.batch is not None and args.batch < 1:
        return _error("--batch must be at least 1")
    options = ExportOptions(opset=args.opset, verify=not args.no_verify,
                            external_data=True if args.external_data else None)
    if args.batch == options.example_batch:
        options.example_batch = args.batch + 1  # verification must use another batch size than the trace
    try:
        source = _source(args)
        report = export(source, args.format, args.output, options,
                        progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    except ExportError as exc:
        return _error(str(exc))
    print(report.to_json() if args.json else report.to_text(), end="\n" if args.json else "")
    if report.report_files and not args.json:
        print(f"report: {report.report_files[1]}")
    return 0 if report.ok else 1


def _source(args: argparse.Namespace) -> ExportSource:
    from exporters import ExportError, from_graph, from_run
    from graph_editor.model import GraphError, load_graph

    text = args.source
    if text.isdigit() and not Path(text).exists():
        kwargs = {"verify_batch": args.batch} if args.batch else {}
        return from_run(int(text), checkpoint=args.checkpoint or "best", store=args.db, **kwargs)
    if args.checkpoint in ("best", "last"):
        raise ExportError(f"--checkpoint {args.checkpoint} needs a RUN_ID; for a graph file give a weights file")
    try:
        graph = load_graph(text)
    except GraphError as exc:
        raise ExportError(str(exc)) from None
    kwargs = {"verify_batch": args.batch} if args.batch else {}
    return from_graph(graph, checkpoint=args.checkpoint, **kwargs)


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1
