"""``torch-studio predict MODEL INPUT...``: the most probable classes of image files, folders of them
or dataset files (.npz, .csv), with a run, an exported .onnx/.pt2/.pte, or a graph and its weights.

Inputs are given as the dataset file holds them (raw values; images as their pixels): every model
predicted here standardises inside itself. Exit status 0, or 1 with one line naming what is wrong.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("predict", help="the most probable classes of images or dataset samples",
                       description="Predict the classes of raw inputs (image files, folders of images, .npz or "
                                   ".csv dataset files) with a run, an exported model or a graph and its weights.")
    p.add_argument("model", metavar="MODEL", help="a run id, an exported .onnx/.pt2/.pte file, or a *.graph.json "
                                                  "with --checkpoint")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="image files, folders of images, .npz or .csv files")
    p.add_argument("--checkpoint", default=None, metavar="best|last|PATH",
                   help="a run's best (default) or last checkpoint; for a graph, its weights file")
    p.add_argument("--top", type=int, default=1, metavar="K", help="the K most probable classes (default 1)")
    p.add_argument("--json", action="store_true",
                   help='one JSON object per sample, in input order: {"input", "top": [{"index", "class", "prob"}]}')
    p.add_argument("--db", default=None, help="run store URL (default: TORCH_STUDIO_DB or the user data folder)")
    p.set_defaults(func=cmd_predict)


def cmd_predict(args: argparse.Namespace) -> int:
    from exporters import ExportError
    from exporters.predict import open_model
    from exporters.predict_inputs import InputError, read_inputs

    if args.top < 1:
        return _error(f"--top must be at least 1, not {args.top}")
    try:
        predictor = open_model(args.model, checkpoint=args.checkpoint, store=args.db)
        names, x = read_inputs(args.inputs, tuple(predictor.preprocessing.input_shape))
        tops = predictor.top(x, min(args.top, len(predictor.preprocessing.classes)))
    except (ExportError, InputError) as exc:
        return _error(str(exc))
    for name, top in zip(names, tops, strict=True):
        if args.json:
            print(json.dumps({"input": name, "top": top}))
        else:
            print(f"{name}: " + ", ".join(f"{t['class']} ({t['prob']:.1%})" for t in top))
    return 0


def _error(message: str) -> int:
    print(f"torch-studio predict: {message}", file=sys.stderr)
    return 1
