"""``torch-studio memory GRAPH``: the predicted peak memory of a training step, and the largest batch.

The prediction runs the trainer's own step on fake tensors (:mod:`trainer.memory.prediction`): no
real memory, no GPU, a second or two.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from graph_editor.model.units import nbytes
from studio.cli_graph import fail, load_for_cli, parse_shape

MAX_BYTES = 1 << 60   # 1 EiB: trainer.memory.prediction.MAX_BUDGET (not imported: it imports torch)
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000 ** 2, "mb": 1000 ** 2, "mib": 1024 ** 2,
          "g": 1000 ** 3, "gb": 1000 ** 3, "gib": 1024 ** 3, "t": 1000 ** 4, "tb": 1000 ** 4, "tib": 1024 ** 4}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("memory", help="predict the peak memory of a training step (and the largest batch that fits)")
    p.add_argument("graph", help="a *.graph.json file")
    p.add_argument("--batch", type=int, default=32, help="batch size (default 32)")
    p.add_argument("--optimizer", default="adamw", help="sgd, adamw, adam or rmsprop (default adamw)")
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16"), help="fp32 (default) or bf16 autocast")
    p.add_argument("--channels-last", action="store_true", help="weights and batches in channels_last")
    p.add_argument("--device", default="cpu", help="the device kind to predict for: cpu (default) or cuda")
    p.add_argument("--budget", type=parse_bytes, metavar="SIZE",
                   help="device memory, e.g. 8GiB or 512MiB: also find the largest batch that fits "
                        "(on cuda less a reserve for the context and the allocator)")
    p.add_argument("--checkpoint", action="append", default=[], metavar="SEGMENT",
                   help="activation checkpointing of a group id or a 'first..last' node range (repeatable)")
    p.add_argument("--input-shape", type=parse_shape, help="override the input shape, e.g. 3,32,32")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_memory)


def parse_bytes(text: str) -> int:
    """'8GiB', '512 MiB', '1.5GB', '2e9' -> bytes (binary prefixes with an i, decimal without)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size such as 8GiB, 512MiB or 2000000000")
    amount = float(m.group(1)) * _UNITS[unit]
    if not amount < MAX_BYTES:   # 1e400 is infinite: no device, and no integer
        raise argparse.ArgumentTypeError(f"'{text}' is larger than any device (at most 1 EiB, {MAX_BYTES:,} bytes)")
    value = int(amount)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive size")
    return value


def cmd_memory(args: argparse.Namespace) -> int:
    from trainer.memory.prediction import (
        MemoryPredictionError,
        largest_batch,
        predict_memory,
        search_capped,
        usable_bytes,
    )

    graph = load_for_cli(args.graph, args.input_shape)
    kw = dict(optimizer=args.optimizer, precision=args.precision, channels_last=args.channels_last,
              device=args.device, checkpoint=args.checkpoint)
    try:
        pred = predict_memory(graph, args.batch, **kw)
        fit = None
        if args.budget:
            usable = usable_bytes(args.budget, args.device)
            n, best = largest_batch(graph, usable, **kw)
            fit = {"budget_bytes": args.budget, "usable_bytes": usable, "largest_batch": n,
                   "largest_batch_peak_bytes": best.peak_bytes if best else None,
                   "largest_batch_is_search_cap": search_capped(n)}
    except MemoryPredictionError as exc:
        fail(str(exc))
    out: dict[str, Any] = pred.to_dict()
    out["unmodelled"] = pred.unmodelled_note()
    out["graph"] = args.graph
    if fit:
        out.update(fit)
        out["fits"] = pred.most_bytes <= fit["usable_bytes"]    # with oneDNN's bf16 buffers at their bound
    if args.json:
        json.dump(out, sys.stdout)
        print()
    else:
        print(render(out))
    return 0


def render(out: dict[str, Any]) -> str:
    """The prediction as a few readable lines."""
    head = (f"{out['graph']}: batch {out['batch']}, {out['optimizer']}, {out['precision']}"
            f"{', channels_last' if out['channels_last'] else ''}, {out['device']}"
            f"{', checkpointing ' + ' '.join(out['checkpoint']) if out['checkpoint'] else ''}")
    lines = [head, f"peak {nbytes(out['peak_bytes'])} in the {out['peak_phase']}"
                   f"{' at ' + out['peak_node'] if out['peak_node'] else ''}"
                   f"{'; ' + out['unmodelled'] if out.get('unmodelled') else ''}"]
    for kind, value in out["parts"].items():
        if kind == "data" and not value:     # the dataset counts only where a run keeps it on the device
            continue
        share = value / max(out["peak_bytes"], 1)
        lines.append(f"  {kind:<12} {nbytes(value):>12}  {share:6.1%}")
    top = sorted(((k, v["at_peak"]) for k, v in out["nodes"].items() if v["at_peak"] > 0), key=lambda kv: -kv[1])[:5]
    if top:
        lines.append("held at the peak by: " + ", ".join(f"{k} {nbytes(v)}" for k, v in top))
    if "largest_batch" in out:
        n = out["largest_batch"]
        verdict = "fits" if out["fits"] else "does NOT fit"
        lines.append(f"budget {nbytes(out['budget_bytes'])} (usable {nbytes(out['usable_bytes'])}): "
                     f"batch {out['batch']} {verdict}")
        peak = f" (peak {nbytes(out['largest_batch_peak_bytes'])})" if n else " (not even the smallest batch)"
        if out.get("largest_batch_is_search_cap"):
            lines.append(f"largest batch that fits: {n:,} or more (the search stops at {n:,}; its peak "
                         f"{nbytes(out['largest_batch_peak_bytes'])})")
        else:
            lines.append(f"largest batch that fits: {n:,}{peak}")
    return "\n".join(lines)
