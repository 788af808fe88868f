"""A compile that starts warm: which models and recipes the compile caches hold, and warming them.

On this project's 2-core CPU the first compiled step of digits_cnn takes 27.6 s with cold caches and
2.3 s with warm ones (:mod:`.cache` keeps them in the user cache directory across runs).

``python -m trainer.compilation.warm [GRAPH ...] [--batch-size N]`` warms the caches ahead of time for
the templates a CPU trains (inputs up to 64 pixels wide: digits_cnn, lenet5, mlp, resnet18_cifar) or the
graphs given, on the CPU, skipping those the index holds: for each it runs the worker itself
(``python -m trainer run``, which writes the index) for one epoch of three batches of synthetic images
of the graph's input shape, at the run spec's defaults with ``compile: default``: the training step and
the evaluation it compiles are the ones a run of that recipe compiles. The studio runs it in the
background at idle priority (:mod:`studio.compile_warmup`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

from .recipes import index, setup_key

TEMPLATES = Path(__file__).resolve().parents[2] / "assets" / "templates"
SYNTHETIC_BATCHES = 3     # train and val splits of at least a batch each
CPU_SIDE = 64             # templates whose images are at most this wide are warmed by default (CPU-sized)


def synthetic_dataset(graph_path: Path, folder: Path, batch: int) -> Path:
    """Random uint8 images of the graph's input shape, every class present, as an ``.npz`` dataset."""
    import numpy as np

    from graph_editor.model import load_graph

    graph = load_graph(graph_path)
    classes = max(2, int(graph.num_classes or 2))
    n = SYNTHETIC_BATCHES * batch
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (n, *graph.input_spec.shape), dtype=np.uint8)
    path = folder / f"{graph_path.name}.npz"
    np.savez(path, x=x, y=np.arange(n) % classes)
    return path


def warm_graph(graph_path: Path, batch: int, folder: Path) -> tuple[str, float | None]:
    """Compile one graph's training step and evaluation into the caches by running the worker itself on
    synthetic images for one short epoch (the same code, so the same graphs: a copy of its step missed
    Inductor's cache on the backward and the optimizer); (key, seconds of the compiling step, or None
    when the index had it already)."""
    from ..checks import setup
    from ..protocol import events as ev
    from ..protocol.client import WorkerClient
    from ..spec import SCHEMA_VERSION, spec_from_dict

    spec = {"schema_version": SCHEMA_VERSION, "name": f"warm-up {graph_path.stem}", "device": "cpu",
            "model": {"graph": str(graph_path)},
            "data": {"dataset": str(synthetic_dataset(graph_path, folder, batch))},
            "train": {"epochs": 1, "batch_size": batch}, "precision": {"compile": "default"},
            "checkpoints": {"best": False, "last": False}}
    key = setup_key(setup(spec_from_dict(spec)))
    if index().seconds(key) is not None:
        return key, None
    path = folder / f"{graph_path.stem}.spec.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    with WorkerClient.run(path, db=f"sqlite:///{folder / 'warm-up.sqlite'}", die_with_parent=True) as worker:
        events = list(worker.events())
        code = worker.wait()
    done = [e for e in events if isinstance(e, ev.CompileDone)]
    if code != 0 or not done:
        failed = next((e for e in events if isinstance(e, ev.Failed)), None)
        raise RuntimeError(failed.message if failed else f"the worker exited {code}: {worker.stderr[-500:]}")
    return key, done[0].seconds


def cpu_templates() -> list[Path]:
    """The templates a CPU run trains: inputs up to ``CPU_SIDE`` pixels wide (the 224x224 ImageNet ones
    take gigabytes and minutes a step on a CPU; they are GPU models)."""
    from graph_editor.model import load_graph

    return [p for p in sorted(TEMPLATES.glob("*.graph.json"))
            if max(load_graph(p).input_spec.shape[1:] or (0,)) <= CPU_SIDE]


def idle_priority() -> None:
    """This process (and the threads it starts later) on the CPU only when nothing else wants it."""
    with contextlib.suppress(AttributeError, OSError):
        os.nice(19)
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.compilation.warm",
                                     description="Compile the templates' training steps into the compile caches.")
    parser.add_argument("graphs", nargs="*", type=Path, help="graph files (default: every template)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: the run spec's")
    parser.add_argument("--idle", action="store_true", help="run at idle CPU priority (SCHED_IDLE, nice 19)")
    parser.add_argument("--parent", type=int, help="exit when this process does (the studio)")
    args = parser.parse_args(argv)
    if args.parent:
        from ..distributed.lifeline import die_with_parent

        die_with_parent(args.parent)
    if args.idle:
        idle_priority()
    from ..spec import RunSpec

    batch = args.batch_size or RunSpec().train.batch_size
    graphs = args.graphs or cpu_templates()
    failures = 0
    with tempfile.TemporaryDirectory(prefix="torch-studio-warm-") as tmp:
        for graph in graphs:
            try:
                _key, seconds = warm_graph(graph, batch, Path(tmp))
            except Exception as exc:  # noqa: BLE001 - one graph that cannot compile leaves the others to warm
                failures += 1
                print(f"{graph.name}: not warmed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}",
                      file=sys.stderr, flush=True)
                continue
            print(f"{graph.name}: " + ("warm already" if seconds is None else f"compiled in {seconds:.1f} s"),
                  flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    from trainer.compilation.cache import compile_cache_dir

    compile_cache_dir()   # before torch is imported, as the worker's entry does (its children inherit it)
    raise SystemExit(main())
